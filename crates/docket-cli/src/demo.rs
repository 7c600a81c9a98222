//! `docket demo`, the main job: 10,000 realistic jobs (emails) with transient and permanent
//! failures, worker processes of which one is killed mid-flight, its jobs recovered by the
//! reaper, live progress, and a closing summary.

use std::io::IsTerminal;
use std::process::Stdio;
use std::time::{Duration, Instant};

use docket_core::{JobState, NewJob, Store};
use docket_worker::{JobContext, JobError, Registry, Worker, WorkerConfig};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rand::Rng;
use serde_json::json;
use sqlx::Row;

use crate::cli::{DemoArgs, DemoWorkerArgs};
use crate::fail::CliError;
use crate::Ctx;

const LEASE: Duration = Duration::from_secs(3);

fn demo_ctx(ctx: &Ctx) -> Ctx {
    Ctx {
        url: ctx.url.clone(),
        schema: if ctx.schema.ends_with("_demo") {
            ctx.schema.clone()
        } else {
            format!("{}_demo", ctx.schema)
        },
    }
}

fn worker_config(concurrency: usize, owner: String) -> WorkerConfig {
    let mut cfg = WorkerConfig::default()
        .queue("email", concurrency)
        .lease(LEASE);
    cfg.owner = owner;
    cfg.poll_interval = Duration::from_millis(500);
    cfg.reap_interval = Duration::from_millis(250);
    cfg.claim_batch = 50;
    cfg
}

/// The demo's email handler: an "email provider" that dedupes on the job id, so a job that
/// runs twice (a worker died after sending, before completing) never sends twice. Every
/// value from the job is bound; the schema is the worker's own (validated), never job data.
async fn send_email(
    schema: std::sync::Arc<str>,
    args: serde_json::Value,
    ctx: JobContext,
) -> Result<(), JobError> {
    match args["fail"].as_str() {
        Some("permanent") => return Err(JobError::discard("550 5.1.1 mailbox does not exist")),
        Some("transient") if ctx.attempt == 1 => {
            return Err(JobError::retry_in(
                "421 4.7.0 try again later",
                Duration::from_millis(300),
            ))
        }
        _ => {}
    }
    let ms = rand::thread_rng().gen_range(1..6);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let store: docket_postgres::PgStore = ctx
        .store()
        .ok_or_else(|| JobError::discard("the demo runs on PostgreSQL"))?;
    let pool = store.pool();
    let sent: Option<i64> = sqlx::query_scalar(&format!(
        "INSERT INTO {schema}.demo_sends (job_id) VALUES ($1) ON CONFLICT (job_id) DO NOTHING RETURNING job_id"
    ))
    .bind(ctx.id.0)
    .fetch_optional(pool)
    .await?;
    sqlx::query(&format!(
        "INSERT INTO {schema}.demo_attempts (job_id, attempt, deduped) VALUES ($1, $2, $3)"
    ))
    .bind(ctx.id.0)
    .bind(ctx.attempt)
    .bind(sent.is_none())
    .execute(pool)
    .await?;
    Ok(())
}

/// The hidden `__demo-worker` process.
pub async fn worker(ctx: &Ctx, a: DemoWorkerArgs) -> anyhow::Result<()> {
    let store = ctx.connect(8).await?;
    let mut reg = Registry::default();
    docket_core::validate::schema(&ctx.schema).map_err(|e| CliError::invalid(e.to_string()))?;
    let schema: std::sync::Arc<str> = ctx.schema.as_str().into();
    reg.register_fn("send_email", move |args, jctx| {
        send_email(schema.clone(), args, jctx)
    });
    let w = Worker::new(store, reg, worker_config(a.concurrency, a.owner))?;
    w.run(crate::shutdown_with_parent()).await?;
    Ok(())
}

async fn counts(store: &docket_postgres::PgStore) -> anyhow::Result<[i64; 5]> {
    let s = store.stats().await?;
    let mut c = [0i64; 5];
    for q in s.queues.iter().filter(|q| q.queue == "email") {
        c = [q.pending, q.running, q.succeeded, q.dead, q.cancelled];
    }
    Ok(c)
}

