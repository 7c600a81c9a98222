//! Batches through the runtime, on every engine: a batch opened inside the application's
//! transaction exists iff it commits (members added the same way); a worker with the
//! library's defaults runs the members, a member's attempt to spawn is refused, and the
//! callbacks due run once each, reading the batch's counts with `ctx.batch()`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket_core::batches::{Batch, BatchResult, Callback, JobSpec};
use docket_core::*;
use docket_testkit::conformance::{Harness, MySqlHarness, PgHarness, SqliteHarness};
use docket_worker::{JobContext, JobError, Registry, Shutdown, Worker, WorkerConfig};
use serde_json::json;

type Told = Arc<Mutex<Vec<BatchResult>>>;

fn registry<S: Store>(told: Told) -> Registry<S> {
    let mut r = Registry::default();
    r.register_fn("member", |_, _ctx: JobContext| async move { Ok(()) });
    r.register_fn("spawner", |_, ctx: JobContext| async move {
        ctx.spawn(
            "more",
            vec![("x".into(), NewJob::new("q", "member", json!({})))],
            None,
        )
        .await?;
        Ok(())
    });
    r.register_fn("callback", move |_, ctx: JobContext| {
        let told = told.clone();
        async move {
            let b = ctx
                .batch()
                .ok_or_else(|| JobError::discard("not a batch's callback"))?;
            told.lock().unwrap().push(b);
            Ok(())
        }
    });
    r
}

async fn a_batch_runs_through_a_worker_with_the_defaults<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let cb = || NewJob::new("q", "callback", json!({}));
    let spec = Batch::new("import")
        .job(NewJob::new("q", "member", json!({})))
        .job(NewJob::new("q", "spawner", json!({})).max_attempts(1))
        .on_success(cb())
        .on_complete(cb())
        .on_failure(cb())
        .open()
        .spec(&Limits::default())
        .expect("valid")
        .clone();

    // Rolled back: nothing.
    let mut txn = <H::S as InTransaction>::begin(&s).await.unwrap();
    s.open_batch_in(<H::S as InTransaction>::conn(&mut txn), &spec)
        .await
        .unwrap();
    <H::S as InTransaction>::rollback(txn).await.unwrap();
    assert!(
        s.batches(10).await.unwrap().is_empty(),
        "a rolled-back batch is not there"
    );
    assert_eq!(
        s.stats().await.unwrap().queues.len(),
        0,
        "nor are its members"
    );

    // Committed, and grown inside another transaction.
    let mut txn = <H::S as InTransaction>::begin(&s).await.unwrap();
    let opened = s
        .open_batch_in(<H::S as InTransaction>::conn(&mut txn), &spec)
        .await
        .unwrap();
    <H::S as InTransaction>::commit(txn).await.unwrap();
    let mut txn = <H::S as InTransaction>::begin(&s).await.unwrap();
    let more = [JobSpec::of(&NewJob::new("q", "member", json!({}))).unwrap()];
    let added = s
        .add_to_batch_in(<H::S as InTransaction>::conn(&mut txn), opened.id, &more)
        .await
        .unwrap();
    <H::S as InTransaction>::commit(txn).await.unwrap();
    assert_eq!(added.len(), 1);
    s.close_batch(opened.id).await.unwrap();

    let told: Told = Default::default();
    let mut cfg = WorkerConfig::default().queue("q", 4);
    cfg.poll_interval = Duration::from_millis(100);
    let worker = Arc::new(Worker::new(s.clone(), registry(told.clone()), cfg).expect("worker"));
    let shutdown = Shutdown::default();
    let (w, sd) = (worker.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w.run(sd).await.expect("run") });
    let t = told.clone();
    docket_testkit::eventually(Duration::from_secs(50), "both callbacks ran", move || {
        let t = t.clone();
        async move { t.lock().unwrap().len() >= 2 }
    })
    .await;
    shutdown.graceful.cancel();
    task.await.expect("worker task");

    let st = s.batch(opened.id).await.unwrap();
    assert_eq!(
        (st.state(), st.total, st.succeeded, st.dead),
        ("failed", 3, 2, 1)
    );
    let spawner = s.get(opened.jobs[1]).await.unwrap();
    assert_eq!(spawner.state, JobState::Dead);
    assert!(
        spawner
            .errors
            .iter()
            .any(|e| e.message.contains("cannot spawn")),
        "{:?}",
        spawner.errors
    );
    let mut told = told.lock().unwrap().clone();
    told.sort_by_key(|b| b.callback.as_str());
    assert_eq!(
        told.iter().map(|b| b.callback).collect::<Vec<_>>(),
        vec![Callback::OnComplete, Callback::OnFailure],
        "each due callback once, on_success not"
    );
    assert!(told
        .iter()
        .all(|b| b.id == opened.id && b.total == 3 && b.dead == 1));
}

macro_rules! engines {
    ($($m:ident: $h:ty),*) => {
        $(
            mod $m {
                use super::*;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn a_batch_runs_through_a_worker_with_the_defaults() {
                    super::a_batch_runs_through_a_worker_with_the_defaults::<$h>().await;
                }
            }
        )*
    };
}

engines!(postgres: PgHarness, sqlite: SqliteHarness, mysql: MySqlHarness);
