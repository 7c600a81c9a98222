//! Chaos for the outbox: producers commit messages inside their own transactions (and roll
//! a tenth back) with a sequence number per key, while two `docket relay` processes are
//! SIGKILLed at random points and SIGSTOPped past their lease, the test's own
//! `nats-server` is SIGKILLed and restarted, and the test's own PostgreSQL restarts. A
//! checker then reads the whole stream: every committed message there (0 lost), no
//! rolled-back one, no duplicate (every outage stayed inside the duplicate window), each
//! key's sequence strictly increasing, and every mark pointing at its own message.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use docket_core::outbox::{message_id, NewMessage, OutboxState};
use docket_core::{InTransaction, Store};
use docket_localpg::StopMode;
use docket_nats::async_nats::{self, jetstream};
use docket_testkit::nats::{self as tnats, NatsProcess};
use docket_testkit::{PrivateCluster, TestDb};
use rand::{Rng, SeedableRng};
use serde_json::json;

/// A backend as pg_stat_activity shows it: application, state, wait event, query.
type Activity = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// What the producers committed: message id → (key, sequence).
type Committed = Arc<Mutex<BTreeMap<i64, (String, u64)>>>;

fn relay(db: &TestDb, nats_url: &str, stream: &str, subjects: &str, err: &std::path::Path) -> Proc {
    let mut c = docket(db);
    c.env("DOCKET_NATS_URL", nats_url)
        .args([
            "relay",
            "--stream",
            stream,
            "--create-stream",
            "--subjects",
            subjects,
            "--lanes",
            "2",
            "--batch",
            "50",
            "--lease",
            "3s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(err).unwrap());
    Proc::spawn(&mut c)
}

/// Keys per producer.
const KEYS: usize = 8;

/// One producer: transactions of 1-3 messages on its own eight keys; a tenth rolled back
/// (their messages marked `rb`). Pauses while `paused` (the database restart), so every
/// commit it counts is one the database confirmed.
async fn produce(
    db_store: docket_postgres::PgStore,
    p: usize,
    prefix: String,
    stop: Arc<AtomicBool>,
    mut paused: tokio::sync::watch::Receiver<bool>,
    idle: Arc<AtomicBool>,
    committed: Committed,
) {
    let mut seq = [0u64; KEYS];
    let mut rng = rand::rngs::StdRng::from_entropy();
    // Paced (a transaction every 5 ms at most): one key's messages are published one
    // claim-publish-mark cycle apart, so an unpaced producer on a few keys outruns any relay.
    let mut pace = tokio::time::interval(Duration::from_millis(5));
    while !stop.load(Ordering::SeqCst) {
        pace.tick().await;
        if *paused.borrow() {
            idle.store(true, Ordering::SeqCst);
            let _ = paused.wait_for(|p| !*p).await;
            continue;
        }
        idle.store(false, Ordering::SeqCst);
        let rollback = rng.gen_ratio(1, 10);
        let n = rng.gen_range(1..=3);
        let Ok(mut tx) = InTransaction::begin(&db_store).await else {
            continue;
        };
        let mut wrote = Vec::new();
        let mut next = seq;
        let mut ok = true;
        for _ in 0..n {
            let k = rng.gen_range(0..KEYS);
            let s = if rollback { 0 } else { next[k] + 1 };
            let key = format!("p{p}k{k}");
            let m = NewMessage::new(
                format!("{prefix}.p{p}"),
                &json!({"key": key, "seq": s, "rb": rollback}),
            )
            .unwrap()
            .key(key.clone());
            match db_store
                .publish_in(
                    <docket_postgres::PgStore as InTransaction>::conn(&mut tx),
                    &m,
                )
                .await
            {
                Ok(id) => {
                    if !rollback {
                        next[k] = s;
                    }
                    wrote.push((id, key, s));
                }
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        if rollback || !ok {
            let _ = <docket_postgres::PgStore as InTransaction>::rollback(tx).await;
            continue;
        }
        if <docket_postgres::PgStore as InTransaction>::commit(tx)
            .await
            .is_ok()
        {
            seq = next;
            let mut c = committed.lock().unwrap();
            for (id, key, s) in wrote {
                c.insert(id, (key, s));
            }
        }
    }
    idle.store(true, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relays_killed_stopped_and_servers_restarted_lose_and_duplicate_nothing() {
    // Commits durable before they are acknowledged (the test clusters' default is
    // synchronous_commit = off): a producer counts a message as committed only when it is,
    // even across the immediate restarts.
    let cluster = PrivateCluster::start_with(&[("synchronous_commit", "on")], |_, _| {});
    let db = TestDb::on(&cluster.url(), 8).await;
    let (_d, dir) = scratch();
    let nats = NatsProcess::start(&dir.join("nats"));
    let nats_url = nats.url();
    let (stream, prefix) = (tnats::stream_name(), tnats::subject_prefix());
    let subjects = format!("{prefix}.>");

    let stop = Arc::new(AtomicBool::new(false));
    let (paused, paused_rx) = tokio::sync::watch::channel(false);
    let committed: Committed = Default::default();
    let mut producers = Vec::new();
    let mut idles = Vec::new();
    for p in 0..4 {
        let idle = Arc::new(AtomicBool::new(false));
        idles.push(idle.clone());
        producers.push(tokio::spawn(produce(
            db.store.clone(),
            p,
            prefix.clone(),
            stop.clone(),
            paused_rx.clone(),
            idle,
            committed.clone(),
        )));
    }
    let errs: Vec<_> = (0..2).map(|i| dir.join(format!("relay{i}.err"))).collect();
    let mut relays: Vec<Proc> = (0..2)
        .map(|i| relay(&db, &nats_url, &stream, &subjects, &errs[i]))
        .collect();
    // Both relays running (connected, stream checked) before the first fault: on a loaded
    // machine a start can take many seconds, and a fault aimed at the one that runs would
    // leave none publishing.
    eventually_explained(
        Duration::from_secs(120),
        "both relays started",
        || async {
            errs.iter().all(|e| {
                std::fs::read_to_string(e).is_ok_and(|t| t.contains("relaying the outbox"))
            })
        },
        || worker_log_tails(&dir),
    )
    .await;

    let mut rng = rand::thread_rng();
    let mut faults: BTreeMap<&str, u32> = BTreeMap::new();
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < Duration::from_secs(20) {
        round += 1;
        let before = committed.lock().unwrap().len();
        eventually(
            Duration::from_secs(30),
            "producers commit between faults",
            || {
                let c = committed.clone();
                async move { c.lock().unwrap().len() > before + 20 }
            },
        )
        .await;
        let i = rng.gen_range(0..2);
        match round % 5 {
            0 | 2 => {
                // SIGKILL at whatever point it is at: mid-claim, after publishing before
                // the mark, awaiting acks.
                signal(relays[i].id(), "KILL");
                let _ = relays[i].wait();
                relays[i] = relay(&db, &nats_url, &stream, &subjects, &errs[i]);
                *faults.entry("relay SIGKILL").or_default() += 1;
            }
            1 => {
                // Stopped past its 3 s lease: the other relay claims its messages, and its
                // marks once continued are refused by the fence.
                signal(relays[i].id(), "STOP");
                let other = db.scalar("SELECT count(*) FROM {schema}.outbox_sent").await;
                eventually_explained(
                    Duration::from_secs(90),
                    "the other relay publishes on",
                    || async {
                        db.scalar("SELECT count(*) FROM {schema}.outbox_sent").await > other + 10
                    },
                    || {
                        let log = std::fs::read_to_string(dir.join("nats/server.log"))
                            .unwrap_or_default();
                        let l: Vec<&str> = log.lines().collect();
                        format!(
                            "{}\nnats: {}",
                            worker_log_tails(&dir),
                            l[l.len().saturating_sub(15)..].join("\n")
                        )
                    },
                )
                .await;
                let until = db
                    .scalar("SELECT (extract(epoch FROM now()) * 1000)::bigint")
                    .await
                    + 3_500;
                eventually(
                    Duration::from_secs(30),
                    "past the stopped relay's lease",
                    || async {
                        db.scalar("SELECT (extract(epoch FROM now()) * 1000)::bigint")
                            .await
                            > until
                    },
                )
                .await;
                signal(relays[i].id(), "CONT");
                *faults.entry("relay SIGSTOP past its lease").or_default() += 1;
            }
            3 => {
                let n = &nats;
                tokio::task::block_in_place(|| n.kill_and_restart());
                *faults.entry("nats-server SIGKILL + restart").or_default() += 1;
            }
            _ => {
                paused.send_replace(true);
                for idle in &idles {
                    let idle = idle.clone();
                    eventually(Duration::from_secs(30), "producers paused", || {
                        let idle = idle.clone();
                        async move { idle.load(Ordering::SeqCst) }
                    })
                    .await;
                }
                let c = cluster.cluster.clone();
                tokio::task::spawn_blocking(move || {
                    c.stop(StopMode::Immediate).unwrap();
                    c.start().unwrap();
                })
                .await
                .unwrap();
                paused.send_replace(false);
                *faults.entry("PostgreSQL immediate restart").or_default() += 1;
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    for p in producers {
        p.await.unwrap();
    }
    eventually_explained(
        Duration::from_secs(120),
        "the relays publish everything",
        || async {
            db.scalar("SELECT count(*) FROM {schema}.outbox WHERE published_at IS NULL")
                .await
                == 0
        },
        || {
            let rows = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let rows = db.store.outbox_list(OutboxState::Unpublished, 5).await;
                    let act: Vec<Activity> = sqlx::query_as(
                        "SELECT application_name, state, wait_event, left(query, 120) FROM pg_stat_activity WHERE datname = current_database()",
                    )
                    .fetch_all(&db.pool)
                    .await
                    .unwrap_or_default();
                    let now: (chrono::DateTime<chrono::Utc>,) = sqlx::query_as("SELECT now()").fetch_one(&db.pool).await.unwrap();
                    format!("{rows:?}\nactivity: {act:?}\nnow {now:?}")
                })
            });
            format!("{}\nunpublished: {rows}", worker_log_tails(&dir))
        },
    )
    .await;
    for r in &relays {
        signal(r.id(), "TERM");
    }
    for r in relays.iter_mut() {
        let status = r.wait().unwrap();
        assert!(
            status.success(),
            "a relay exited {status} after SIGTERM: {}",
            worker_log_tails(&dir)
        );
    }
    for e in &errs {
        let text = std::fs::read_to_string(e).unwrap_or_default();
        assert!(!text.contains("panicked"), "a relay panicked: {text}");
    }

    // The checker: the whole stream against what was committed.
    let committed = committed.lock().unwrap().clone();
    let origin = db.store.outbox_origin().await.unwrap();
    let nc = async_nats::connect(&nats_url).await.unwrap();
    let js = jetstream::new(nc);
    let mut s = js.get_stream(&stream).await.unwrap();
    let last = s.info().await.unwrap().state.last_sequence;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut by_seq: BTreeMap<u64, String> = BTreeMap::new();
    let (mut duplicates, mut rolled_back, mut order_violations) = (0, 0, 0);
    let mut last_of: BTreeMap<String, u64> = BTreeMap::new();
    for seq in 1..=last {
        let m = s.get_raw_message(seq).await.unwrap();
        let id = m
            .headers
            .get("Nats-Msg-Id")
            .map(|v| v.to_string())
            .expect("every message carries its id");
        by_seq.insert(seq, id.clone());
        if !seen.insert(id) {
            duplicates += 1;
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        if v["rb"].as_bool() == Some(true) {
            rolled_back += 1;
            continue;
        }
        let key = v["key"].as_str().unwrap().to_string();
        let sq = v["seq"].as_u64().unwrap();
        let prev = last_of.insert(key, sq).unwrap_or(0);
        if sq != prev + 1 {
            order_violations += 1;
        }
    }
    let want: BTreeSet<String> = committed
        .keys()
        .map(|id| message_id(&origin, *id))
        .collect();
    let lost = want.difference(&seen).count();
    let extra = seen.difference(&want).count();
    // Every mark points at its own message: the stream sequence a relay recorded holds the
    // message with that row's id (a stale mark would have been refused, not misplaced).
    let marks = db
        .store
        .outbox_list(OutboxState::Published, 1000)
        .await
        .unwrap();
    let misplaced = marks
        .iter()
        .filter(|r| {
            r.stream_seq
                .and_then(|q| by_seq.get(&(q as u64)))
                .is_none_or(|id| *id != message_id(&origin, r.id))
        })
        .count();
    println!(
        "outbox chaos: {} committed, {} in the stream, lost {lost}, duplicates {duplicates}, \
         rolled back published {rolled_back}, order violations {order_violations}, \
         misplaced marks {misplaced} of {}; faults {faults:?}",
        committed.len(),
        last,
        marks.len()
    );
    assert!(committed.len() > 200, "too little traffic to mean anything");
    assert_eq!(lost, 0, "committed messages missing from the stream");
    assert_eq!(extra, rolled_back, "only rolled-back messages are extra");
    assert_eq!(rolled_back, 0, "a rolled-back message was published");
    assert_eq!(duplicates, 0, "a duplicate inside the window");
    assert_eq!(
        order_violations, 0,
        "a key's sequence went backwards or skipped"
    );
    assert_eq!(misplaced, 0, "a mark points at another message");
    for f in [
        "relay SIGKILL",
        "relay SIGSTOP past its lease",
        "nats-server SIGKILL + restart",
        "PostgreSQL immediate restart",
    ] {
        assert!(faults.contains_key(f), "fault {f} never ran: {faults:?}");
    }
}

/// `docket work --relay-stream` relays the outbox beside its worker and stops with it; a
/// stream that is missing is refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_relays_the_outbox_beside_its_jobs() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let (stream, prefix) = (tnats::stream_name(), tnats::subject_prefix());
    let nc = async_nats::connect(tnats::server_url()).await.unwrap();
    let js = jetstream::new(nc);
    docket_nats::stream::ensure(
        &js,
        &docket_nats::StreamSpec::new(stream.clone(), vec![format!("{prefix}.>")]),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    for i in 0..5 {
        let m = NewMessage::new(format!("{prefix}.x"), &json!({ "i": i })).unwrap();
        db.store.publish(&m).await.unwrap();
    }
    let mut missing = docket(&db);
    missing.env("DOCKET_NATS_URL", tnats::server_url());
    let o = missing
        .args([
            "work",
            "--queue",
            "q",
            "--exec",
            "true",
            "--relay-stream",
            "NO_SUCH_STREAM",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("NO_SUCH_STREAM"));
    let mut c = docket(&db);
    c.env("DOCKET_NATS_URL", tnats::server_url())
        .args([
            "work",
            "--queue",
            "q",
            "--exec",
            "true",
            "--relay-stream",
            &stream,
        ])
        .stderr(std::fs::File::create(dir.join("work.err")).unwrap());
    let mut w = Proc::spawn(&mut c);
    eventually(
        Duration::from_secs(30),
        "the worker's relay publishes",
        || async { db.store.outbox_stats().await.unwrap().unpublished == 0 },
    )
    .await;
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
    let mut s = js.get_stream(&stream).await.unwrap();
    assert_eq!(s.info().await.unwrap().state.messages, 5);
    let _ = js.delete_stream(&stream).await;
}
