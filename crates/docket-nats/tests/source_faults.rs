//! The JetStream source under faults: in-progress acks holding a long job, a worker past
//! its delivery writing nothing, a last run without an outcome dead-lettered, shutdown
//! handing jobs back, a worker cut off from its server.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self};
use docket_core::NewJob;
use docket_nats::{JobQueue, Source, SourceConfig};
use docket_testkit::{eventually, nats};
use docket_worker::{JobError, JobResult, Registry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::*;

/// A job running three leases long is held by its in-progress acks: the second worker on
/// the consumer never gets it, and it runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_job_is_held_by_in_progress_acks() {
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let runs: Runs = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let mut reg = Registry::<()>::default();
    {
        let (runs, release) = (runs.clone(), release.clone());
        reg.register_fn("long", move |_, ctx| {
            runs.lock()
                .unwrap()
                .push(("long".into(), ctx.id.0, ctx.attempt));
            let release = release.clone();
            async move {
                release.notified().await;
                Ok(())
            }
        });
    }
    let a = Source::new(client.clone(), reg.clone(), st.config())
        .await
        .unwrap();
    let b = Source::new(self::client().await, reg, st.config())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let ta = tokio::spawn({
        let (a, stop) = (a.clone(), stop.clone());
        async move { a.run(stop).await }
    });
    let tb = tokio::spawn({
        let (b, stop) = (b.clone(), stop.clone());
        async move { b.run(stop).await }
    });
    let q = JobQueue::new(js.clone(), &st.subject()).unwrap();
    q.enqueue_new(&NewJob::new("default", "long", json!({})), None)
        .await
        .unwrap();
    // Six confirmed beats: the job has run two leases (a beat every third of one).
    eventually(
        Duration::from_secs(30),
        "six confirmed in-progress acks",
        || async { a.report().beats + b.report().beats >= 6 },
    )
    .await;
    release.notify_waiters();
    eventually(Duration::from_secs(30), "the job succeeded", || async {
        a.report().succeeded + b.report().succeeded == 1
    })
    .await;
    stop.cancel();
    let (ra, rb) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());
    assert_eq!(
        runs.lock().unwrap().len(),
        1,
        "one run: {:?}",
        runs.lock().unwrap()
    );
    assert_eq!(
        ra.delivered + rb.delivered,
        1,
        "delivered once: {ra:?} {rb:?}"
    );
    assert_eq!(ra.lost + rb.lost, 0);
    st.drop_it().await;
}

/// A worker whose delivery ran out while its handler still ran (what a paused process
/// does: no watchdog stops it) writes nothing when the handler ends. The job's successor
/// failed it with a retry meanwhile; had the stale worker's ack gone through, the retry would
/// be lost — instead the third run happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_past_its_delivery_writes_nothing() {
    let (ca, cb) = (client().await, client().await);
    let js = jetstream::new(ca.clone());
    let st = Streams::new(&js).await;
    let runs: Runs = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let mut reg = Registry::<()>::default();
    {
        let (runs, release) = (runs.clone(), release.clone());
        reg.register_fn("j", move |_, ctx| {
            runs.lock()
                .unwrap()
                .push(("j".into(), ctx.id.0, ctx.attempt));
            let release = release.clone();
            async move {
                match ctx.attempt {
                    1 => {
                        release.notified().await;
                        Ok(())
                    }
                    2 => Err(JobError::retry_in(
                        "the successor fails",
                        Duration::from_millis(500),
                    )),
                    _ => Ok(()),
                }
            }
        });
    }
    let a = Source::new(
        ca.clone(),
        reg.clone(),
        SourceConfig {
            unguarded: true,
            ..st.config()
        },
    )
    .await
    .unwrap();
    let b = Source::new(cb.clone(), reg, st.config()).await.unwrap();
    let q = JobQueue::new(js.clone(), &st.subject()).unwrap();
    q.enqueue_new(&NewJob::new("default", "j", json!({})), None)
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "A has the job", || async {
        a.run_once().await.unwrap() == 1
    })
    .await;
    // A sends no beat: after the lease the server delivers the job to B, which fails it.
    eventually(
        Duration::from_secs(20),
        "B ran the job's second delivery",
        || async {
            b.run_once().await.unwrap();
            b.wait_idle().await;
            b.report().retried == 1
        },
    )
    .await;
    cb.flush().await.unwrap();
    assert_eq!(
        a.beat_once().await,
        0,
        "a beat sent after the lease ran out extends nothing (the server would confirm it)"
    );
    release.notify_waiters();
    a.wait_idle().await;
    ca.flush().await.unwrap();
    assert_eq!(a.report().lost, 1, "A wrote nothing: {:?}", a.report());
    assert_eq!(a.report().succeeded, 0);
    eventually(
        Duration::from_secs(20),
        "the third delivery ran",
        || async {
            b.run_once().await.unwrap();
            b.wait_idle().await;
            b.report().succeeded == 1
        },
    )
    .await;
    let attempts: Vec<i32> = runs.lock().unwrap().iter().map(|r| r.2).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    st.drop_it().await;
}

