//! The relay against a real JetStream (`NATS_URL`, or a private `nats-server` of this test
//! process) and each engine: what a committed transaction wrote reaches the stream once, in
//! key order, with its de-duplication id; what a rolled-back one wrote never does; a
//! re-publish after a crash between the broker's ack and the mark is dropped; a failed
//! publish is recorded and retried; a stream that cannot de-duplicate is refused.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use docket_core::outbox::{message_id, NewMessage, OutboxState};
use docket_core::{InTransaction, Store};
use docket_nats::{NatsError, Relay, RelayConfig, StreamSpec};
use docket_testkit::conformance::{Harness, MySqlHarness, PgHarness, SqliteHarness};
use docket_testkit::nats;
use serde_json::json;

/// A message as the stream holds it.
#[derive(Debug)]
struct Got {
    subject: String,
    payload: serde_json::Value,
    msg_id: Option<String>,
    headers: BTreeMap<String, String>,
}

async fn client() -> async_nats::Client {
    async_nats::connect(nats::server_url())
        .await
        .unwrap_or_else(|e| panic!("connect to NATS: {e}"))
}

/// A stream of the test's own capturing `<prefix>.>`, deleted when the test ends.
struct TestStream {
    js: jetstream::Context,
    name: String,
    prefix: String,
}

impl TestStream {
    async fn new(js: &jetstream::Context) -> TestStream {
        let (name, prefix) = (nats::stream_name(), nats::subject_prefix());
        let spec = StreamSpec::new(name.clone(), vec![format!("{prefix}.>")]);
        docket_nats::stream::ensure(js, &spec, Duration::from_secs(30))
            .await
            .expect("create the stream");
        TestStream {
            js: js.clone(),
            name,
            prefix,
        }
    }

    fn subject(&self, s: &str) -> String {
        format!("{}.{s}", self.prefix)
    }

    /// Everything the stream holds, in stream order.
    async fn read(&self) -> Vec<Got> {
        let mut s = self.js.get_stream(&self.name).await.expect("stream");
        let last = s.info().await.expect("info").state.last_sequence;
        let mut out = Vec::new();
        for seq in 1..=last {
            let m = s.get_raw_message(seq).await.expect("message");
            let mut headers = BTreeMap::new();
            for (k, v) in m.headers.iter() {
                headers.insert(
                    k.to_string(),
                    v.first().map(|v| v.to_string()).unwrap_or_default(),
                );
            }
            out.push(Got {
                subject: m.subject.to_string(),
                payload: serde_json::from_slice(&m.payload).expect("JSON payload"),
                msg_id: headers.get("Nats-Msg-Id").cloned(),
                headers,
            });
        }
        out
    }

    async fn drop_it(self) {
        let _ = self.js.delete_stream(&self.name).await;
    }
}

fn config(lanes: usize, batch: i64) -> RelayConfig {
    RelayConfig {
        lanes,
        batch,
        lease: Duration::from_secs(20),
        ack_timeout: Duration::from_secs(5),
        ..RelayConfig::default()
    }
}

/// Commits ten transactions of three messages (keys k0..k3, a per-key sequence) and rolls
/// two back; a relay of three lanes publishes them: each committed message once, none of
/// the rolled back, every key in order, each with its de-duplication id and its headers.
async fn committed_messages_reach_the_stream_once_in_key_order<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store();
    let nc = client().await;
    let js = jetstream::new(nc.clone());
    let ts = TestStream::new(&js).await;
    let mut next = [0u64; 4];
    let mut committed = Vec::new();
    for t in 0..12 {
        let keep = t % 6 != 5;
        let mut tx = s.begin().await.unwrap();
        for i in 0..3 {
            let k = (t * 3 + i) % 4;
            let seq = if keep { next[k] + 1 } else { 1_000_000 };
            let m = NewMessage::new(
                ts.subject(&format!("k{k}")),
                &json!({"k": k, "seq": seq, "t": t}),
            )
            .unwrap()
            .key(format!("k{k}"))
            .header("X-Txn", t.to_string());
            let id = s.publish_in(H::S::conn(&mut tx), &m).await.unwrap();
            if keep {
                next[k] = seq;
                committed.push(id);
            }
        }
        if keep {
            H::S::commit(tx).await.unwrap();
        } else {
            H::S::rollback(tx).await.unwrap();
        }
    }
    let relay = Relay::new(s.clone(), nc, config(3, 2)).await.unwrap();
    let marked = relay
        .drain(&tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(marked as usize, committed.len());
    let got = ts.read().await;
    assert_eq!(
        got.len(),
        committed.len(),
        "each committed message once: {got:?}"
    );
    let origin = s.outbox_origin().await.unwrap();
    let mut last = [0u64; 4];
    let mut ids: Vec<String> = Vec::new();
    for g in &got {
        let k = g.payload["k"].as_u64().unwrap() as usize;
        let seq = g.payload["seq"].as_u64().unwrap();
        assert!(
            seq < 1_000_000,
            "a rolled-back message was published: {g:?}"
        );
        assert_eq!(seq, last[k] + 1, "key k{k} out of order: {g:?}");
        last[k] = seq;
        assert_eq!(g.subject, ts.subject(&format!("k{k}")));
        assert_eq!(
            g.headers.get("X-Txn").map(String::as_str),
            Some(g.payload["t"].to_string().as_str())
        );
        ids.push(g.msg_id.clone().expect("Nats-Msg-Id"));
    }
    assert_eq!(last, next, "every key complete");
    let mut want: Vec<String> = committed
        .iter()
        .map(|id| message_id(&origin, *id))
        .collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want, "each message's id is origin-id");
    let st = s.outbox_stats().await.unwrap();
    assert_eq!((st.unpublished, st.published), (0, committed.len() as i64));
    ts.drop_it().await;
}

