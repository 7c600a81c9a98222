//! `docket bench --scenario jetstream`: JetStream as a job source against a raw consumer
//! loop, in the same run.
//!
//! - **Floor**: a durable pull consumer read by the same client in a bare loop — pull up to
//!   `slots` messages, ack each — until every message is acked: what JetStream and this
//!   machine allow with nothing else.
//! - **Source, no-op jobs**: the same messages (real jobs: a kind header, JSON arguments)
//!   drained by a [`Source`] with the library's defaults and `slots` slots (10, 50 and 200),
//!   its handler doing nothing: jobs per second and the ratio to the floor at the same
//!   pull size (target ≥ 0.7).
//! - **Source, real handler times**: 50 ms on 10 and 200 slots, 1 s on 50 slots, each
//!   against its ideal (slots / handler time): what real handler times cost (pulls sized to
//!   free slots, in-progress acks, no prefetch).
//!
//! The messages are published first (not timed); each variant gets a fresh stream. The
//! time is taken when the last job's ack has been sent (flushed), not when `drain` returns
//! (its last consumer check is not work).

use std::time::{Duration, Instant};

use docket_nats::async_nats::{self, jetstream};
use docket_nats::{Source, SourceConfig, StreamSpec};
use docket_worker::Registry;
use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bench::BenchResult;
use crate::cli::BenchArgs;
use crate::fail::CliError;

/// The scenario (see the module doc).
pub async fn jetstream(a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    let n = a.jobs.unwrap_or(50_000);
    let url = std::env::var("DOCKET_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nc = async_nats::connect(&url).await.map_err(|e| {
        CliError::new(
            crate::cli::exit::UNAVAILABLE,
            docket_nats::connect::redact(&e.to_string()),
        )
        .hint("the jetstream scenario needs NATS with JetStream (DOCKET_NATS_URL)")
    })?;
    let js = jetstream::new(nc.clone());
    let med = |v: &[f64]| crate::bench_concurrency::median(v.to_vec());
    let mut out = Vec::new();
    for slots in [10usize, 50, 200] {
        let (mut floors, mut rates) = (Vec::new(), Vec::new());
        for run in 0..a.runs.max(1) {
            floors.push(floor(&nc, &js, n, slots, run).await?);
            rates.push(source(&nc, &js, n, slots, Duration::ZERO, run).await?);
        }
        let (f, r) = (med(&floors), med(&rates));
        out.push(BenchResult {
            scenario: "jetstream_source_noop".into(),
            jobs: Some(n),
            concurrency: Some(slots),
            jobs_per_s: Some(r),
            floor_jobs_per_s: Some(f),
            ratio: Some(r / f),
            note: Some(format!(
                "no-op jobs/s drained by one Source with the library defaults and {slots} slots, \
                 median of {} runs, against a raw consumer loop (pull {slots}, ack each) in the \
                 same run (target ≥ 0.7)",
                a.runs.max(1)
            )),
            extra: Some(json!({ "runs": rates, "floor_runs": floors })),
            ..Default::default()
        });
    }
    // Real handler times: each variant runs about five seconds of ideal work.
    for (slots, work) in [
        (10usize, Duration::from_millis(50)),
        (200, Duration::from_millis(50)),
        (50, Duration::from_secs(1)),
    ] {
        let ideal = slots as f64 / work.as_secs_f64();
        let jobs = (ideal * 5.0) as u64;
        let mut rates = Vec::new();
        for run in 0..a.runs.max(1) {
            rates.push(source(&nc, &js, jobs, slots, work, run).await?);
        }
        let r = med(&rates);
        let ms = work.as_millis();
        out.push(BenchResult {
            scenario: format!("jetstream_source_{ms}ms"),
            jobs: Some(jobs),
            concurrency: Some(slots),
            jobs_per_s: Some(r),
            floor_jobs_per_s: Some(ideal),
            ratio: Some(r / ideal),
            note: Some(format!(
                "jobs/s of a {ms} ms handler on {slots} slots (library defaults), median of {} \
                 runs, against the ideal {ideal:.0}/s (every slot busy all the time)",
                a.runs.max(1)
            )),
            extra: Some(json!({ "runs": rates })),
            ..Default::default()
        });
    }
    Ok(out)
}

