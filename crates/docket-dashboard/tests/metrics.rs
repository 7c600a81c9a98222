//! Prometheus metrics from a real worker run and from the database: the job counters per
//! queue, kind and outcome, the histograms, the gauges, and the per-minute samples behind the
//! dashboard's charts. One test in this binary: the recorder is process-wide.

mod common;

use std::time::Duration;

use common::*;
use docket_core::*;
use docket_dashboard::Options;
use docket_testkit::TestDb;
use docket_worker::{JobError, Registry, Shutdown, Worker, WorkerConfig};
use serde_json::json;

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_run_shows_in_the_metrics_and_the_samples() {
    let handle = docket_dashboard::metrics::install().unwrap();
    let db = TestDb::new().await;
    let s = &db.store;
    let mut jobs: Vec<NewJob> = (0..5)
        .map(|i| NewJob::new("m", "ok", json!({"i": i})))
        .collect();
    jobs.push(NewJob::new("m", "bad", json!({})).max_attempts(1));
    jobs.push(NewJob::new("m", "again", json!({})).max_attempts(3));
    s.enqueue_many(&jobs).await.unwrap();
    // And a workflow of two nodes: the second waits for the first.
    let g = docket_core::workflow::Workflow::new("two")
        .add("a", NewJob::new("m", "ok", json!({"i": "a"})))
        .add_after("b", NewJob::new("m", "ok", json!({"i": "b"})), ["a"])
        .graph(&docket_core::Limits::default())
        .unwrap()
        .clone();
    s.enqueue_workflow(&g).await.unwrap();

    let mut r = Registry::default();
    r.register_fn("ok", |_, _| async { Ok(()) });
    r.register_fn("bad", |_, _| async { Err(JobError::retry("nope")) });
    r.register_fn("again", |_, ctx| async move {
        if ctx.attempt == 1 {
            Err(JobError::retry("once"))
        } else {
            Ok(())
        }
    });
    // Rows kept: the test waits for every outcome, successes included, in the table.
    let mut cfg = WorkerConfig::default().queue("m", 4).keep_succeeded(true);
    cfg.poll_interval = Duration::from_millis(100);
    let w = std::sync::Arc::new(Worker::new(db.second_store(6).await, r, cfg).unwrap());
    let shutdown = Shutdown::default();
    let run = tokio::spawn({
        let (w, shutdown) = (w.clone(), shutdown.clone());
        async move { w.run(shutdown).await }
    });
    // The retry waits for its backoff; bring it forward instead of waiting.
    docket_testkit::eventually(Duration::from_secs(60), "every job finished", || async {
        let page = s
            .search(&JobQuery {
                kind: Some("again".into()),
                state: Some(JobState::Pending),
                ..Default::default()
            })
            .await
            .unwrap();
        for j in page.jobs.iter().filter(|j| j.attempt > 0) {
            let _ = s.run_now(j.id).await;
        }
        let done = db
            .scalar(
                "SELECT (SELECT count(*) FROM {schema}.jobs WHERE state IN ('succeeded', 'dead'))
                      + (SELECT coalesce(sum(n), 0) FROM {schema}.jobs_succeeded)",
            )
            .await;
        done == 9
    })
    .await;
    shutdown.graceful.cancel();
    run.await.unwrap().unwrap();
    // An open batch (no member yet) and an empty one closed at once (succeeded).
    for b in [
        docket_core::Batch::new("open").open(),
        docket_core::Batch::new("done"),
    ] {
        s.open_batch(b.spec(&Limits::default()).unwrap())
            .await
            .unwrap();
    }
    // Two outbox messages no relay has published.
    for i in 0..2 {
        let m = docket_core::outbox::NewMessage::new("orders.paid", &serde_json::json!({ "i": i }));
        s.publish(&m.unwrap()).await.unwrap();
    }

    let base = serve(
        s.clone(),
        Options {
            prometheus: Some(handle),
            ..Default::default()
        },
    )
    .await;
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v = |series: &str| value(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    assert_eq!(v(r#"docket_jobs_enqueued_total{queue="m",kind="ok"}"#), 5.0);
    assert_eq!(v(r#"docket_jobs_claimed_total{queue="m",kind="ok"}"#), 7.0);
    assert_eq!(
        v(r#"docket_jobs_completed_total{queue="m",kind="ok",outcome="succeeded"}"#),
        7.0
    );
    assert_eq!(
        v(r#"docket_jobs_completed_total{queue="m",kind="bad",outcome="dead"}"#),
        1.0
    );
    assert_eq!(
        v(r#"docket_jobs_completed_total{queue="m",kind="again",outcome="retried"}"#),
        1.0
    );
    assert_eq!(
        v(r#"docket_jobs_completed_total{queue="m",kind="again",outcome="succeeded"}"#),
        1.0
    );
    assert_eq!(v(r#"docket_jobs_failed_total{queue="m",kind="bad"}"#), 1.0);
    // Series that never moved exist at 0 from the worker's start (an alert's rate() sees
    // the first event).
    assert_eq!(
        v(r#"docket_jobs_completed_total{queue="m",kind="ok",outcome="dead"}"#),
        0.0
    );
    assert_eq!(v(r#"docket_jobs_failed_total{queue="m",kind="ok"}"#), 0.0);
    assert_eq!(v(r#"docket_leases_lost_total{queue="m",kind="ok"}"#), 0.0);
    assert_eq!(
        v(r#"docket_fenced_writes_total{queue="m",kind="ok",op="complete"}"#),
        0.0
    );
    assert_eq!(v("docket_database_gauges_ok"), 1.0);
    assert_eq!(
        v(r#"docket_job_run_seconds_count{queue="m",kind="ok"}"#),
        7.0
    );
    assert!(text.contains(r#"docket_job_run_seconds_bucket{queue="m",kind="ok",le="0.005"}"#));
    assert_eq!(
        v(r#"docket_job_queue_wait_seconds_count{queue="m"}"#),
        10.0,
        "9 jobs, one twice"
    );
    assert_eq!(
        v(r#"docket_workflow_dependency_wait_seconds_count{queue="m"}"#),
        1.0,
        "one node waited for a parent"
    );
    assert_eq!(v(r#"docket_workflows{state="succeeded"}"#), 1.0);
    assert_eq!(v(r#"docket_workflows{state="running"}"#), 0.0);
    assert_eq!(v(r#"docket_batches{state="open"}"#), 1.0);
    assert_eq!(v(r#"docket_batches{state="succeeded"}"#), 1.0);
    assert_eq!(v(r#"docket_batches{state="failed"}"#), 0.0);
    assert_eq!(
        v("docket_outbox_unpublished"),
        2.0,
        "the two outbox messages"
    );
    assert_eq!(v("docket_outbox_failing"), 0.0);
    assert!(v("docket_outbox_oldest_unpublished_seconds") >= 0.0);
    assert!(v(r#"docket_claim_duration_seconds_count{queue="m"}"#) >= 1.0);
    assert_eq!(v(r#"docket_queue_jobs{queue="m",state="dead"}"#), 1.0);
    assert_eq!(v(r#"docket_queue_jobs{queue="m",state="pending"}"#), 0.0);
    assert_eq!(v(r#"docket_queue_paused{queue="m"}"#), 0.0);
    assert!(v("docket_table_bytes") > 0.0);
    assert!(v("docket_table_index_bytes") > 0.0);
    assert!(text.contains("# HELP docket_jobs_completed_total"));
    assert!(text.contains("# TYPE docket_job_run_seconds histogram"));

    // The samples the worker flushed when it stopped: 8 succeeded, 2 failed, 10 waits.
    let samples = s.samples(Duration::from_secs(3600)).await.unwrap();
    let total = |f: fn(&Sample) -> i64| {
        samples
            .iter()
            .filter(|x| x.queue == "m")
            .map(f)
            .sum::<i64>()
    };
    assert_eq!(total(|x| x.succeeded), 8, "{samples:?}");
    assert_eq!(total(|x| x.failed), 2);
    assert_eq!(total(|x| x.wait_count), 10);

    // The worker's own endpoint (what `docket work --metrics-listen` serves).
    let m = serve_router(docket_dashboard::metrics::router(
        s.clone(),
        docket_dashboard::metrics::install().unwrap(),
    ))
    .await;
    let text = client()
        .get(format!("{m}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("docket_jobs_claimed_total"));
}
