//! An application's view: one dependency (`docket`), one prelude, typed enqueue (queue and
//! kind from the job type), and the `testing` helpers — run a job inline, drain a queue,
//! see what an open transaction enqueued.

use docket::prelude::*;
use docket_testkit::TestDb;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct SendWelcome {
    user_id: i64,
}

impl Job for SendWelcome {
    const KIND: &'static str = "send_welcome";
    const QUEUE: &'static str = "email";
    async fn run(self, ctx: JobContext) -> JobResult {
        if self.user_id < 0 {
            return Err(JobError::discard(format!(
                "no user {} (job {})",
                self.user_id, ctx.id
            )));
        }
        Ok(())
    }
}

#[tokio::test]
async fn typed_enqueue_takes_queue_and_kind_from_the_type() {
    let db = TestDb::new().await;
    let e = db
        .store
        .enqueue_job(&SendWelcome { user_id: 42 })
        .await
        .unwrap();
    let rec = db.store.get(e.id).await.unwrap();
    assert_eq!(
        (rec.queue.as_str(), rec.kind.as_str()),
        ("email", "send_welcome")
    );
    assert_eq!(rec.args, serde_json::json!({"user_id": 42}));
    let e = db
        .store
        .enqueue_job_with(&SendWelcome { user_id: 7 }, |j| {
            j.priority(-5).unique_key("welcome:7")
        })
        .await
        .unwrap();
    let again = db
        .store
        .enqueue_job_with(&SendWelcome { user_id: 7 }, |j| j.unique_key("welcome:7"))
        .await
        .unwrap();
    assert!(again.duplicate && again.id == e.id);
    assert_eq!(db.store.get(e.id).await.unwrap().priority, -5);
    // Drain the queue with a registry of the typed handler.
    let mut registry = Registry::default();
    registry.register::<SendWelcome>();
    let report = docket::testing::drain(&db.store, registry, &["email"])
        .await
        .unwrap();
    assert_eq!(report.metrics.completed, 2);
}

#[tokio::test]
async fn run_job_runs_one_job_to_its_end() {
    let db = TestDb::new().await;
    let ok = docket::testing::run_job(&db.store, SendWelcome { user_id: 1 })
        .await
        .unwrap();
    assert_eq!((ok.state, ok.attempt), (JobState::Succeeded, 1));
    let bad = docket::testing::run_job(&db.store, SendWelcome { user_id: -1 })
        .await
        .unwrap();
    assert_eq!(bad.state, JobState::Dead);
    assert!(
        bad.errors[0].message.starts_with("no user -1"),
        "{:?}",
        bad.errors
    );
}

#[tokio::test]
async fn enqueued_in_shows_what_an_open_transaction_enqueued() {
    let db = TestDb::new().await;
    db.store
        .enqueue_job(&SendWelcome { user_id: 1 })
        .await
        .unwrap(); // not this transaction's
    let mut tx = db.pool.begin().await.unwrap();
    db.store
        .enqueue_job_in(&mut tx, &SendWelcome { user_id: 2 })
        .await
        .unwrap();
    let seen = docket::testing::enqueued_in(&db.store, &mut tx, "send_welcome")
        .await
        .unwrap();
    assert_eq!(seen, vec![serde_json::json!({"user_id": 2})]);
    tx.rollback().await.unwrap();
    let mut other = db.pool.begin().await.unwrap();
    let seen = docket::testing::enqueued_in(&db.store, &mut other, "send_welcome")
        .await
        .unwrap();
    assert!(seen.is_empty());
}

#[test]
fn configuration_errors_are_typed() {
    let mut c = WorkerConfig::default().queue("q", 1);
    c.leader_ttl = c.reap_interval;
    assert!(matches!(
        c.validate(),
        Err(docket::ConfigError::LeaderTtlTooShort { .. })
    ));
    let mut c = WorkerConfig::default().queue("q", 1);
    c.heartbeat_interval = c.lease;
    assert!(matches!(
        c.validate(),
        Err(docket::ConfigError::HeartbeatNotShorterThanLease { .. })
    ));
    let c = WorkerConfig::default().queue("", 1);
    assert!(matches!(
        c.validate(),
        Err(docket::ConfigError::Queue { .. })
    ));
}
