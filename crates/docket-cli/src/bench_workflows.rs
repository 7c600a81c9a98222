//! `docket bench --scenario workflows`: what readiness costs.
//!
//! - **Chains**: 1,000 workflows of 10 nodes each (a chain: every node after the one
//!   before), drained by one default worker process at W = each of `--levels`, against the
//!   same number of plain jobs drained the same way, alternating: the database server's CPU
//!   per job for each (target: a node costs at most 1.3 × a plain job's).
//! - **Fan-in**: one workflow of 10,000 parents into one child. The parents are claimed, then
//!   completed through `complete_nodes` in batches of 100 from four connections at once —
//!   every batch decrements the one shared child, so each waits for the child's row lock
//!   while another batch's transaction holds it. Reported: each completion call's latency
//!   (p50, p99, max) and the last parent's (target: ≤ 50 ms), then the child is claimable.

use std::time::{Duration, Instant};

use docket_core::workflow::{Dep, Graph, Node};
use docket_core::{ClaimRequest, JobState, NodeDone, Store};
use serde_json::json;

use crate::bench::{fresh_store, BenchResult};
use crate::bench_concurrency::{drain_loaded, median, one_drain};
use crate::cli::BenchArgs;
use crate::fail::CliError;
use crate::Ctx;

fn node(name: String, after: Vec<Dep>) -> Node {
    Node {
        name,
        queue: "bench".into(),
        kind: "noop".into(),
        args: json!({}),
        metadata: json!({}),
        priority: 0,
        max_attempts: 25,
        backoff_base_ms: None,
        backoff_cap_ms: None,
        after,
    }
}

/// The scenario (see the module doc).
pub async fn workflows(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    const CHAINS: u64 = 1_000;
    const LENGTH: u64 = 10;
    let n = CHAINS * LENGTH;
    let mut out = Vec::new();
    for &w in &a.levels {
        let (mut plain, mut nodes) = (Vec::new(), Vec::new());
        let (mut plain_rate, mut node_rate) = (Vec::new(), Vec::new());
        for _ in 0..a.runs.max(1) {
            let d = one_drain(ctx, n, w, 0).await?;
            plain.extend(d.server_cpu_s.map(|c| c * 1e6 / n as f64));
            plain_rate.push(d.rate);
            let store = fresh_store(ctx, 4).await?;
            for c in 0..CHAINS {
                let graph = Graph {
                    name: format!("chain-{c}"),
                    nodes: (0..LENGTH)
                        .map(|i| {
                            let after = if i == 0 {
                                vec![]
                            } else {
                                vec![Dep::Name(format!("n{}", i - 1))]
                            };
                            node(format!("n{i}"), after)
                        })
                        .collect(),
                };
                store.enqueue_workflow(&graph).await?;
            }
            sqlx::query(&format!("VACUUM ANALYZE {}.jobs", ctx.schema))
                .execute(store.pool())
                .await?;
            let d = drain_loaded(ctx, &store, n, w, 0, &[]).await?;
            nodes.extend(d.server_cpu_s.map(|c| c * 1e6 / n as f64));
            node_rate.push(d.rate);
            check_order(ctx, &store).await?;
        }
        let full = |v: &Vec<f64>| v.len() == a.runs.max(1);
        let (p, q) = (
            full(&plain).then(|| median(plain.clone())),
            full(&nodes).then(|| median(nodes.clone())),
        );
        let rate = median(node_rate.clone());
        out.push(BenchResult {
            scenario: "workflows: 1,000 chains of 10".into(),
            jobs: Some(n),
            workers: Some(1),
            concurrency: Some(w),
            jobs_per_s: Some(rate),
            seconds: Some(n as f64 / rate),
            ratio: p.zip(q).map(|(p, q)| q / p),
            note: Some(format!(
                "server CPU per node vs per plain job, target <= 1.3; one process, library defaults; median of {} runs, alternating",
                a.runs.max(1)
            )),
            extra: Some(json!({
                "server_cpu_us_per_node": q,
                "server_cpu_us_per_plain_job": p,
                "runs_node": nodes,
                "runs_plain": plain,
                "plain_jobs_per_s": median(plain_rate),
                "runs_node_jobs_per_s": node_rate,
            })),
            ..Default::default()
        });
    }
    out.push(fan_in(ctx, 10_000).await?);
    Ok(out)
}

