//! A panic in any runtime service stops the worker with an error naming the service (so the
//! process exits non-zero and its supervisor restarts it) instead of leaving a worker that
//! looks alive and does nothing; and the jobs it held are not lost.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{Registry, Shutdown, Worker, WorkerError};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_any_service_stops_the_worker_with_its_name() {
    for service in [
        "fetcher",
        "completer",
        "heartbeater",
        "notifier",
        "leader",
        "scheduler",
        "reaper",
        "pruner",
        "sweeper",
        "presence",
        "samples",
    ] {
        let db = TestDb::new().await;
        let mut r = Registry::default();
        r.register_fn("noop", |_, _| async { Ok(()) });
        let mut cfg = config("q", 4).lease(Duration::from_secs(3));
        cfg.poll_interval = Duration::from_millis(100);
        // Every leader task gets a turn within the test's bounds.
        cfg.reap_interval = Duration::from_millis(300);
        cfg.prune_interval = Duration::from_millis(300);
        cfg.presence_interval = Duration::from_millis(300);
        cfg.sample_interval = Duration::from_millis(300);
        let w = Arc::new(Worker::new(db.second_store(6).await, r, cfg).unwrap());
        let run = {
            let w = w.clone();
            tokio::spawn(async move { w.run(Shutdown::default()).await })
        };
        // Let it start (it listens and has claimed once), then arm the fault and give every
        // service a turn: a job (fetcher, completer, notifier), time (heartbeat, leader).
        let m = w.metrics();
        eventually(Duration::from_secs(20), "started", || {
            let m = m.clone();
            async move { m.snapshot().claims >= 1 && m.snapshot().listen_connects >= 1 }
        })
        .await;
        w.inject_panic(service);
        db.store
            .enqueue(&NewJob::new("q", "noop", json!({})))
            .await
            .unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .unwrap_or_else(|_| panic!("{service}: the worker ran on after the panic"))
            .unwrap();
        match ended {
            Err(WorkerError::ServiceFailed { service: s, reason }) => {
                assert_eq!(s, service);
                assert!(reason.contains("injected panic"), "{reason}");
            }
            other => panic!("{service}: {other:?}"),
        }
        // Nothing it held is lost: every job is succeeded, pending or (for a dead
        // completer) still running under a lease the reaper will take back.
        let lost = db
            .scalar("SELECT count(*) FROM {schema}.jobs WHERE state NOT IN ('succeeded', 'pending', 'running')")
            .await;
        assert_eq!(lost, 0, "{service}");
    }
}
