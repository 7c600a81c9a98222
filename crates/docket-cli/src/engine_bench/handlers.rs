//! `docket bench --scenario handlers` on SQLite and MariaDB / MySQL: the PostgreSQL
//! scenario's jobs and limits (`crate::bench_handlers`: handlers of 50 ms to 1 s, eight
//! tenants at most 2 running each, every fourth job on an ordering key, the queue limited
//! to 24) drained by three workers with the library's defaults (3, then 10 slots each) —
//! in this one process, as the engine benchmark's drain is, rather than three. Reported:
//! the wall time against the ideal the limits allow, the claims given back unrun
//! (released), the highest run a job reached, and the pickup latency (ready to claimed).

use std::time::{Duration, Instant};

use docket_core::{JobFilter, JobState, Store};
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};
use serde_json::json;

use super::BenchDb;
use crate::bench_handlers::{ideal_s, jobs, limits, PROCESSES};

fn percentile(v: &[f64], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// One drain of `n` jobs by three workers of `slots` each.
async fn one<D: BenchDb>(db: &D, n: u64, slots: usize, json_out: bool) -> anyhow::Result<()> {
    let store = db.fresh(0).await?;
    limits(&store).await?;
    let (jobs, total_ms) = jobs(n);
    for chunk in jobs.chunks(1000) {
        store.enqueue_many(chunk).await?;
    }
    let started = Instant::now();
    let mut drains = Vec::new();
    for _ in 0..PROCESSES {
        let mut reg = Registry::default();
        reg.register_fn("real", |args: serde_json::Value, _c| async move {
            let ms = args["ms"].as_u64().unwrap_or(0).min(60_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        });
        // Rows kept: released and runs are read off them afterwards.
        let cfg = WorkerConfig::default()
            .queue("bench", slots)
            .keep_succeeded(true);
        let worker = Worker::new(store.clone(), reg, cfg)?;
        drains.push(tokio::spawn(async move {
            worker.drain(Shutdown::default()).await
        }));
    }
    for d in drains {
        tokio::time::timeout(Duration::from_secs(1800), d)
            .await
            .map_err(|_| anyhow::anyhow!("the drain took over 30 minutes"))???;
    }
    let wall = started.elapsed().as_secs_f64();
    let done = store
        .list(&JobFilter {
            queue: Some("bench".into()),
            state: Some(JobState::Succeeded),
            limit: n as i64 + 1,
        })
        .await?;
    if done.len() as u64 != n {
        return Err(anyhow::anyhow!(
            "handlers scenario: {} of {n} succeeded",
            done.len()
        ));
    }
    let released: i64 = done.iter().map(|j| i64::from(j.released)).sum();
    let max_run = done
        .iter()
        .map(|j| j.attempt - j.released)
        .max()
        .unwrap_or(0);
    let mut waits: Vec<f64> = done
        .iter()
        .filter_map(|j| {
            j.attempted_at
                .map(|a| (a - j.run_at).num_milliseconds() as f64)
        })
        .collect();
    waits.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    db.close(store).await;
    let (ideal, parallel) = ideal_s(total_ms, slots);
    let (p50, p95) = (percentile(&waits, 0.5), percentile(&waits, 0.95));
    if json_out {
        let row = json!({"engine": D::NAME, "scenario": "handlers", "jobs": n, "workers": PROCESSES,
            "concurrency": slots, "seconds": wall, "ratio": wall / ideal, "ideal_s": ideal,
            "released": released, "max_run": max_run, "p50_ms": p50, "p95_ms": p95});
        println!("{row}");
    } else {
        println!(
            "{} handlers, {PROCESSES} workers × {slots} slots, N = {n}: {wall:.1} s = ×{:.2} of the ideal {ideal:.1} s ({parallel} in parallel); released {released} ({:.2} % of finished), highest run {max_run}; pickup p50 {p50:.0} ms, p95 {p95:.0} ms",
            D::NAME,
            wall / ideal,
            released as f64 * 100.0 / n as f64
        );
    }
    Ok(())
}

/// 3 and 10 slots per worker, `--jobs` each (default 400).
pub(crate) async fn run<D: BenchDb>(db: &D, n: u64, json_out: bool) -> anyhow::Result<()> {
    for slots in [3, 10] {
        one(db, n, slots, json_out).await?;
    }
    Ok(())
}
