//! The relay on a three-node JetStream cluster on loopback (an R3 stream): one node is
//! SIGKILLed and restarted while the relay publishes, and the stream still holds every
//! committed message once, each key in order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_nats::jetstream;
use docket_core::outbox::{message_id, NewMessage};
use docket_core::Store;
use docket_nats::{Relay, RelayConfig, StreamSpec};
use docket_testkit::nats::{self as tnats, NatsProcess};
use docket_testkit::{eventually, TestDb};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_and_restarted_under_an_r3_stream_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = tnats::cluster(dir.path());
    let urls = nodes
        .iter()
        .map(NatsProcess::url)
        .collect::<Vec<_>>()
        .join(",");
    let nc = docket_nats::NatsOptions::new(urls)
        .connect(Duration::from_secs(10))
        .await
        .unwrap();
    let js = jetstream::new(nc.clone());
    let (stream, prefix) = (tnats::stream_name(), tnats::subject_prefix());
    let spec = StreamSpec {
        replicas: 3,
        ..StreamSpec::new(stream.clone(), vec![format!("{prefix}.>")])
    };
    // The cluster elects its JetStream leader some moments after the nodes listen.
    eventually(
        Duration::from_secs(60),
        "the R3 stream is created",
        || async {
            docket_nats::stream::ensure(&js, &spec, Duration::from_secs(30))
                .await
                .is_ok()
        },
    )
    .await;

    let db = TestDb::new().await;
    const N: u64 = 3_000;
    let mut want = BTreeMap::new();
    for i in 0..N {
        let key = format!("k{}", i % 20);
        let m = NewMessage::new(format!("{prefix}.x"), &json!({"key": key, "seq": i / 20}))
            .unwrap()
            .key(key);
        want.insert(db.store.publish(&m).await.unwrap(), i);
    }
    let cfg = RelayConfig {
        lease: Duration::from_secs(10),
        ack_timeout: Duration::from_secs(3),
        ..RelayConfig::default()
    };
    let relay = Relay::new(db.store.clone(), nc.clone(), cfg).await.unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn(relay.clone().run(stop.clone()));
    let published = || async { db.scalar("SELECT count(*) FROM {schema}.outbox_sent").await };
    eventually(Duration::from_secs(60), "a third published", || async {
        published().await >= (N / 3) as i64
    })
    .await;
    let victim = &nodes[1];
    tokio::task::block_in_place(|| victim.kill());
    let at_kill = published().await;
    eventually(
        Duration::from_secs(60),
        "publishing on with a node down",
        || async { published().await > at_kill + 200 },
    )
    .await;
    tokio::task::block_in_place(|| victim.restart());
    eventually(Duration::from_secs(120), "everything published", || async {
        published().await == N as i64
    })
    .await;
    stop.cancel();
    run.await.unwrap();

    let origin = db.store.outbox_origin().await.unwrap();
    let mut s = js.get_stream(&stream).await.unwrap();
    let last = s.info().await.unwrap().state.last_sequence;
    let (mut seen, mut duplicates, mut order_violations) = (BTreeSet::new(), 0, 0);
    let mut last_of: BTreeMap<String, i64> = BTreeMap::new();
    for seq in 1..=last {
        let m = s.get_raw_message(seq).await.unwrap();
        let id = m.headers.get("Nats-Msg-Id").unwrap().to_string();
        if !seen.insert(id) {
            duplicates += 1;
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        let key = v["key"].as_str().unwrap().to_string();
        let sq = v["seq"].as_i64().unwrap();
        if sq != last_of.insert(key, sq).unwrap_or(-1) + 1 {
            order_violations += 1;
        }
    }
    let wanted: BTreeSet<String> = want.keys().map(|id| message_id(&origin, *id)).collect();
    let lost = wanted.difference(&seen).count();
    println!(
        "R3 cluster, node n1 killed and restarted: {N} messages, {} in the stream, lost {lost}, \
         duplicates {duplicates}, order violations {order_violations}",
        last
    );
    assert_eq!(lost, 0, "messages missing from the stream");
    assert_eq!(duplicates, 0, "a duplicate inside the window");
    assert_eq!(
        order_violations, 0,
        "a key's sequence went backwards or skipped"
    );
    let _ = js.delete_stream(&stream).await;
}
