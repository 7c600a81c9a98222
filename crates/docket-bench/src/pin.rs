//! The pinned-horizon scenario: a steady offered rate through one worker with the library
//! defaults while a REPEATABLE READ transaction holds its snapshot for a window.
//!
//! The classic failure of PostgreSQL queues (Que's "failure by MVCC"): while any transaction
//! holds an old snapshot — a report, a `pg_dump`, a connection idle in a transaction, a replica
//! with `hot_standby_feedback` — no row version that died after it can be vacuumed, and every
//! claim walks past more dead index entries. This run shows what that does to Docket: every
//! 10 s it samples the pickup latency of the jobs started in the window (handler start less
//! the time the job was offered, both on this process's clock),
//! the claims' own latency (the worker's `docket_claim_duration_seconds`, from this
//! process's recorder), throughput, the ready backlog, dead tuples and the table and index
//! sizes.
//!
//! It runs on a private cluster started for the run with the server's defaults (autovacuum
//! on, `synchronous_commit = on`), never on a shared server: the pin holds back vacuum for
//! every database of the cluster.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use docket_core::{NewJob, Store};
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::json;
use sqlx::Connection;

use docket_cli::bench::{fresh_store, percentiles, BenchResult};
use docket_cli::Ctx;

/// What the run does.
#[derive(Debug, Clone)]
pub struct PinPlan {
    /// Jobs offered per second.
    pub rate: u64,
    /// The worker's slots (library defaults otherwise).
    pub slots: usize,
    /// Whole run.
    pub duration: Duration,
    /// When the snapshot is taken, from the start.
    pub pin_at: Duration,
    /// How long it is held.
    pub pin_for: Duration,
    /// `keep_succeeded(true)` with a 24 h retention, instead of deleting on success.
    pub keep_succeeded: bool,
}

/// One 10-second sample.
#[derive(Debug, Clone, Serialize)]
pub struct PinSample {
    pub at_s: f64,
    pub pinned: bool,
    pub started_per_s: f64,
    pub pickup_p50_ms: f64,
    pub pickup_p99_ms: f64,
    pub claim_p50_ms: f64,
    pub claim_p99_ms: f64,
    /// Offered and not yet started (this process counts both).
    pub ready: i64,
    pub dead_tuples: i64,
    pub table_mb: f64,
    pub indexes_mb: f64,
}

/// The claim durations the worker records, kept by this process's recorder between samples.
#[derive(Default)]
struct ClaimTimes(Mutex<Vec<f64>>);

impl metrics::Recorder for ClaimTimesRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        if key.name() == "docket_claim_duration_seconds" {
            metrics::Histogram::from_arc(self.0.clone())
        } else {
            metrics::Histogram::noop()
        }
    }
}

/// Hand-written (a dozen lines) rather than a debugging recorder from `metrics-util`: only
/// one histogram is wanted, drained every sample.
struct ClaimTimesRecorder(Arc<ClaimTimes>);

impl metrics::HistogramFn for ClaimTimes {
    fn record(&self, value: f64) {
        self.0.lock().expect("poisoned").push(value * 1000.0);
    }
}

/// Dead tuples, table and index size: statistics and sizes only. The backlog is counted by
/// this process (offered less started), not by a count over `jobs`: under the pin that count
/// walks every dead entry too, and its walk — and its own snapshot — would load the server it
/// measures.
async fn table_sample(
    store: &docket_postgres::PgStore,
    schema: &str,
) -> anyhow::Result<(i64, f64, f64)> {
    let row: (i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT coalesce(pg_stat_get_dead_tuples(to_regclass('{s}.jobs')), 0),
                pg_relation_size('{s}.jobs'), pg_indexes_size('{s}.jobs')",
        s = schema
    ))
    .fetch_one(store.pool())
    .await?;
    let mb = |b: i64| b as f64 / 1_048_576.0;
    Ok((row.0, mb(row.1), mb(row.2)))
}