/// A fresh stream holding `n` job messages, and its name.
async fn filled(js: &jetstream::Context, n: u64, tag: &str) -> anyhow::Result<(String, String)> {
    let name = format!("DOCKET_BENCH_JS{tag}_{}", std::process::id());
    let prefix = format!("docketbench.{}.js{tag}", std::process::id());
    for s in [name.clone(), format!("{name}_DEAD")] {
        let _ = js.delete_stream(&s).await;
    }
    let dead = format!("{prefix}dead.jobs");
    for (s, subject) in [
        (name.clone(), format!("{prefix}.>")),
        (format!("{name}_DEAD"), dead.clone()),
    ] {
        docket_nats::stream::ensure(
            js,
            &StreamSpec::new(s, vec![subject]),
            Duration::from_secs(30),
        )
        .await?;
    }
    let subject = format!("{prefix}.jobs");
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut acks = Vec::with_capacity(chunk.len());
        for i in chunk {
            let mut h = async_nats::HeaderMap::new();
            h.insert(docket_nats::KIND_HEADER, "noop");
            let body = json!({ "order": i, "state": "paid" }).to_string();
            acks.push(
                js.publish_with_headers(subject.clone(), h, body.into())
                    .await?,
            );
        }
        for ack in acks {
            ack.await?;
        }
    }
    Ok((name, dead))
}

async fn drop_streams(js: &jetstream::Context, name: &str) {
    let _ = js.delete_stream(name).await;
    let _ = js.delete_stream(format!("{name}_DEAD")).await;
}

async fn floor(
    nc: &async_nats::Client,
    js: &jetstream::Context,
    n: u64,
    slots: usize,
    run: usize,
) -> anyhow::Result<f64> {
    let (name, _) = filled(js, n, &format!("F{slots}x{run}")).await?;
    let stream = js.get_stream(&name).await?;
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("floor".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await?;
    let started = Instant::now();
    let mut acked = 0u64;
    while acked < n {
        let mut batch = consumer
            .batch()
            .max_messages(slots)
            .expires(Duration::from_millis(100))
            .messages()
            .await?;
        while let Some(m) = batch.next().await {
            m.map_err(|e| anyhow::anyhow!("{e}"))?
                .ack()
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            acked += 1;
        }
    }
    nc.flush().await?;
    let rate = n as f64 / started.elapsed().as_secs_f64();
    drop_streams(js, &name).await;
    Ok(rate)
}

async fn source(
    nc: &async_nats::Client,
    js: &jetstream::Context,
    n: u64,
    slots: usize,
    work: Duration,
    run: usize,
) -> anyhow::Result<f64> {
    let (name, dead) = filled(js, n, &format!("S{slots}x{}x{run}", work.as_millis())).await?;
    let mut registry = Registry::<()>::default();
    registry.register_fn("noop", move |_, _| async move {
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        Ok(())
    });
    let cfg = SourceConfig {
        slots,
        dead_letter: dead,
        ..SourceConfig::new(&name, "bench")
    };
    let source = Source::new(nc.clone(), registry, cfg).await?;
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn({
        let (source, stop) = (source.clone(), stop.clone());
        async move { source.run(stop).await }
    });
    // Timed to the last job's ack, not to a drain's final consumer check.
    let mut every = tokio::time::interval(Duration::from_millis(1));
    while source.report().succeeded < n {
        every.tick().await;
        if running.is_finished() {
            break;
        }
    }
    nc.flush().await?;
    let elapsed = started.elapsed();
    stop.cancel();
    let report = running.await??;
    if report.succeeded < n {
        anyhow::bail!("the source stopped after {} of {n} jobs", report.succeeded);
    }
    drop_streams(js, &name).await;
    Ok(n as f64 / elapsed.as_secs_f64())
}
