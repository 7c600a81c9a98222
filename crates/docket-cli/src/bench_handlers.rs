//! `docket bench --scenario handlers`: what production's handlers do to the claim, not what
//! no-op jobs do. Three worker processes with the library's defaults (3, then 10 slots each)
//! drain jobs whose handlers sleep 50 ms to 1 s, every job keyed by one of eight tenants
//! (at most 2 running each), every fourth also on an ordering key, in a queue limited to 24
//! running. Reported per slot count: how many claims were given back unrun (released: the
//! prefetch churn; the target is at most 1 % of finished jobs), the highest run a job
//! reached (1: no job was run twice), the wall time against the ideal the limits allow, and
//! the pickup latency (first claim after the job became ready).

use rand::{Rng, SeedableRng};
use serde_json::json;

use docket_core::{KeyLimit, NewJob, QueueLimits, Store};

use crate::bench::{fresh_store, wait_exited, BenchResult};
use crate::cli::BenchArgs;
use crate::fail::CliError;
use crate::Ctx;

/// Tenants (concurrency keys) and the running jobs each may have.
const TENANTS: usize = 8;
const PER_TENANT: i32 = 2;
/// The queue's limit across every worker.
const QUEUE_MAX: i32 = 24;
/// Worker processes.
pub(crate) const PROCESSES: usize = 3;

/// The scenario's limits on `store`: the queue's and each tenant's.
pub(crate) async fn limits<S: Store>(store: &S) -> anyhow::Result<()> {
    store
        .set_queue_limits(
            "bench",
            &QueueLimits {
                max_running: Some(QUEUE_MAX),
                key_max_running: None,
                rate: None,
            },
        )
        .await?;
    for t in 0..TENANTS {
        store
            .set_key_limit(&KeyLimit {
                key: format!("tenant-{t}"),
                max_running: Some(PER_TENANT),
                rate: None,
            })
            .await?;
    }
    Ok(())
}

/// The same `n` jobs every run (a fixed seed): handler times 50-1000 ms, each keyed by a
/// tenant, every fourth also on an ordering key; and their summed handler time (ms).
pub(crate) fn jobs(n: u64) -> (Vec<NewJob>, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut total_ms = 0u64;
    let jobs = (0..n)
        .map(|i| {
            let ms = rng.gen_range(50..=1000u64);
            total_ms += ms;
            let j = NewJob::new("bench", "real", json!({ "ms": ms }))
                .concurrency_key(format!("tenant-{}", i as usize % TENANTS));
            if i % 4 == 0 {
                j.ordering_key(format!("order-{}", i % 40))
            } else {
                j
            }
        })
        .collect();
    (jobs, total_ms)
}

/// The wall time the limits allow at best: the summed handler time over what may run at
/// once (the slots of every worker, the queue's limit, the tenants' limits).
pub(crate) fn ideal_s(total_ms: u64, slots: usize) -> (f64, usize) {
    let parallel = (slots * PROCESSES)
        .min(QUEUE_MAX as usize)
        .min(TENANTS * PER_TENANT as usize);
    (total_ms as f64 / 1000.0 / parallel as f64, parallel)
}

/// One drain at `slots` per process.
async fn one(ctx: &Ctx, n: u64, slots: usize) -> anyhow::Result<BenchResult> {
    let store = fresh_store(ctx, 4).await?;
    limits(&store).await?;
    let (jobs, total_ms) = jobs(n);
    for chunk in jobs.chunks(1000) {
        store.enqueue_many(chunk).await?;
    }
    let started = std::time::Instant::now();
    let mut children = Vec::new();
    for _ in 0..PROCESSES {
        let mut c = ctx.child("__bench-worker")?;
        c.args(["--concurrency", &slots.to_string()])
            .args(["--batch", "200", "--connections", "10"])
            .args(["--defaults", "--real-handlers"]);
        children.push(c.spawn()?);
    }
    let waited = wait_exited(&mut children).await;
    crate::stop_children(&mut children);
    waited?;
    let wall = started.elapsed().as_secs_f64();
    let s = &ctx.schema;
    let (done, released, max_run, p50, p95): (i64, i64, i32, Option<f64>, Option<f64>) =
        sqlx::query_as(&format!(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), coalesce(sum(released), 0)::bigint,
                    coalesce(max(attempt - released), 0),
                    percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at)),
                    percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at))
             FROM {s}.jobs_all"
        ))
        .fetch_one(store.pool())
        .await?;
    if done as u64 != n {
        return Err(CliError::new(1, format!("handlers scenario: {done} of {n} succeeded")).into());
    }
    let (ideal, parallel) = ideal_s(total_ms, slots);
    Ok(BenchResult {
        scenario: "handlers".into(),
        jobs: Some(n),
        workers: Some(PROCESSES as u32),
        concurrency: Some(slots),
        seconds: Some(wall),
        jobs_per_s: Some(n as f64 / wall),
        ratio: Some(wall / ideal),
        p50_ms: p50.map(|x| x * 1000.0),
        p95_ms: p95.map(|x| x * 1000.0),
        note: Some(format!(
            "released {released} ({:.2} % of finished), highest run {max_run}; ratio = wall / ideal {ideal:.1} s at {parallel} in parallel; p50/p95 = wait from ready to its (last) claim",
            released as f64 * 100.0 / n as f64
        )),
        extra: Some(json!({ "released": released, "max_run": max_run, "ideal_s": ideal })),
        ..Default::default()
    })
}

/// 3 and 10 slots per process (or `--levels`), `--jobs` each (default 400).
pub async fn handlers(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    let n = a.jobs.unwrap_or(400);
    if n == 0 {
        return Err(CliError::invalid("--jobs must be at least 1").into());
    }
    let mut out = Vec::new();
    for slots in [3, 10] {
        out.push(one(ctx, n, slots).await?);
    }
    Ok(out)
}
