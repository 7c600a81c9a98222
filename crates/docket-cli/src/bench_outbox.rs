//! `docket bench --scenario outbox`: the relay against a raw JetStream publish floor, and
//! the outbox insert against a plain enqueue, each in the same run (PostgreSQL).
//!
//! - **Floor**: the same client publishing pre-made messages (the relay's payload, a
//!   `Nats-Msg-Id` each) to a fresh stream, `--batch` in flight at a time, every
//!   acknowledgement awaited — what JetStream and this machine allow with nothing else.
//! - **Relay, unkeyed**: the same number of messages written to the outbox first (not
//!   timed), then a relay with the library's defaults drains them (claim, publish, await,
//!   fenced mark): messages per second and its ratio to the floor (target ≥ 0.7) — the
//!   median of each run's rate over the floor measured just before it, as the machine's
//!   pace drifts between runs.
//! - **Relay, keyed**: the same over 100 keys, order kept per key (reported separately:
//!   one key moves one message per claim-publish-mark cycle).
//! - **Insert**: transactions of one `publish_in` against transactions of one plain
//!   `enqueue_in`, alternated in rounds, from `--producers` connections: the time per
//!   transaction of each and the ratio (target ≤ 1.2).

use std::time::{Duration, Instant};

use docket_core::outbox::{message_id, NewMessage};
use docket_core::{InTransaction, NewJob};
use docket_nats::async_nats::{self, jetstream};
use docket_nats::{Relay, RelayConfig, StreamSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bench::{fresh_store, BenchResult};
use crate::cli::BenchArgs;
use crate::fail::CliError;
use crate::Ctx;

fn payload(i: u64) -> serde_json::Value {
    json!({"order": i, "state": "paid", "cents": 1250})
}

/// The scenario (see the module doc).
pub async fn outbox(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    let n = a.jobs.unwrap_or(20_000);
    let url = std::env::var("DOCKET_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nc = async_nats::connect(&url).await.map_err(|e| {
        CliError::new(
            crate::cli::exit::UNAVAILABLE,
            docket_nats::connect::redact(&e.to_string()),
        )
        .hint("the outbox scenario needs NATS with JetStream (DOCKET_NATS_URL)")
    })?;
    let js = jetstream::new(nc.clone());
    let mut out = Vec::new();
    let (mut floors, mut unkeyed, mut keyed) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..a.runs.max(1) {
        floors.push(floor(&js, n, a.batch.max(1), run).await?);
        unkeyed.push(relay(ctx, &nc, &js, n, None, run).await?);
        keyed.push(relay(ctx, &nc, &js, n, Some(100), run).await?);
    }
    let med = |v: &mut Vec<f64>| crate::bench_concurrency::median(v.clone());
    let floor = med(&mut floors);
    for (name, rates) in [
        ("outbox_relay", &mut unkeyed),
        ("outbox_relay_keyed", &mut keyed),
    ] {
        let rate = med(rates);
        // Each run's relay against the floor measured just before it: this machine's pace
        // drifts by a third within a minute, and a pair seconds apart shares the drift.
        let mut ratios: Vec<f64> = rates.iter().zip(&floors).map(|(r, f)| r / f).collect();
        let ratio = med(&mut ratios);
        out.push(BenchResult {
            scenario: name.into(),
            jobs: Some(n),
            batch: Some(RelayConfig::default().batch as usize),
            jobs_per_s: Some(rate),
            floor_jobs_per_s: Some(floor),
            ratio: Some(ratio),
            note: Some(format!(
                "messages/s drained by one relay with the library defaults ({} lanes of {}), \
                 median of {} runs, against a raw JetStream publish floor ({} in flight, ids \
                 set, acks awaited) measured before each run; the ratio is the median of the \
                 runs' ratios{}",
                RelayConfig::default().lanes,
                RelayConfig::default().batch,
                a.runs.max(1),
                a.batch.max(1),
                if name.ends_with("keyed") {
                    "; 100 keys, order kept per key"
                } else {
                    ""
                }
            )),
            extra: Some(json!({ "runs": rates, "floor_runs": floors, "run_ratios": ratios })),
            ..Default::default()
        });
    }
    out.push(insert_cost(ctx, a).await?);
    Ok(out)
}

/// A fresh file-stored stream capturing `<prefix>.>`.
async fn stream(js: &jetstream::Context, tag: &str) -> anyhow::Result<(String, String)> {
    let name = format!("DOCKET_BENCH_{tag}_{}", std::process::id());
    let prefix = format!("docketbench.{}.{tag}", std::process::id());
    let _ = js.delete_stream(&name).await;
    docket_nats::stream::ensure(
        js,
        &StreamSpec::new(name.clone(), vec![format!("{prefix}.>")]),
        Duration::from_secs(30),
    )
    .await?;
    Ok((name, prefix))
}

