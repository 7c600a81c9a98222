//! JetStream as a job source, against a real JetStream (`NATS_URL`, or a private
//! `nats-server` of this test process): the database worker's handlers and outcomes on a
//! durable consumer — ack, nak with backoff, dead letters with their reason, in-progress acks
//! holding a long job, a worker past its delivery writing nothing, shutdown handing jobs back
//! — and enqueueing through the outbox inside a transaction.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use docket_core::{InTransaction, NewJob};
use docket_nats::{JobQueue, NatsError, Source, SourceConfig, StreamSpec};
use docket_testkit::conformance::{Harness, PgHarness};
use docket_testkit::{eventually, nats};
use docket_worker::{Job, JobContext, JobError, JobResult, Registry};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn client() -> async_nats::Client {
    async_nats::connect(nats::server_url())
        .await
        .unwrap_or_else(|e| panic!("connect to NATS: {e}"))
}

/// A job stream of the test's own (capturing `<prefix>.>`) and its dead-letter stream
/// (capturing `<prefix>dead.>`), deleted when the test ends.
struct Streams {
    js: jetstream::Context,
    jobs: String,
    dead: String,
    prefix: String,
}

impl Streams {
    async fn new(js: &jetstream::Context) -> Streams {
        let (jobs, prefix) = (nats::stream_name(), nats::subject_prefix());
        let dead = format!("{jobs}D");
        for (name, subject) in [
            (&jobs, format!("{prefix}.>")),
            (&dead, format!("{prefix}dead.>")),
        ] {
            let spec = StreamSpec::new(name.clone(), vec![subject]);
            docket_nats::stream::ensure(js, &spec, Duration::from_secs(30))
                .await
                .expect("create the stream");
        }
        Streams {
            js: js.clone(),
            jobs,
            dead,
            prefix,
        }
    }

    fn subject(&self) -> String {
        format!("{}.jobs", self.prefix)
    }

    /// A source's settings for quick tests: a 1 s lease, retries after 10-50 ms.
    fn config(&self) -> SourceConfig {
        SourceConfig {
            dead_letter: format!("{}dead.jobs", self.prefix),
            ack_wait: Duration::from_secs(1),
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(50),
            idle_wait: Duration::from_millis(100),
            ..SourceConfig::new(&self.jobs, "workers")
        }
    }

    /// The dead-letter stream's messages: their headers (`Docket-*`) and payload.
    async fn dead_letters(&self) -> Vec<(BTreeMap<String, String>, Vec<u8>)> {
        let mut s = self.js.get_stream(&self.dead).await.expect("stream");
        let last = s.info().await.expect("info").state.last_sequence;
        let mut out = Vec::new();
        for seq in 1..=last {
            let m = s.get_raw_message(seq).await.expect("message");
            let headers = m
                .headers
                .iter()
                .map(|(k, v)| {
                    let v = v.first().map(|v| v.to_string()).unwrap_or_default();
                    (k.to_string(), v)
                })
                .collect();
            out.push((headers, m.payload.to_vec()));
        }
        out
    }

    async fn consumer_info(&self) -> jetstream::consumer::Config {
        let s = self.js.get_stream(&self.jobs).await.expect("stream");
        let mut c = s
            .get_consumer::<pull::Config>("workers")
            .await
            .expect("consumer");
        c.info().await.expect("info").config.clone()
    }

    async fn drop_it(self) {
        let _ = self.js.delete_stream(&self.jobs).await;
        let _ = self.js.delete_stream(&self.dead).await;
    }
}

#[derive(Serialize, Deserialize)]
struct SendEmail {
    to: String,
}

/// Runs of each job: (kind, id, attempt).
type Runs = Arc<Mutex<Vec<(String, i64, i32)>>>;

impl Job for SendEmail {
    const KIND: &'static str = "send_email";
    async fn run(self, _ctx: JobContext) -> JobResult {
        assert_eq!(self.to, "a@example.com");
        Ok(())
    }
}

/// The runs of `kind`, by id and attempt (jobs run side by side, so in no fixed order).
fn runs_of(runs: &Runs, kind: &str) -> Vec<(i64, i32)> {
    let r = runs.lock().unwrap();
    let mut of: Vec<(i64, i32)> = r
        .iter()
        .filter(|(k, _, _)| k == kind)
        .map(|(_, id, a)| (*id, *a))
        .collect();
    of.sort();
    of
}

