//! `docket-bench`: the benchmarks that take long or draw charts, apart from the `docket`
//! binary (which keeps `docket bench` for drain, concurrency, mixed, enqueue and latency).
//! It drives the same harness (`docket_cli::bench`), and its worker processes are this binary
//! again (`__bench-worker`, as for `docket bench`).
//!
//! - `docket-bench scale`: claim cost against the ready backlog with finished rows kept.
//! - `docket-bench churn --duration 10m --rate 2000`: steady enqueue with pruning; table size
//!   and dead tuples over time, and a chart with `--chart-dir`.
//! - `docket-bench pin --rate 2000 --slots 50 --pin-at 2m --pin-for 10m --duration 15m`: a
//!   snapshot held open while one worker with the library defaults serves a steady rate, on a
//!   private cluster with the server's defaults (`pin.rs`).
//! - `docket-bench charts [--chart-dir docs]`: drain throughput against concurrency with the
//!   SQL floor, and the pickup-latency distribution, as PNGs.

mod chart;
mod churn;
mod pin;
mod scale;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use docket_cli::bench::{
    bench_ctx, drain, latency, latency_samples, percentiles, print, run_floor, BenchResult,
};
use docket_cli::cli::{BenchArgs, BenchWorkerArgs};
use docket_cli::fail::CliError;
use docket_cli::Ctx;

/// Docket's long benchmarks.
#[derive(Debug, Parser)]
#[command(name = "docket-bench")]
struct Args {
    /// PostgreSQL URL; without it the embedded local PostgreSQL, as for `docket`.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The run uses `<schema>_bench`, dropped and re-created by every run.
    #[arg(long, global = true, env = "DOCKET_SCHEMA", default_value = "docket")]
    schema: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Claim cost against the ready backlog (`--sizes`), with `--finished` rows kept.
    Scale(BenchArgs),
    /// Steady enqueue (`--rate`) with pruning for `--duration`.
    Churn(BenchArgs),
    /// Throughput against concurrency and the latency distribution, as PNGs.
    Charts(BenchArgs),
    /// A REPEATABLE READ snapshot held for `--pin-for` while one worker (library defaults,
    /// `--slots`) serves `--rate` jobs/s; samples every 10 s. On a private cluster with the
    /// server's defaults (never DATABASE_URL's: the pin holds back vacuum cluster-wide).
    Pin(PinArgs),
    /// `docket bench --scenario concurrency` (one process, library defaults, `--levels`),
    /// drawn as jobs/s against slots beside the floor (`bench-concurrency.png`).
    ConcurrencyChart(BenchArgs),
    /// Hidden: a worker process of the benchmark.
    #[command(hide = true, name = "__bench-worker")]
    BenchWorker(BenchWorkerArgs),
}

/// `docket-bench pin`.
#[derive(Debug, clap::Args)]
struct PinArgs {
    /// Jobs offered per second.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    rate: u64,
    /// The worker's slots.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    slots: u64,
    /// The whole run.
    #[arg(long, default_value = "15m")]
    duration: String,
    /// When the snapshot is taken.
    #[arg(long, default_value = "2m")]
    pin_at: String,
    /// How long it is held.
    #[arg(long, default_value = "10m")]
    pin_for: String,
    /// Keep succeeded jobs (`keep_succeeded(true)`, 24 h retention) instead of deleting them.
    #[arg(long)]
    keep_succeeded: bool,
    /// Write `bench-pin.png` (or `bench-pin-keep.png`) here.
    #[arg(long)]
    chart_dir: Option<PathBuf>,
    /// Print JSON lines (every sample, then the summary).
    #[arg(long)]
    json: bool,
}

async fn run_pin(a: PinArgs, schema: String) -> anyhow::Result<()> {
    let d = |what: &'static str, v: &str| {
        docket_core::duration::parse_bounded(
            what,
            v,
            Duration::ZERO,
            Duration::from_secs(24 * 3600),
        )
        .map_err(|e| CliError::invalid(e.to_string()))
    };
    let plan = pin::PinPlan {
        rate: a.rate,
        slots: a.slots as usize,
        duration: d("--duration", &a.duration)?,
        pin_at: d("--pin-at", &a.pin_at)?,
        pin_for: d("--pin-for", &a.pin_for)?,
        keep_succeeded: a.keep_succeeded,
    };
    if plan.duration < Duration::from_secs(20) || plan.pin_at + plan.pin_for > plan.duration {
        return Err(CliError::invalid(
            "--duration must be at least 20s and cover --pin-at + --pin-for",
        )
        .into());
    }
    if let Some(d) = &a.chart_dir {
        std::fs::create_dir_all(d)?;
    }
    // A private cluster with the server's defaults, removed afterwards.
    let dir = tempfile::tempdir()?;
    let cluster = docket_localpg::LocalCluster::at(dir.path(), docket_localpg::free_port()?)?;
    cluster.init(&[])?;
    cluster.start()?;
    let ctx = Ctx {
        url: cluster.url("postgres"),
        schema,
    };
    let name = if plan.keep_succeeded {
        "bench-pin-keep.png"
    } else {
        "bench-pin.png"
    };
    let chart = a.chart_dir.as_ref().map(|d| d.join(name));
    let res = pin::pin(&ctx, &plan, chart.as_deref()).await;
    let _ = cluster.stop(docket_localpg::StopMode::Fast);
    let (r, samples) = res?;
    if a.json {
        for s in &samples {
            println!(
                "{}",
                serde_json::json!({"scenario": "pin_sample", "sample": s})
            );
        }
    }
    print(&[r], a.json)
}