async fn floor(js: &jetstream::Context, n: u64, window: usize, run: usize) -> anyhow::Result<f64> {
    let (name, prefix) = stream(js, &format!("F{run}")).await?;
    let msgs: Vec<(String, bytes::Bytes)> = (0..n)
        .map(|i| {
            (
                message_id("benchfloor000000", i as i64),
                bytes::Bytes::from(payload(i).to_string()),
            )
        })
        .collect();
    let subject = format!("{prefix}.x");
    let started = Instant::now();
    for chunk in msgs.chunks(window) {
        let mut acks = Vec::with_capacity(chunk.len());
        for (id, body) in chunk {
            let p = jetstream::message::PublishMessage::build()
                .payload(body.clone())
                .message_id(id);
            acks.push(js.send_publish(subject.clone(), p).await?);
        }
        for ack in acks {
            ack.await?;
        }
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = js.delete_stream(&name).await;
    Ok(rate)
}

async fn relay(
    ctx: &Ctx,
    nc: &async_nats::Client,
    js: &jetstream::Context,
    n: u64,
    keys: Option<u64>,
    run: usize,
) -> anyhow::Result<f64> {
    let tag = format!("{}{run}", if keys.is_some() { "K" } else { "U" });
    let (name, prefix) = stream(js, &tag).await?;
    let store = fresh_store(ctx, 8).await?;
    // Written first, not timed: COPY-speed inserts through the checking function.
    sqlx::query(&format!(
        "SELECT {s}.publish($1 || '.x', jsonb_build_object('order', g, 'state', 'paid', 'cents', 1250),
                CASE WHEN $3 > 0 THEN 'k' || (g % $3) END)
         FROM generate_series(1, $2) g",
        s = store.schema()
    ))
    .bind(&prefix)
    .bind(n as i64)
    .bind(keys.unwrap_or(0) as i64)
    .execute(store.pool())
    .await?;
    sqlx::query(&format!("ANALYZE {}.outbox", store.schema()))
        .execute(store.pool())
        .await?;
    let relay = Relay::new(store.clone(), nc.clone(), RelayConfig::default()).await?;
    let started = Instant::now();
    let marked = relay.drain(&CancellationToken::new()).await?;
    let rate = marked as f64 / started.elapsed().as_secs_f64();
    let _ = js.delete_stream(&name).await;
    Ok(rate)
}

/// Transactions of one `publish_in` against transactions of one `enqueue_in`, alternated.
async fn insert_cost(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<BenchResult> {
    let store = fresh_store(ctx, a.producers.max(1) + 1).await?;
    let per_round = 2_000u64;
    let (mut outbox_us, mut enqueue_us) = (Vec::new(), Vec::new());
    for round in 0..(a.runs.max(1) * 2) {
        let publish = round % 2 == 0;
        let started = Instant::now();
        let mut tasks = Vec::new();
        for p in 0..a.producers.max(1) {
            let store = store.clone();
            let each = per_round / a.producers.max(1) as u64;
            tasks.push(tokio::spawn(async move {
                for i in 0..each {
                    let mut tx = store.begin().await?;
                    let conn = docket_postgres::PgStore::conn(&mut tx);
                    if publish {
                        let m = NewMessage::new("orders.paid", &payload(i))?.key(format!("p{p}"));
                        store.publish_in(conn, &m).await?;
                    } else {
                        store
                            .enqueue_in(conn, &NewJob::new("bench", "paid", payload(i)))
                            .await?;
                    }
                    docket_postgres::PgStore::commit(tx).await?;
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let us = started.elapsed().as_secs_f64() * 1e6 / per_round as f64;
        if publish {
            &mut outbox_us
        } else {
            &mut enqueue_us
        }
        .push(us);
    }
    let med = |v: &mut Vec<f64>| crate::bench_concurrency::median(v.clone());
    let (o, e) = (med(&mut outbox_us), med(&mut enqueue_us));
    Ok(BenchResult {
        scenario: "outbox_insert_vs_enqueue".into(),
        jobs: Some(per_round),
        ratio: Some(o / e),
        note: Some(format!(
            "µs per transaction of one publish_in ({o:.0}) against one plain enqueue_in ({e:.0}), \
             {} producers, rounds alternated, medians (target ≤ 1.2)",
            a.producers.max(1)
        )),
        extra: Some(json!({ "outbox_us": outbox_us, "enqueue_us": enqueue_us })),
        ..Default::default()
    })
}