fn registry(runs: &Runs) -> Registry<()> {
    let mut r = Registry::<()>::default();
    r.register::<SendEmail>();
    let log = |runs: &Runs| {
        let runs = runs.clone();
        move |ctx: &JobContext| {
            runs.lock()
                .unwrap()
                .push((ctx.kind.clone(), ctx.id.0, ctx.attempt))
        }
    };
    let l = log(runs);
    r.register_fn("ok", move |_, ctx| {
        l(&ctx);
        async { Ok(()) }
    });
    let l = log(runs);
    r.register_fn("flaky", move |_, ctx| {
        l(&ctx);
        let first = ctx.attempt == 1;
        async move {
            if first {
                Err(JobError::retry_in(
                    "the first run fails",
                    Duration::from_millis(10),
                ))
            } else {
                Ok(())
            }
        }
    });
    let l = log(runs);
    r.register_fn("bad", move |_, ctx| {
        l(&ctx);
        async { Err(JobError::discard("bad input")) }
    });
    let l = log(runs);
    r.register_fn("unwanted", move |_, ctx| {
        l(&ctx);
        async { Err(JobError::cancel("not wanted")) }
    });
    let l = log(runs);
    r.register_fn("boom", move |_, ctx| {
        l(&ctx);
        let first = ctx.attempt == 1;
        async move {
            if first {
                panic!("boom");
            }
            Ok(())
        }
    });
    let l = log(runs);
    r.register_fn("stepper", move |_, ctx| {
        l(&ctx);
        async move { ctx.step("charge", || async { Ok(1) }).await.map(drop) }
    });
    r
}

async fn publish_raw(
    js: &jetstream::Context,
    subject: &str,
    headers: &[(&str, &str)],
    payload: &[u8],
) {
    let mut h = async_nats::HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, *v);
    }
    js.publish_with_headers(subject.to_string(), h, payload.to_vec().into())
        .await
        .expect("publish")
        .await
        .expect("ack");
}

