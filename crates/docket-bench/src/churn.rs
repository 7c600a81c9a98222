//! The churn scenario: a steady enqueue rate for a long run with the leader pruning finished
//! jobs, sampling the table's size, its indexes and its dead tuples, to show they stay bounded
//! (a queue table that only grows is the classic way a Postgres queue dies in production).

use std::path::Path;
use std::time::{Duration, Instant};

use docket_core::{NewJob, Store};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::json;

use docket_cli::bench::{fresh_store, BenchResult};
use docket_cli::Ctx;

/// One sample of the table's health.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnSample {
    pub at_s: f64,
    pub total_mb: f64,
    pub table_mb: f64,
    pub indexes_mb: f64,
    pub live_tuples: i64,
    pub dead_tuples: i64,
    pub ready: i64,
    pub succeeded: i64,
}

async fn sample(
    store: &docket_postgres::PgStore,
    schema: &str,
    t0: Instant,
) -> anyhow::Result<ChurnSample> {
    let row: (i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT pg_total_relation_size('{s}.jobs'), pg_relation_size('{s}.jobs'),
                pg_indexes_size('{s}.jobs'),
                coalesce(pg_stat_get_live_tuples(to_regclass('{s}.jobs')), 0),
                coalesce(pg_stat_get_dead_tuples(to_regclass('{s}.jobs')), 0),
                (SELECT count(*) FROM {s}.jobs WHERE state = 'pending' AND run_at <= now()),
                (SELECT count(*) FROM {s}.jobs WHERE state = 'succeeded')
                  + (SELECT coalesce(sum(n), 0) FROM {s}.jobs_succeeded)::bigint",
        s = schema
    ))
    .fetch_one(store.pool())
    .await?;
    let mb = |b: i64| b as f64 / 1_048_576.0;
    Ok(ChurnSample {
        at_s: t0.elapsed().as_secs_f64(),
        total_mb: mb(row.0),
        table_mb: mb(row.1),
        indexes_mb: mb(row.2),
        live_tuples: row.3,
        dead_tuples: row.4,
        ready: row.5,
        succeeded: row.6,
    })
}

/// Runs `rate` jobs/s for `duration` against `workers` worker processes that prune finished
/// jobs after `retention`. Returns the summary and every sample.
pub async fn churn(
    ctx: &Ctx,
    duration: Duration,
    rate: u64,
    workers: u32,
    retention: Duration,
    chart: Option<&Path>,
) -> anyhow::Result<(BenchResult, Vec<ChurnSample>)> {
    let store = fresh_store(ctx, 4).await?;
    let mut children = docket_cli::bench::spawn_workers(ctx, workers, 100, 100, Some(retention))?;
    let t0 = Instant::now();
    let tick = Duration::from_millis(100);
    let per_tick = (rate / 10).max(1);
    let mut next = Instant::now();
    let mut next_sample = Instant::now();
    let mut samples = Vec::new();
    let mut enqueued = 0u64;
    while t0.elapsed() < duration {
        let jobs: Vec<NewJob> = (0..per_tick)
            .map(|i| NewJob::new("bench", "noop", json!({ "n": enqueued + i })))
            .collect();
        store.enqueue_many(&jobs).await?;
        enqueued += per_tick;
        if Instant::now() >= next_sample {
            let s = sample(&store, &ctx.schema, t0).await?;
            eprintln!("churn: {}", serde_json::to_string(&s)?);
            samples.push(s);
            next_sample += Duration::from_secs(10);
        }
        next += tick;
        tokio::time::sleep_until(next.into()).await;
    }
    samples.push(sample(&store, &ctx.schema, t0).await?);
    docket_cli::stop_children(&mut children);
    let secs = t0.elapsed().as_secs_f64();
    if let Some(path) = chart {
        draw(path, &samples)?;
    }
    // Bounded: the largest size in the last third of the run against the first third's.
    let third = |lo: f64, hi: f64| {
        samples
            .iter()
            .filter(|s| s.at_s >= lo * secs && s.at_s <= hi * secs)
            .map(|s| s.total_mb)
            .fold(0.0, f64::max)
    };
    let (early, late) = (third(0.0, 1.0 / 3.0), third(2.0 / 3.0, 1.0));
    let max_dead = samples.iter().map(|s| s.dead_tuples).max().unwrap_or(0);
    let max_ready = samples.iter().map(|s| s.ready).max().unwrap_or(0);
    Ok((
        BenchResult {
            scenario: "churn".into(),
            jobs: Some(enqueued),
            workers: Some(workers),
            seconds: Some(secs),
            jobs_per_s: Some(enqueued as f64 / secs),
            note: Some(format!(
                "steady {rate}/s, retention {}s: total size max {early:.1} MB in the first third, {late:.1} MB in the last; max dead tuples {max_dead}; max ready backlog {max_ready}",
                retention.as_secs()
            )),
            ..Default::default()
        },
        samples,
    ))
}

/// Table + index size and dead tuples over the run.
fn draw(path: &Path, samples: &[ChurnSample]) -> anyhow::Result<()> {
    let labels = crate::chart::register_font();
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_x = samples.last().map(|s| s.at_s).unwrap_or(1.0).max(1.0);
    let max_mb = samples.iter().map(|s| s.total_mb).fold(1.0, f64::max) * 1.2;
    let max_dead = samples
        .iter()
        .map(|s| s.dead_tuples as f64 / 1000.0)
        .fold(1.0, f64::max)
        * 1.2;
    let mut b = ChartBuilder::on(&root);
    b.margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .right_y_label_area_size(70);
    if labels {
        b.caption(
            "Churn: jobs table size and dead tuples, pruning on",
            ("sans-serif", 22),
        );
    }
    let mut chart = b
        .build_cartesian_2d(0f64..max_x, 0f64..max_mb)?
        .set_secondary_coord(0f64..max_x, 0f64..max_dead);
    if labels {
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("MB (table + indexes)")
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("dead tuples (thousands)")
            .draw()?;
    } else {
        chart.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    let a = chart.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.at_s, s.total_mb)),
        BLUE.stroke_width(3),
    ))?;
    if labels {
        a.label("total size (MB)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    }
    let d = chart.draw_secondary_series(LineSeries::new(
        samples
            .iter()
            .map(|s| (s.at_s, s.dead_tuples as f64 / 1000.0)),
        RED.stroke_width(2),
    ))?;
    if labels {
        d.label("dead tuples (thousands)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