/// A relay killed after JetStream acknowledged its batch and before its mark: once its lease
/// runs out, another relay publishes the batch again with the same ids, JetStream drops
/// every one as a duplicate, and the second relay marks them.
async fn a_republish_after_a_crash_before_the_mark_is_dropped<H: Harness>() {
    let h = H::fresh().await;
    let s = h.store();
    let nc = client().await;
    let js = jetstream::new(nc.clone());
    let ts = TestStream::new(&js).await;
    for i in 0..20 {
        let m = NewMessage::new(ts.subject("x"), &json!({"i": i})).unwrap();
        let m = if i % 2 == 0 {
            m.key(format!("k{}", i % 3))
        } else {
            m
        };
        s.publish(&m).await.unwrap();
    }
    let first = Relay::new(s.clone(), nc.clone(), config(1, 100))
        .await
        .unwrap();
    let p = first.run_once_unmarked().await.unwrap();
    assert_eq!((p.acked, p.marked), (p.claimed, 0));
    let published = p.claimed;
    assert_eq!(ts.read().await.len(), published);
    h.advance(Duration::from_secs(21)).await;
    let second = Relay::new(s.clone(), nc, config(1, 100)).await.unwrap();
    let p = second.run_once().await.unwrap();
    assert_eq!(p.claimed, published, "the lost batch is claimed again");
    assert_eq!(p.duplicates, published, "JetStream drops every re-publish");
    assert_eq!(p.marked as usize, published);
    second
        .drain(&tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    let got = ts.read().await;
    assert_eq!(got.len(), 20, "each message once");
    ts.drop_it().await;
}

/// A subject no stream captures fails its publish: the error is kept, the message waits out
/// its delay, and once a stream captures the subject it is published.
async fn a_failed_publish_is_recorded_and_retried<H: Harness>() {
    let h = H::fresh().await;
    let s = h.store();
    let nc = client().await;
    let js = jetstream::new(nc.clone());
    let prefix = nats::subject_prefix();
    let id = s
        .publish(
            &NewMessage::new(format!("{prefix}.late"), &json!({"x": 1}))
                .unwrap()
                .key("k"),
        )
        .await
        .unwrap();
    let relay = Relay::new(s.clone(), nc, config(1, 10)).await.unwrap();
    let p = relay.run_once().await.unwrap();
    assert_eq!((p.claimed, p.failed, p.marked), (1, 1, 0));
    let st = s.outbox_stats().await.unwrap();
    assert_eq!(st.failing, 1);
    assert!(st.last_error.is_some(), "{st:?}");
    let failing = s.outbox_list(OutboxState::Failing, 10).await.unwrap();
    assert_eq!(failing[0].id, id);
    assert_eq!(
        relay.run_once().await.unwrap().claimed,
        0,
        "inside its delay"
    );
    let name = nats::stream_name();
    docket_nats::stream::ensure(
        &js,
        &StreamSpec::new(name.clone(), vec![format!("{prefix}.>")]),
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    h.advance(Duration::from_secs(2)).await;
    let p = relay.run_once().await.unwrap();
    assert_eq!((p.claimed, p.marked), (1, 1));
    assert_eq!(s.outbox_stats().await.unwrap().unpublished, 0);
    let _ = js.delete_stream(&name).await;
}

macro_rules! engines {
    ($($name:ident),* $(,)?) => {
        mod postgres { use super::*; $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name::<PgHarness>().await } )* }
        mod sqlite { use super::*; $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name::<SqliteHarness>().await } )* }
        mod mysql { use super::*; $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name::<MySqlHarness>().await } )* }
    };
}

engines!(
    committed_messages_reach_the_stream_once_in_key_order,
    a_republish_after_a_crash_before_the_mark_is_dropped,
    a_failed_publish_is_recorded_and_retried,
);

/// A stream whose duplicate window is shorter than a re-publish can come after is refused,
/// with what to change; so is an existing stream without the subjects asked for.
#[tokio::test]
async fn a_stream_that_cannot_deduplicate_is_refused() {
    let js = jetstream::new(client().await);
    let (name, prefix) = (nats::stream_name(), nats::subject_prefix());
    js.create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await
    .unwrap();
    let e = docket_nats::stream::check(&js, &name, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(e, NatsError::Stream { .. }), "{e}");
    assert!(e.to_string().contains("duplicate window is 2m"), "{e}");
    js.delete_stream(&name).await.unwrap();
    docket_nats::stream::ensure(
        &js,
        &StreamSpec::new(name.clone(), vec![format!("{prefix}.>")]),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let e = docket_nats::stream::ensure(
        &js,
        &StreamSpec::new(name.clone(), vec!["other.>".into()]),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("without subject"), "{e}");
    let _ = js.delete_stream(&name).await;
    // Created by the relay: file storage and a window covering the default lease.
    let c = docket_nats::stream::ensure(
        &js,
        &StreamSpec::new(name.clone(), vec![format!("{prefix}.>")]),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(c.duplicate_window, docket_nats::stream::DEFAULT_WINDOW);
    assert_eq!(c.storage, stream::StorageType::File);
    let bad = StreamSpec::new("no spaces", vec!["x.>".into()]);
    assert!(
        docket_nats::stream::ensure(&js, &bad, Duration::from_secs(30))
            .await
            .is_err()
    );
    let _ = js.delete_stream(&name).await;
}