/// Every outcome of a handler, and every malformed message, is written the way JetStream
/// expects: success acked, a retry delivered again (with its attempt), a discard, a cancel,
/// a retry on the last delivery and a message that is not a job each dead-lettered with
/// its reason and terminated; steps are refused on a delivery; the consumer ends with
/// nothing pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_is_written_as_jetstream_expects() {
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let runs: Runs = Arc::default();
    let cfg = SourceConfig {
        max_attempts: 2,
        ..st.config()
    };
    let source = Source::new(client.clone(), registry(&runs), cfg)
        .await
        .expect("source");
    let q = JobQueue::new(js.clone(), &st.subject()).expect("queue");
    let email = q
        .enqueue(&SendEmail {
            to: "a@example.com".into(),
        })
        .await
        .expect("enqueue");
    let mut ids = BTreeMap::new();
    for kind in [
        "ok", "flaky", "bad", "unwanted", "boom", "stepper", "nobody",
    ] {
        let id = q
            .enqueue_new(&NewJob::new("default", kind, json!({"n": 1})), None)
            .await
            .expect("enqueue");
        ids.insert(kind, id.0);
    }
    // An idempotency id: the second enqueue is the first job.
    let once = q
        .enqueue_new(&NewJob::new("default", "ok", json!({})), Some("order-7"))
        .await
        .unwrap();
    let again = q
        .enqueue_new(&NewJob::new("default", "ok", json!({})), Some("order-7"))
        .await
        .unwrap();
    assert_eq!(once, again, "a repeated idempotency id adds nothing");
    // Messages that are not jobs (anyone may publish on the subject).
    let subject = st.subject();
    publish_raw(&js, &subject, &[], b"{}").await;
    publish_raw(&js, &subject, &[("Docket-Kind", "ok")], b"{not json").await;
    publish_raw(&js, &subject, &[("Docket-Kind", "bad kind!")], b"{}").await;
    publish_raw(
        &js,
        &subject,
        &[("Docket-Kind", "ok"), ("Docket-Metadata", "[1]")],
        b"{}",
    )
    .await;

    let report = tokio::time::timeout(
        Duration::from_secs(60),
        source.drain(CancellationToken::new()),
    )
    .await
    .expect("drained within a minute")
    .expect("drain");

    assert_eq!(runs_of(&runs, "ok"), vec![(ids["ok"], 1), (once.0, 1)]);
    assert_eq!(
        runs_of(&runs, "flaky"),
        vec![(ids["flaky"], 1), (ids["flaky"], 2)]
    );
    assert_eq!(
        runs_of(&runs, "boom"),
        vec![(ids["boom"], 1), (ids["boom"], 2)]
    );
    assert_eq!(runs_of(&runs, "bad"), vec![(ids["bad"], 1)]);
    assert_eq!(runs_of(&runs, "stepper"), vec![(ids["stepper"], 1)]);
    let dead = st.dead_letters().await;
    let by_seq: BTreeMap<i64, &BTreeMap<String, String>> = dead
        .iter()
        .map(|(h, _)| (h["Docket-Source-Sequence"].parse().unwrap(), h))
        .collect();
    assert_eq!(dead.len(), 8, "one dead letter per dead job: {dead:?}");
    let check = |seq: i64, outcome: &str, error: &str, deliveries: &str| {
        let h = by_seq
            .get(&seq)
            .unwrap_or_else(|| panic!("no dead letter for {seq}: {dead:?}"));
        assert_eq!(h["Docket-Outcome"], outcome, "{h:?}");
        assert!(h["Docket-Error"].contains(error), "{error:?} in {h:?}");
        assert_eq!(h["Docket-Deliveries"], deliveries, "{h:?}");
        assert_eq!(h["Docket-Source-Subject"], subject, "{h:?}");
    };
    check(ids["bad"], "dead", "bad input", "1");
    check(ids["unwanted"], "cancelled", "not wanted", "1");
    check(
        ids["stepper"],
        "dead",
        "need a job kept in the database",
        "1",
    );
    check(
        ids["nobody"],
        "dead",
        "no attempt left: no handler for kind \"nobody\"",
        "2",
    );
    let raw = once.0 + 1;
    check(raw, "dead", "no Docket-Kind header", "1");
    check(raw + 1, "dead", "not JSON", "1");
    check(raw + 2, "dead", "Docket-Kind", "1");
    check(raw + 3, "dead", "not a JSON object", "1");
    let bad = dead
        .iter()
        .find(|(h, _)| h["Docket-Source-Sequence"] == ids["bad"].to_string())
        .unwrap();
    assert_eq!(
        bad.0["Docket-Kind"], "bad",
        "the job's own headers are kept"
    );
    assert!(!bad.0.contains_key("Nats-Msg-Id") || bad.0["Nats-Msg-Id"].ends_with("-dead"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&bad.1).unwrap(),
        json!({"n": 1})
    );
    assert!(email.0 < ids["ok"]);
    assert_eq!(
        (report.succeeded, report.retried, report.dead),
        (5, 3, 8),
        "{report:?}"
    );
    let mut c = js
        .get_stream(&st.jobs)
        .await
        .unwrap()
        .get_consumer::<pull::Config>("workers")
        .await
        .unwrap();
    let info = c.info().await.unwrap();
    assert_eq!((info.num_pending, info.num_ack_pending), (0, 0));
    assert_eq!(st.consumer_info().await.max_deliver, 3, "max attempts + 1");
    st.drop_it().await;
}

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