pub async fn run(ctx: &Ctx, a: DemoArgs) -> anyhow::Result<()> {
    if a.jobs == 0 || a.jobs > 1_000_000 || a.workers < 2 || a.workers > 16 {
        return Err(CliError::invalid("--jobs must be 1..=1000000 and --workers 2..=16").into());
    }
    let ctx = demo_ctx(ctx);
    let started = Instant::now();
    // A fresh schema each run (only ever one an earlier demo made).
    let store = crate::scratch::fresh(&ctx, "demo", 4).await?;
    sqlx::raw_sql(&format!(
        "CREATE TABLE {s}.demo_sends (job_id bigint PRIMARY KEY);
         CREATE TABLE {s}.demo_attempts (job_id bigint, attempt int, deduped bool);",
        s = ctx.schema
    ))
    .execute(store.pool())
    .await?;
    println!(
        "Docket demo — schema {} on {}",
        ctx.schema,
        crate::fail::redact(&ctx.url)
    );

    let mut rng = rand::thread_rng();
    let jobs: Vec<NewJob> = (0..a.jobs)
        .map(|n| {
            let r: f64 = rng.gen();
            let fail = if r < 0.02 {
                Some("permanent")
            } else if r < 0.10 {
                Some("transient")
            } else {
                None
            };
            NewJob::new(
                "email",
                "send_email",
                json!({"to": format!("user{n}@example.com"), "template": "welcome", "fail": fail}),
            )
        })
        .collect();
    let t = Instant::now();
    for chunk in jobs.chunks(10_000) {
        store.enqueue_many(chunk).await?;
    }
    println!(
        "enqueued {} email jobs in {:.0} ms (≈8% fail once, ≈2% are permanently undeliverable)",
        a.jobs,
        t.elapsed().as_secs_f64() * 1000.0
    );

    // Worker processes: real processes, so one can really be killed.
    let run_id: u32 = rng.gen();
    let spawn = |i: u32| -> anyhow::Result<std::process::Child> {
        Ok(ctx
            .child("__demo-worker")?
            .args([
                "--concurrency",
                "20",
                "--owner",
                &format!("demo-worker-{i}-{run_id:08x}"),
            ])
            .stderr(Stdio::null())
            .spawn()?)
    };
    let mut children = Vec::new();
    for i in 1..=a.workers {
        children.push(spawn(i)?);
    }
    println!(
        "started {} worker processes (lease {}s)",
        a.workers,
        LEASE.as_secs()
    );

    let mp = if std::io::stderr().is_terminal() {
        MultiProgress::new()
    } else {
        MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
    };
    let style =
        ProgressStyle::with_template("{prefix:>10} {bar:40} {pos:>6}/{len}").expect("template");
    let bars: Vec<ProgressBar> = JobState::ALL
        .iter()
        .map(|s| {
            let b = mp.add(ProgressBar::new(a.jobs as u64));
            b.set_style(style.clone());
            b.set_prefix(s.as_str());
            b
        })
        .collect();
    let drain_started = Instant::now();
    let victim_owner = format!("demo-worker-1-{run_id:08x}");
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = counts(&store).await?;
        for (b, v) in bars.iter().zip(c) {
            b.set_position(v as u64);
        }
        let done = c[2] + c[3] + c[4];
        if !killed && done >= i64::from(a.jobs) * 3 / 10 {
            let held: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM {}.jobs WHERE state = 'running' AND lease_owner = $1",
                ctx.schema
            ))
            .bind(&victim_owner)
            .fetch_one(store.pool())
            .await?;
            children[0].kill()?; // SIGKILL: no shutdown, no release, leases left behind
            let _ = children[0].wait();
            killed = true;
            let msg = format!(
                "killed worker 1 (SIGKILL) holding {held} running job(s); their leases expire in ≤{}s and the reaper requeues them",
                LEASE.as_secs()
            );
            mp.suspend(|| println!("{msg}"));
        }
        if done >= i64::from(a.jobs) {
            break;
        }
        if Instant::now() > deadline {
            return Err(CliError::new(1, "demo did not finish within 2 minutes").into());
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let drain = drain_started.elapsed();
    for b in &bars {
        b.finish();
    }
    crate::stop_children(&mut children[1..]);

    // Pickup latency, measured like `docket bench --scenario latency`, in a schema of its own.
    let latency_ctx = Ctx {
        url: ctx.url.clone(),
        schema: format!("{}_latency", ctx.schema),
    };
    let (ms, _) = crate::bench::latency_samples(&latency_ctx, 60, true).await?;
    let (p50, p95, p99) = crate::bench::percentiles(ms);
    let row = sqlx::query(&format!(
        "SELECT
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'succeeded' AND jsonb_array_length(errors) > 0) AS retried,
           count(*) FILTER (WHERE state = 'dead') AS dead,
           count(*) FILTER (WHERE errors @> '[{{\"class\": \"lease_expired\"}}]') AS recovered,
           (SELECT count(*) FROM {s}.demo_attempts WHERE deduped) AS deduped,
           (SELECT count(*) FROM (SELECT job_id FROM {s}.demo_attempts GROUP BY job_id
                                  HAVING count(*) > 1) r) AS rerun,
           -- The checks that can fail. The provider dedupes on the job id, so sending twice is
           -- impossible by construction; what the queue must get right is that every job it
           -- marked succeeded was really sent (a completion accepted without its handler's
           -- effect), and that nothing was sent for a job it did not finish.
           count(*) FILTER (WHERE state = 'succeeded'
                            AND NOT EXISTS (SELECT 1 FROM {s}.demo_sends d WHERE d.job_id = jobs.id))
             AS unsent,
           (SELECT count(*) FROM {s}.demo_sends d
            WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = d.job_id AND j.state = 'succeeded'))
             AS stray
         FROM {s}.jobs WHERE queue = 'email'",
        s = ctx.schema
    ))
    .fetch_one(store.pool())
    .await?;
    let g = |c: &str| row.try_get::<i64, _>(c).unwrap_or(-1);
    let (unsent, stray) = (g("unsent"), g("stray"));
    println!();
    println!("summary");
    println!("  succeeded          {:>7}", g("succeeded"));
    println!(
        "  retried, then ok   {:>7}  (transient failures, backoff)",
        g("retried")
    );
    println!(
        "  dead               {:>7}  (permanent failures, kept with their error history)",
        g("dead")
    );
    println!(
        "  recovered leases   {:>7}  (jobs of the killed worker, requeued by the reaper)",
        g("recovered")
    );
    println!(
        "  jobs run twice     {:>7}  (at-least-once: a crash or a lost lease re-runs a job)",
        g("rerun")
    );
    println!(
        "  re-runs deduped    {:>7}  (the provider saw the job id again and did not resend)",
        g("deduped")
    );
    println!("  succeeded, unsent  {:>7}  (must be 0)", unsent);
    println!("  sent, not finished {:>7}  (must be 0)", stray);
    println!(
        "  throughput         {:>7.0} jobs/s  ({} jobs in {:.1}s, {} workers, including the crash)",
        f64::from(a.jobs) / drain.as_secs_f64(),
        a.jobs,
        drain.as_secs_f64(),
        a.workers
    );
    println!("  pickup latency     p50 {p50:.1} ms · p95 {p95:.1} ms · p99 {p99:.1} ms  (idle worker, LISTEN/NOTIFY)");
    println!(
        "  total time         {:.1}s",
        started.elapsed().as_secs_f64()
    );
    println!();
    println!("next:");
    println!("  docket stats --schema {}", ctx.schema);
    println!("  docket jobs list --schema {} --state dead", ctx.schema);
    println!("  docket jobs show <id> --schema {}", ctx.schema);
    println!("  docket lab naive    # why a queue needs SKIP LOCKED and leases");
    if unsent != 0 || stray != 0 {
        return Err(CliError::new(
            1,
            format!(
                "{unsent} succeeded jobs were never sent, {stray} sends belong to unfinished jobs"
            ),
        )
        .into());
    }
    Ok(())
}
