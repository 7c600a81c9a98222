//! JetStream as a job source, against a real JetStream (`NATS_URL`, or a private
//! `nats-server` of this test process): the database worker's handlers and outcomes on a
//! durable consumer — ack, nak with backoff, dead letters with their reason — settings that
//! would break a promise refused, and enqueueing through the outbox inside a transaction.
//! The fault cases are in `source_faults.rs`.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use docket_core::{InTransaction, NewJob};
use docket_nats::{JobQueue, NatsError, Source, SourceConfig};
use docket_testkit::conformance::{Harness, PgHarness};
use docket_worker::{JobContext, JobError, Registry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::*;

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