/// Settings that would break a promise are refused before anything is consumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_that_break_a_promise_are_refused() {
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    let reg = Registry::<()>::default();
    Source::new(client.clone(), reg.clone(), st.config())
        .await
        .unwrap();
    let err = |r: Result<Source<()>, NatsError>| match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let e = err(Source::new(
        client.clone(),
        reg.clone(),
        SourceConfig {
            ack_wait: Duration::from_secs(5),
            ..st.config()
        },
    )
    .await);
    assert!(e.contains("ack wait 1s, this worker wants 5s"), "{e}");
    let e = err(Source::new(
        client.clone(),
        reg.clone(),
        SourceConfig {
            max_attempts: 3,
            ..st.config()
        },
    )
    .await);
    assert!(e.contains("max_deliver 26"), "{e}");
    let e = err(Source::new(
        client.clone(),
        reg.clone(),
        SourceConfig {
            dead_letter: "nowhere.at.all".into(),
            consumer: "other".into(),
            ..st.config()
        },
    )
    .await);
    assert!(
        e.contains("no stream captures the dead-letter subject"),
        "{e}"
    );
    let e = err(Source::new(
        client.clone(),
        reg.clone(),
        SourceConfig {
            dead_letter: format!("{}.dead", st.prefix),
            consumer: "other".into(),
            ..st.config()
        },
    )
    .await);
    assert!(
        e.contains("a dead job would be delivered again as a job"),
        "{e}"
    );
    let e = err(Source::new(
        client.clone(),
        reg.clone(),
        SourceConfig::new("NO_SUCH_STREAM_X", "w"),
    )
    .await);
    assert!(e.contains("NO_SUCH_STREAM_X"), "{e}");
    for (bad, what) in [
        (
            SourceConfig {
                slots: 0,
                ..st.config()
            },
            "slots",
        ),
        (
            SourceConfig {
                ack_wait: Duration::from_millis(10),
                ..st.config()
            },
            "ack wait",
        ),
        (
            SourceConfig {
                max_attempts: 0,
                ..st.config()
            },
            "max attempts",
        ),
        (
            SourceConfig {
                consumer: "a.b".into(),
                ..st.config()
            },
            "names",
        ),
        (
            SourceConfig {
                dead_letter: "a.>".into(),
                ..st.config()
            },
            "dead-letter",
        ),
        (
            SourceConfig {
                filter_subject: Some("a..b".into()),
                ..st.config()
            },
            "subject",
        ),
    ] {
        let e = err(Source::new(client.clone(), reg.clone(), bad).await);
        assert!(e.contains(what), "{what}: {e}");
    }
    // What a JetStream job cannot carry is refused by name, and nothing is published.
    let q = JobQueue::new(js.clone(), &st.subject()).unwrap();
    let mut unique = NewJob::new("default", "ok", json!({}));
    unique.unique_key = Some("u".into());
    let mut prio = NewJob::new("default", "ok", json!({}));
    prio.priority = 5;
    let mut ordered = NewJob::new("default", "ok", json!({}));
    ordered.ordering_key = Some("k".into());
    let mut attempts = NewJob::new("default", "ok", json!({}));
    attempts.max_attempts = 3;
    for (job, what) in [
        (unique, "unique key"),
        (prio, "priority"),
        (ordered, "ordering key"),
        (attempts, "attempt budget"),
    ] {
        let e = q.enqueue_new(&job, None).await.unwrap_err().to_string();
        assert!(
            e.contains(what) && e.contains("needs the database queue"),
            "{e}"
        );
    }
    let mut s = js.get_stream(&st.jobs).await.unwrap();
    assert_eq!(s.info().await.unwrap().state.messages, 0);
    st.drop_it().await;
}

/// The way to move a queue off the database: the job is enqueued through the outbox inside
/// the application's transaction (a rolled-back transaction enqueues nothing), the relay
/// publishes it, and the source runs it with the handler the database worker used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_through_the_outbox_runs_once_its_transaction_commits() {
    let h = PgHarness::fresh().await;
    let store = h.store().clone();
    let client = client().await;
    let js = jetstream::new(client.clone());
    let st = Streams::new(&js).await;
    for (to, commit) in [("a@example.com", true), ("rolled@back", false)] {
        let mut tx = store.pool().begin().await.unwrap();
        let msg = docket_nats::job_message(&st.subject(), &SendEmail { to: to.into() }).unwrap();
        store.publish_in(&mut tx, &msg).await.unwrap();
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
    }
    let relay = docket_nats::Relay::new(
        store.clone(),
        client.clone(),
        docket_nats::RelayConfig::default(),
    )
    .await
    .unwrap();
    relay.drain(&CancellationToken::new()).await.unwrap();
    let mut reg = Registry::<()>::default();
    reg.register::<SendEmail>();
    let source = Source::new(client.clone(), reg, st.config()).await.unwrap();
    let report = source.drain(CancellationToken::new()).await.unwrap();
    assert_eq!(
        (report.delivered, report.succeeded, report.dead),
        (1, 1, 0),
        "{report:?}"
    );
    st.drop_it().await;
}