/// Runs the plan; returns the summary and every sample.
pub async fn pin(
    ctx: &Ctx,
    plan: &PinPlan,
    chart: Option<&Path>,
) -> anyhow::Result<(BenchResult, Vec<PinSample>)> {
    let claims = Arc::new(ClaimTimes::default());
    metrics::set_global_recorder(ClaimTimesRecorder(claims.clone()))
        .map_err(|e| anyhow::anyhow!("metrics recorder: {e}"))?;
    let store = fresh_store(ctx, 4).await?;
    let pickups: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut reg = Registry::default();
    let p = pickups.clone();
    reg.register_fn("noop", move |a, _c| {
        let p = p.clone();
        async move {
            let sent = a["t"].as_i64().unwrap_or(0);
            let waited = (Utc::now().timestamp_micros() - sent) as f64 / 1000.0;
            p.lock().expect("poisoned").push(waited.max(0.0));
            Ok(())
        }
    });
    let mut cfg = WorkerConfig::default().queue("bench", plan.slots);
    if plan.keep_succeeded {
        cfg = cfg.keep_succeeded(true);
        cfg.retention.finished = Duration::from_secs(24 * 3600);
    }
    // A pool of 10, as `docket bench --scenario concurrency` takes for the library defaults.
    let worker = Arc::new(Worker::new(ctx.connect(10).await?, reg, cfg)?);
    let shutdown = Shutdown::default();
    let (w2, s2) = (worker.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w2.run(s2).await });

    let t0 = Instant::now();
    let tick = Duration::from_millis(100);
    let per_tick = (plan.rate / 10).max(1);
    let (mut next, mut next_sample) = (Instant::now(), Instant::now() + Duration::from_secs(10));
    let mut last_sample = Instant::now();
    let mut samples = Vec::new();
    let mut enqueued = 0u64;
    let mut started_total = 0u64;
    let mut pin: Option<sqlx::PgConnection> = None;
    let mut pinned_once = false;
    while t0.elapsed() < plan.duration {
        let at = t0.elapsed();
        if pin.is_none() && !pinned_once && at >= plan.pin_at {
            // The snapshot is taken by the first statement of the transaction and held
            // until it ends.
            let mut c = sqlx::PgConnection::connect(&ctx.url).await?;
            sqlx::raw_sql(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {}.jobs",
                ctx.schema
            ))
            .execute(&mut c)
            .await?;
            pin = Some(c);
            pinned_once = true;
            eprintln!("pin: snapshot taken at {:.0} s", at.as_secs_f64());
        }
        if pin.is_some() && at >= plan.pin_at + plan.pin_for {
            if let Some(mut c) = pin.take() {
                sqlx::raw_sql("ROLLBACK").execute(&mut c).await?;
                c.close().await?;
            }
            eprintln!("pin: released at {:.0} s", at.as_secs_f64());
        }
        // Stamped when offered: the pickup latency includes the enqueue's own commit.
        let t = Utc::now().timestamp_micros();
        let jobs: Vec<NewJob> = (0..per_tick)
            .map(|i| NewJob::new("bench", "noop", json!({ "n": enqueued + i, "t": t })))
            .collect();
        store.enqueue_many(&jobs).await?;
        enqueued += per_tick;
        if Instant::now() >= next_sample {
            let window = last_sample.elapsed().as_secs_f64();
            last_sample = Instant::now();
            let picked: Vec<f64> = std::mem::take(&mut *pickups.lock().expect("poisoned"));
            let claimed: Vec<f64> = std::mem::take(&mut *claims.0.lock().expect("poisoned"));
            let picked_n = picked.len() as u64;
            let started = picked.len() as f64 / window;
            let pct = |v: Vec<f64>| {
                if v.is_empty() {
                    (0.0, 0.0, 0.0)
                } else {
                    percentiles(v)
                }
            };
            let (p50, _, p99) = pct(picked);
            let (c50, _, c99) = pct(claimed);
            let (dead, table_mb, indexes_mb) = table_sample(&store, &ctx.schema).await?;
            started_total += picked_n;
            let ready = enqueued as i64 - started_total as i64;
            let s = PinSample {
                at_s: t0.elapsed().as_secs_f64(),
                pinned: pin.is_some(),
                started_per_s: started,
                pickup_p50_ms: p50,
                pickup_p99_ms: p99,
                claim_p50_ms: c50,
                claim_p99_ms: c99,
                ready,
                dead_tuples: dead,
                table_mb,
                indexes_mb,
            };
            eprintln!("pin: {}", serde_json::to_string(&s)?);
            samples.push(s);
            next_sample += Duration::from_secs(10);
        }
        next += tick;
        tokio::time::sleep_until(next.into()).await;
    }
    if let Some(mut c) = pin.take() {
        sqlx::raw_sql("ROLLBACK").execute(&mut c).await?;
    }
    shutdown.graceful.cancel();
    let _ = task.await;
    if let Some(path) = chart {
        draw(path, &samples, plan)?;
    }
    Ok((summary(plan, enqueued, &samples), samples))
}

