//! `docket-bench scale`: claim latency as the backlog grows, with finished rows
//! kept beside it.

use std::time::{Duration, Instant};

use docket_core::{ClaimRequest, Store};
use serde_json::json;

use docket_cli::bench::BenchResult;
use docket_cli::Ctx;

/// Claim latency (batch of 10, 200 claims after 10 untimed ones) at each backlog size.
pub async fn scale(ctx: &Ctx, sizes: &[u64], finished: u64) -> anyhow::Result<Vec<BenchResult>> {
    let store = docket_cli::bench::fresh_store(ctx, 2).await?;
    let s = &ctx.schema;
    if finished > 0 {
        sqlx::query(&format!(
            "INSERT INTO {s}.jobs (queue, kind, args, state, attempt, finished_at)
             SELECT 'bench', 'noop', '{{}}', 'succeeded', 1, now() FROM generate_series(1, $1) g"
        ))
        .bind(finished as i64)
        .execute(store.pool())
        .await?;
    }
    let mut have = 0u64;
    let mut out = Vec::new();
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    for &size in &sorted {
        if size > have {
            sqlx::query(&format!(
                "INSERT INTO {s}.jobs (queue, kind, args, run_at)
                 SELECT 'bench', 'noop', '{{}}', now() - (g % 10000) * interval '1 millisecond'
                 FROM generate_series(1, $1) g"
            ))
            .bind((size - have) as i64)
            .execute(store.pool())
            .await?;
            have = size;
        }
        sqlx::query(&format!("VACUUM ANALYZE {s}.jobs"))
            .execute(store.pool())
            .await?;
        // Measure the claim, not the write-back of the rows just loaded: without this the
        // checkpointer was still flushing millions of new rows while the claims ran (the
        // same claims measured 0.9 ms at 10k and at 5M with pgbench, but 1.3 vs 2.2 ms
        // here). Best effort: CHECKPOINT needs superuser or pg_checkpoint.
        let _ = sqlx::query("CHECKPOINT").execute(store.pool()).await;
        let req = ClaimRequest {
            queue: "bench".into(),
            limit: 10,
            owner: "bench".into(),
            lease: Duration::from_secs(3600),
            starvation: None,
            controlled: None,
        };
        let mut ms = Vec::with_capacity(200);
        // The first claims on each pooled connection plan claim() and load the table's
        // caches again after the VACUUM (8 ms, measured): warm-up, not timed.
        for i in 0..210 {
            let t = Instant::now();
            let got = store.claim(&req).await?;
            if i >= 10 {
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            // Keep the backlog at its size: give the jobs back.
            let leases: Vec<_> = got.iter().map(|j| j.lease()).collect();
            store.release_many("bench", &leases).await?;
        }
        ms.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        out.push(BenchResult {
            scenario: "scale".into(),
            jobs: Some(size),
            batch: Some(10),
            p50_ms: Some(ms[ms.len() / 2]),
            p95_ms: Some(ms[ms.len() * 95 / 100]),
            p99_ms: Some(ms[ms.len() * 99 / 100]),
            note: Some(format!(
                "claim of 10 at {size} ready, {finished} finished kept; mean {mean:.3} ms"
            )),
            extra: Some(json!({"ready": size, "finished": finished, "mean_ms": mean})),
            ..Default::default()
        });
    }
    Ok(out)
}