/// Every chain ran in order: no node started before its parent finished.
async fn check_order(ctx: &Ctx, store: &docket_postgres::PgStore) -> anyhow::Result<()> {
    let s = &ctx.schema;
    let bad: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.job_deps d
         JOIN {s}.jobs p ON p.id = d.parent_id JOIN {s}.jobs c ON c.id = d.child_id
         WHERE c.attempted_at < p.finished_at OR p.state <> 'succeeded' OR c.state <> 'succeeded'
            OR d.state <> 'satisfied'"
    ))
    .fetch_one(store.pool())
    .await?;
    if bad > 0 {
        return Err(CliError::new(1, format!("{bad} edges ran out of order or unfinished")).into());
    }
    Ok(())
}

/// One workflow of `parents` parents into one child, completed from four connections.
async fn fan_in(ctx: &Ctx, parents: usize) -> anyhow::Result<BenchResult> {
    const CLIENTS: usize = 4;
    const BATCH: usize = 100;
    let store = fresh_store(ctx, CLIENTS as u32 + 1).await?;
    let mut nodes: Vec<Node> = (0..parents)
        .map(|i| node(format!("p{i}"), vec![]))
        .collect();
    nodes.push(node(
        "join".into(),
        (0..parents).map(|i| Dep::Name(format!("p{i}"))).collect(),
    ));
    let t = Instant::now();
    let wf = store
        .enqueue_workflow(&Graph {
            name: "fan-in".into(),
            nodes,
        })
        .await?;
    let enqueue_s = t.elapsed().as_secs_f64();
    let join = wf.job("join").expect("the join node");
    let mut claimed = Vec::with_capacity(parents);
    while claimed.len() < parents {
        let got = store
            .claim(&ClaimRequest {
                queue: "bench".into(),
                limit: 1000,
                owner: "bench".into(),
                lease: Duration::from_secs(600),
                starvation: None,
                controlled: None,
            })
            .await?;
        if got.is_empty() {
            return Err(CliError::new(1, "the fan-in's parents could not all be claimed").into());
        }
        claimed.extend(got);
    }
    let batches: Vec<Vec<NodeDone>> = claimed
        .chunks(BATCH)
        .map(|c| {
            c.iter()
                .map(|j| NodeDone {
                    lease: j.lease(),
                    output: None,
                })
                .collect()
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let client = || {
        let (store, batches, next) = (&store, &batches, &next);
        async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(b) = batches.get(i) else { break };
                let t = Instant::now();
                let o = store.complete_nodes("bench", b).await?;
                if o.applied.len() != b.len() {
                    return Err(CliError::new(1, "a fan-in completion was refused").into());
                }
                lat.push((i, t.elapsed().as_secs_f64() * 1e3, started.elapsed()));
            }
            anyhow::Ok(lat)
        }
    };
    let all = futures::future::try_join_all((0..CLIENTS).map(|_| client())).await?;
    let wall = started.elapsed().as_secs_f64();
    let mut lat: Vec<(usize, f64, Duration)> = all.into_iter().flatten().collect();
    let last = lat
        .iter()
        .max_by_key(|(_, _, at)| *at)
        .map(|(_, ms, _)| *ms)
        .unwrap_or(0.0);
    lat.sort_by(|x, y| x.1.total_cmp(&y.1));
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize].1;
    let state = store.get(join).await?.state;
    if state != JobState::Pending {
        return Err(CliError::new(1, format!("the join is {state} after its last parent")).into());
    }
    Ok(BenchResult {
        scenario: format!("workflows: fan-in of {parents}"),
        jobs: Some(parents as u64),
        workers: Some(CLIENTS as u32),
        jobs_per_s: Some(parents as f64 / wall),
        seconds: Some(wall),
        p50_ms: Some(pct(0.5)),
        p99_ms: Some(pct(0.99)),
        note: Some(format!(
            "complete_nodes of {BATCH} parents a call from {CLIENTS} connections, all sharing one child: the last parent's call {last:.1} ms (target <= 50), max {:.1} ms; enqueue of the graph {enqueue_s:.2} s",
            lat.last().map(|l| l.1).unwrap_or(0.0)
        )),
        extra: Some(json!({
            "last_parent_ms": last,
            "max_ms": lat.last().map(|l| l.1),
            "enqueue_s": enqueue_s,
        })),
        ..Default::default()
    })
}