/// Before the pin (the last sample before it), at its end (the last sample inside it) and
/// two minutes after it.
fn summary(plan: &PinPlan, enqueued: u64, samples: &[PinSample]) -> BenchResult {
    let (from, to) = (
        plan.pin_at.as_secs_f64(),
        (plan.pin_at + plan.pin_for).as_secs_f64(),
    );
    let before = samples.iter().rfind(|s| s.at_s < from);
    let end = samples.iter().rfind(|s| s.at_s <= to && s.at_s >= from);
    let after = samples.iter().find(|s| s.at_s >= to + 120.0);
    let kept = samples
        .iter()
        .filter(|s| s.pinned)
        .map(|s| s.started_per_s)
        .fold(f64::INFINITY, f64::min);
    let show = |s: Option<&PinSample>| match s {
        Some(s) => format!(
            "pickup p50 {:.0} / p99 {:.0} ms, claim p99 {:.1} ms, ready {}, {:.0}+{:.0} MB",
            s.pickup_p50_ms, s.pickup_p99_ms, s.claim_p99_ms, s.ready, s.table_mb, s.indexes_mb
        ),
        None => "-".into(),
    };
    BenchResult {
        scenario: if plan.keep_succeeded { "pin_keep_24h" } else { "pin" }.into(),
        jobs: Some(enqueued),
        concurrency: Some(plan.slots),
        seconds: Some(plan.duration.as_secs_f64()),
        jobs_per_s: Some(plan.rate as f64),
        note: Some(format!(
            "offered {}/s, pin {:.0}..{:.0} s; before: {}; end of pin: {}; 2 min after: {}; slowest 10 s of the pin started {:.0}/s",
            plan.rate,
            from,
            to,
            show(before),
            show(end),
            show(after),
            kept
        )),
        ..Default::default()
    }
}

/// Pickup p99 and ready backlog over time, the pin shaded.
fn draw(path: &Path, samples: &[PinSample], plan: &PinPlan) -> anyhow::Result<()> {
    let labels = crate::chart::register_font();
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_x = samples.last().map(|s| s.at_s).unwrap_or(1.0).max(1.0);
    let max_ms = samples.iter().map(|s| s.pickup_p99_ms).fold(10.0, f64::max) * 1.2;
    let max_mb = samples
        .iter()
        .map(|s| s.table_mb + s.indexes_mb)
        .fold(1.0, f64::max)
        * 1.2;
    let mut b = ChartBuilder::on(&root);
    b.margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .right_y_label_area_size(70);
    if labels {
        b.caption(
            format!(
                "A snapshot held {:.0} s: pickup p99 and table size ({} jobs/s, {} slots)",
                plan.pin_for.as_secs_f64(),
                plan.rate,
                plan.slots
            ),
            ("sans-serif", 20),
        );
    }
    let mut chart = b
        .build_cartesian_2d(0f64..max_x, 0f64..max_ms)?
        .set_secondary_coord(0f64..max_x, 0f64..max_mb);
    if labels {
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("pickup p99 (ms)")
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("table + indexes (MB)")
            .draw()?;
    } else {
        chart.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    let (from, to) = (
        plan.pin_at.as_secs_f64(),
        (plan.pin_at + plan.pin_for).as_secs_f64().min(max_x),
    );
    chart.draw_series(std::iter::once(Rectangle::new(
        [(from, 0.0), (to, max_ms)],
        RGBColor(230, 230, 230).filled(),
    )))?;
    let a = chart.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.at_s, s.pickup_p99_ms)),
        BLUE.stroke_width(3),
    ))?;
    if labels {
        a.label("pickup p99 (ms)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    }
    let d = chart.draw_secondary_series(LineSeries::new(
        samples.iter().map(|s| (s.at_s, s.table_mb + s.indexes_mb)),
        RED.stroke_width(2),
    ))?;
    if labels {
        d.label("table + indexes (MB)")
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