/// A job whose last delivery ended without an outcome (its worker died holding it) is
/// delivered once more, only to be dead-lettered with that reason — never left behind
/// unrecorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_run_without_an_outcome_is_dead_lettered() {
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let mut reg = Registry::<()>::default();
    reg.register_fn("hang", |_, _| std::future::pending::<JobResult>());
    let cfg = SourceConfig {
        max_attempts: 1,
        unguarded: true,
        ..st.config()
    };
    let a = Source::new(client.clone(), reg.clone(), cfg.clone())
        .await
        .unwrap();
    let b = Source::new(self::client().await, reg, cfg).await.unwrap();
    let q = JobQueue::new(js.clone(), &st.subject()).unwrap();
    let id = q
        .enqueue_new(&NewJob::new("default", "hang", json!({})), None)
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "A has the job", || async {
        a.run_once().await.unwrap() == 1
    })
    .await;
    eventually(Duration::from_secs(20), "B dead-lettered it", || async {
        b.run_once().await.unwrap();
        b.report().dead == 1
    })
    .await;
    let dead = st.dead_letters().await;
    assert_eq!(dead.len(), 1);
    let h = &dead[0].0;
    assert_eq!(h["Docket-Source-Sequence"], id.0.to_string());
    assert_eq!(h["Docket-Deliveries"], "2");
    assert!(
        h["Docket-Error"].contains("last run ended without an outcome"),
        "{h:?}"
    );
    st.drop_it().await;
}

/// At shutdown a job that outlives the shutdown timeout is stopped and handed back at
/// once: another worker runs it well inside its lease (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_running_jobs_back_at_once() {
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let runs: Runs = Arc::default();
    let mut reg = Registry::<()>::default();
    {
        let runs = runs.clone();
        reg.register_fn("slow", move |_, ctx| {
            runs.lock()
                .unwrap()
                .push(("slow".into(), ctx.id.0, ctx.attempt));
            async move {
                if ctx.attempt == 1 {
                    ctx.cancel.cancelled().await;
                    return Err(JobError::retry("stopped"));
                }
                Ok(())
            }
        });
    }
    let cfg = SourceConfig {
        ack_wait: Duration::from_secs(30),
        shutdown_timeout: Duration::from_millis(100),
        ..st.config()
    };
    let a = Source::new(client.clone(), reg.clone(), cfg.clone())
        .await
        .unwrap();
    let b = Source::new(self::client().await, reg, cfg).await.unwrap();
    let q = JobQueue::new(js.clone(), &st.subject()).unwrap();
    q.enqueue_new(&NewJob::new("default", "slow", json!({})), None)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let ta = tokio::spawn({
        let (a, stop) = (a.clone(), stop.clone());
        async move { a.run(stop).await }
    });
    eventually(Duration::from_secs(10), "A runs the job", || async {
        a.in_flight() == 1
    })
    .await;
    stop.cancel();
    let ra = ta.await.unwrap().unwrap();
    assert_eq!(ra.released, 1, "{ra:?}");
    eventually(
        Duration::from_secs(10),
        "B ran it (inside the 30 s lease)",
        || async {
            b.run_once().await.unwrap();
            b.wait_idle().await;
            b.report().succeeded == 1
        },
    )
    .await;
    let attempts: Vec<i32> = runs.lock().unwrap().iter().map(|r| r.2).collect();
    assert_eq!(attempts, vec![1, 2]);
    st.drop_it().await;
}

/// Each run's attempt and why it was told to stop.
type Stops = Arc<Mutex<Vec<(i32, Option<docket_worker::StopReason>)>>>;

/// A worker cut off from its server (a private `nats-server`, SIGKILLed) cannot confirm its
/// in-progress acks: before its lease ends its handler is told the delivery is lost, and
/// nothing is written for it. Once the server is back (same store), the job is delivered
/// again and runs to success — the dropped connection lost nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_from_its_server_stops_its_job_which_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = nats::NatsProcess::start(&dir.path().join("nats"));
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let stops: Stops = Arc::default();
    let mut reg = Registry::<()>::default();
    {
        let stops = stops.clone();
        reg.register_fn("cut", move |_, ctx| {
            let stops = stops.clone();
            async move {
                if ctx.attempt == 1 {
                    ctx.cancel.cancelled().await;
                    stops.lock().unwrap().push((ctx.attempt, ctx.stop_reason()));
                    // A success that must not be written: the delivery is gone.
                    return Ok(());
                }
                stops.lock().unwrap().push((ctx.attempt, None));
                Ok(())
            }
        });
    }
    let source = Source::new(client.clone(), reg, st.config()).await.unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let (source, stop) = (source.clone(), stop.clone());
        async move { source.run(stop).await }
    });
    JobQueue::new(js.clone(), &st.subject())
        .unwrap()
        .enqueue_new(&NewJob::new("default", "cut", json!({})), None)
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the job runs", || async {
        source.in_flight() == 1
    })
    .await;
    server.kill();
    eventually(
        Duration::from_secs(10),
        "the handler was told its delivery is lost",
        || async { source.report().lost == 1 },
    )
    .await;
    assert_eq!(
        stops.lock().unwrap().clone(),
        vec![(1, Some(docket_worker::StopReason::LeaseLost))]
    );
    server.restart();
    eventually(
        Duration::from_secs(60),
        "the job ran again to success",
        || async { source.report().succeeded == 1 },
    )
    .await;
    stop.cancel();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (report.lost, report.succeeded, report.dead),
        (1, 1, 0),
        "{report:?}"
    );
    assert_eq!(stops.lock().unwrap().len(), 2);
}
