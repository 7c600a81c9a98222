//! `docket bench` on SQLite and MariaDB / MySQL: one process's drain with the library's
//! defaults but succeeded rows kept (`WorkerConfig::default().queue("bench", W)
//! .keep_succeeded(true)`, see `drain`) at each W of `--levels`, against
//! that engine's own floor measured in the same run — a raw SQL claim-and-complete loop
//! (claim a batch with a lease and attempt + 1, then one fenced completion of it: the two
//! commits a lease-based queue needs) by a small program of its own, no Docket code.
//!
//! Time is the database's: from the first claim (`min(attempted_at)`) to the last completion
//! (`max(finished_at)`). The floor runs before and after; the ratio uses their mean.

use std::time::{Duration, Instant};

use docket_core::{NewJob, Store};
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};
use serde_json::json;

use crate::cli::BenchArgs;
use crate::fail::CliError;

mod handlers;
pub(crate) mod mysql;
pub(crate) mod sqlite;

/// What the benchmark needs from an engine.
pub(crate) trait BenchDb: Sync {
    type Store: Store;
    const NAME: &'static str;
    /// Concurrent clients of the floor loop (SQLite has one writer: 1).
    const FLOOR_CLIENTS: usize;
    /// A fresh, migrated, empty store of the benchmark's own.
    async fn fresh(&self, run: usize) -> anyhow::Result<Self::Store>;
    /// The floor: `n` jobs drained by `clients` raw SQL loops claiming `batch` at a time;
    /// jobs per second.
    async fn floor(&self, n: u64, batch: usize, clients: usize) -> anyhow::Result<f64>;
    /// (first claim, last completion) in ms on the database's clock.
    async fn span(&self, store: &Self::Store) -> anyhow::Result<(i64, i64)>;
    /// Ends a store the benchmark is done with, before its files or database are reused.
    async fn close(&self, store: Self::Store) {
        drop(store);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Runs the benchmark (`--scenario engine`, or `handlers`: real handler times on keyed and
/// limited queues).
pub(crate) async fn run<D: BenchDb>(db: &D, a: &BenchArgs) -> anyhow::Result<()> {
    if a.scenario == "handlers" {
        let n = a.jobs.unwrap_or(400);
        if !(1..=100_000).contains(&n) {
            return Err(CliError::invalid("--jobs must be 1..=100000").into());
        }
        return handlers::run(db, n, a.json).await;
    }
    if a.scenario != "engine" && a.scenario != "drain" {
        return Err(CliError::invalid(format!(
            "--scenario {} needs PostgreSQL; on {} the benchmark is --scenario engine or handlers",
            a.scenario,
            D::NAME
        ))
        .into());
    }
    if a.counts.is_empty()
        || a.counts.iter().any(|n| !(100..=2_000_000).contains(n))
        || a.levels.is_empty()
        || a.levels.iter().any(|w| !(1..=1000).contains(w))
    {
        return Err(
            CliError::invalid("--counts must be 100..=2000000 and --levels 1..=1000").into(),
        );
    }
    let runs = a.runs.clamp(1, 9);
    let batch = a.batch.clamp(1, 1000);
    // Every N asked for is run (with its own floor, before and after): a size left out
    // silently would report a number for a drain nobody measured.
    for &n in &a.counts {
        let floor_before = db.floor(n, batch, D::FLOOR_CLIENTS).await?;
        let mut results = Vec::new();
        for &w in &a.levels {
            let mut rates = Vec::new();
            for r in 0..runs {
                rates.push(drain(db, n, w, r).await?);
            }
            results.push((w, median(rates.clone()), rates));
        }
        let floor_after = db.floor(n, batch, D::FLOOR_CLIENTS).await?;
        let floor = (floor_before + floor_after) / 2.0;
        if a.json {
            for (w, med, all) in &results {
                let row = json!({"engine": D::NAME, "scenario": "engine", "jobs": n, "concurrency": w,
                   "jobs_per_s": med.round(), "runs": all.iter().map(|r| r.round()).collect::<Vec<_>>(),
                   "floor_jobs_per_s": floor.round(), "ratio": (med / floor * 100.0).round() / 100.0});
                println!("{row}");
            }
            continue;
        }
        println!(
            "{} floor, N = {n} ({} client(s), batch {batch}): {floor_before:.0} before, {floor_after:.0} after",
            D::NAME,
            D::FLOOR_CLIENTS
        );
        for (w, med, all) in &results {
            println!(
                "one process, defaults + kept rows, N = {n}, W = {w:>3}: {med:>7.0} jobs/s  ×{:.2} of the floor  (runs {:?})",
                med / floor,
                all.iter().map(|r| r.round() as i64).collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}

/// One drain of `n` no-op jobs by one in-process worker with the defaults at `w` slots.
async fn drain<D: BenchDb>(db: &D, n: u64, w: usize, run: usize) -> anyhow::Result<f64> {
    let store = db.fresh(run).await?;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new("bench", "noop", json!({ "i": i })))
        .collect();
    for chunk in jobs.chunks(10_000) {
        store.enqueue_many(chunk).await?;
    }
    let mut reg = Registry::default();
    reg.register_fn("noop", |_a, _c| async { Ok(()) });
    let worker = Worker::new(
        store.clone(),
        reg,
        // Rows kept: the drain's span is read off them (first claim, last finish), and
        // these engines have no statement-level trigger to time deletes by. Their default
        // (rows deleted) is measured on neither engine yet: see docs/benchmarks.md.
        WorkerConfig::default()
            .queue("bench", w)
            .keep_succeeded(true),
    )?;
    let shutdown = Shutdown::default();
    let started = Instant::now();
    let report = tokio::time::timeout(Duration::from_secs(1800), worker.drain(shutdown))
        .await
        .map_err(|_| anyhow::anyhow!("the drain took over 30 minutes"))??;
    let done = store.active_count(&["bench".to_string()]).await?;
    if done != 0 || report.metrics.completed < n {
        return Err(anyhow::anyhow!(
            "the drain ended with {done} jobs active and {} completed of {n}",
            report.metrics.completed
        ));
    }
    let (first, last) = db.span(&store).await?;
    db.close(store).await;
    let secs = ((last - first).max(1) as f64) / 1000.0;
    let m = &report.metrics;
    tracing::info!(
        w, run, wall = ?started.elapsed(), secs,
        jobs_per_claim = m.claimed as f64 / m.claims.max(1) as f64,
        jobs_per_flush = m.completed as f64 / m.flushes.max(1) as f64,
        "drain"
    );
    Ok(n as f64 / secs)
}