async fn run(args: Args) -> anyhow::Result<()> {
    if let Command::Pin(a) = args.command {
        return run_pin(a, args.schema).await;
    }
    let url = match args.database_url {
        Some(u) if !u.trim().is_empty() => u,
        Some(_) => return Err(CliError::invalid("DATABASE_URL is set but blank").into()),
        None => docket_cli::embedded::ensure_running()?,
    };
    let ctx = Ctx {
        url,
        schema: args.schema,
    };
    match args.command {
        Command::BenchWorker(a) => docket_cli::bench::worker(&ctx, a).await,
        Command::Scale(a) => {
            let ctx = bench_ctx(&ctx, &a.synchronous_commit);
            print(&scale::scale(&ctx, &a.sizes, a.finished).await?, a.json)
        }
        Command::Churn(a) => {
            let ctx = bench_ctx(&ctx, &a.synchronous_commit);
            let duration = docket_core::duration::parse_bounded(
                "--duration",
                &a.duration,
                Duration::from_secs(10),
                Duration::from_secs(24 * 3600),
            )
            .map_err(|e| CliError::invalid(e.to_string()))?;
            if let Some(d) = &a.chart_dir {
                std::fs::create_dir_all(d)?;
            }
            let chart = a.chart_dir.as_ref().map(|d| d.join("bench-churn.png"));
            let (r, samples) = churn::churn(
                &ctx,
                duration,
                a.rate,
                a.workers,
                Duration::from_secs(60),
                chart.as_deref(),
            )
            .await?;
            if a.json {
                for s in &samples {
                    println!(
                        "{}",
                        serde_json::json!({"scenario": "churn_sample", "sample": s})
                    );
                }
            }
            print(&[r], a.json)
        }
        Command::Charts(a) => {
            let ctx = bench_ctx(&ctx, &a.synchronous_commit);
            charts(&ctx, &a).await
        }
        // Handled above, before a URL is resolved; kept whole here for the match.
        Command::Pin(a) => run_pin(a, ctx.schema).await,
        Command::ConcurrencyChart(a) => {
            let ctx = bench_ctx(&ctx, &a.synchronous_commit);
            concurrency_chart(&ctx, &a).await
        }
    }
}

fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DOCKET_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(run(args)) {
        let (code, message, hint) = docket_cli::fail::classify(&e);
        eprintln!("error: {message}");
        if let Some(h) = hint {
            eprintln!("hint: {h}");
        }
        std::process::exit(code);
    }
}
/// Throughput against concurrency and the latency distribution, as PNGs in `--chart-dir`.
pub async fn charts(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<()> {
    let dir = a.chart_dir.clone().unwrap_or_else(|| PathBuf::from("docs"));
    std::fs::create_dir_all(&dir)?;
    let floor = run_floor(
        &a.floor_script,
        &ctx.url,
        &a.synchronous_commit,
        a.jobs().max(10_000),
        4,
        100,
    )
    .map(|f| f.0)
    .ok_or_else(|| CliError::new(1, "sql-floor.sh not found or failed (see --floor-script)"))?;
    let mut points = Vec::new();
    let mut results = Vec::new();
    for c in [10usize, 25, 50, 100, 200] {
        let mut r = drain(ctx, a.jobs(), a.workers, c, a.batch.min(c.max(10))).await?;
        r.floor_jobs_per_s = Some(floor);
        r.floor_batch = Some(100);
        r.ratio = r.jobs_per_s.map(|j| j / floor);
        points.push((c, r.jobs_per_s.unwrap_or_default()));
        results.push(r);
    }
    let t = dir.join("bench-throughput.png");
    crate::chart::throughput(&t, &points, floor)?;
    let (ms, _) = latency_samples(ctx, a.samples, true).await?;
    let mut lat = latency(ctx, a.samples.min(100), false).await?;
    let l = dir.join("bench-latency.png");
    crate::chart::latency(&l, ms.clone())?;
    let (p50, p95, p99) = percentiles(ms);
    results.push(BenchResult {
        scenario: "latency".into(),
        jobs: Some(a.samples as u64),
        p50_ms: Some(p50),
        p95_ms: Some(p95),
        p99_ms: Some(p99),
        note: Some("LISTEN/NOTIFY wake-ups".into()),
        ..Default::default()
    });
    lat.note = lat.note.map(|n| format!("{n} (for comparison)"));
    results.push(lat);
    print(&results, a.json)?;
    eprintln!("charts written: {} {}", t.display(), l.display());
    Ok(())
}

/// The concurrency scenario, then its jobs/s against W at the largest N, beside the floor.
async fn concurrency_chart(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<()> {
    let results = docket_cli::bench_concurrency::concurrency(ctx, a).await?;
    print(&results, a.json)?;
    let n = results
        .iter()
        .filter_map(|r| r.jobs)
        .max()
        .unwrap_or_default();
    let points: Vec<(usize, f64)> = results
        .iter()
        .filter(|r| r.jobs == Some(n))
        .filter_map(|r| Some((r.concurrency?, r.jobs_per_s?)))
        .collect();
    let floor = results
        .iter()
        .find_map(|r| r.floor_jobs_per_s)
        .ok_or_else(|| CliError::new(1, "sql-floor.sh not found or failed (see --floor-script)"))?;
    let dir = a.chart_dir.clone().unwrap_or_else(|| PathBuf::from("docs"));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bench-concurrency.png");
    chart::throughput_titled(
        &path,
        &points,
        floor,
        &format!("One worker process, library defaults: jobs/s vs slots (N = {n})"),
    )?;
    eprintln!("chart written: {}", path.display());
    Ok(())
}
