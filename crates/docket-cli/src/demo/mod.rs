//! `docket demo`, the main job: 10,000 realistic jobs (emails) with transient and permanent
//! failures, worker processes of which one is killed mid-flight, its jobs recovered by the
//! reaper, live progress, and a closing summary. The tour is written once; what differs by
//! engine (where the demo's data lives, the provider's dedupe table, the closing checks in
//! the engine's SQL, how pickup latency is measured) is a [`DemoDb`].

use std::io::IsTerminal;
use std::process::Stdio;
use std::time::{Duration, Instant};

use docket_core::{JobState, NewJob, Store};
use docket_worker::{JobContext, JobError, Registry, Worker, WorkerConfig};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rand::Rng;
use serde_json::json;

use crate::cli::{DemoArgs, DemoWorkerArgs};
use crate::fail::CliError;

pub mod mysql;
pub mod postgres;
pub mod sqlite;

const LEASE: Duration = Duration::from_secs(3);

/// The closing counts, each read by the engine in one statement.
#[derive(Debug, Default)]
pub struct Summary {
    pub succeeded: i64,
    pub retried: i64,
    pub dead: i64,
    pub recovered: i64,
    pub deduped: i64,
    pub rerun: i64,
    /// Succeeded without a recorded send (must be 0).
    pub unsent: i64,
    /// Sends of jobs that did not succeed (must be 0).
    pub stray: i64,
}

/// What the tour needs from an engine.
pub(crate) trait DemoDb: Clone + Send + Sync + 'static {
    type Store: Store;
    /// Where the demo runs, for the header (never a password).
    fn label(&self) -> String;
    /// A fresh, migrated place of the demo's own with the provider's tables; refuses one an
    /// earlier demo did not make.
    async fn fresh(&self) -> anyhow::Result<Self::Store>;
    /// The store a worker process opens.
    async fn worker_store(&self) -> anyhow::Result<Self::Store>;
    /// This binary as a `__demo-worker` of the same place.
    fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command>;
    /// The "email provider": records the send of job `id` once (deduped on the id) and the
    /// attempt, on the handler's store.
    fn record_send(
        &self,
        store: &Self::Store,
        id: i64,
        attempt: i32,
    ) -> impl std::future::Future<Output = Result<(), JobError>> + Send;
    /// Running jobs leased to `owner`.
    async fn held(&self, store: &Self::Store, owner: &str) -> anyhow::Result<i64>;
    /// The closing counts.
    async fn summary(&self, store: &Self::Store) -> anyhow::Result<Summary>;
    /// Pickup latency p50/p95/p99 in ms, and how it was measured.
    async fn latency(&self) -> anyhow::Result<((f64, f64, f64), &'static str)>;
    /// Commands to try next.
    fn next(&self) -> Vec<String>;
}

fn worker_config(concurrency: usize, owner: String) -> WorkerConfig {
    let mut cfg = WorkerConfig::default()
        .queue("email", concurrency)
        .lease(LEASE);
    cfg.owner = owner;
    cfg.poll_interval = Duration::from_millis(500);
    cfg.reap_interval = Duration::from_millis(250);
    cfg.claim_batch = 50;
    // The demo audits every success against the provider's sends, so it keeps the rows.
    cfg.keep_succeeded = true;
    cfg
}

/// The demo's email handler: an "email provider" that dedupes on the job id, so a job that
/// runs twice (a worker died after sending, before completing) never sends twice. Every
/// value from the job is bound.
async fn send_email<D: DemoDb>(
    db: D,
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
    let store: D::Store = ctx
        .store()
        .ok_or_else(|| JobError::discard("the demo worker runs on its own store"))?;
    db.record_send(&store, ctx.id.0, ctx.attempt).await
}

/// The hidden `__demo-worker` process.
pub async fn worker<D: DemoDb>(db: &D, a: DemoWorkerArgs) -> anyhow::Result<()> {
    let store = db.worker_store().await?;
    let mut reg = Registry::default();
    let d = db.clone();
    reg.register_fn("send_email", move |args, jctx| {
        send_email(d.clone(), args, jctx)
    });
    let w = Worker::new(store, reg, worker_config(a.concurrency, a.owner))?;
    w.run(crate::shutdown_with_parent()).await?;
    Ok(())
}

async fn counts<S: Store>(store: &S) -> anyhow::Result<[i64; 5]> {
    let s = store.stats().await?;
    let mut c = [0i64; 5];
    for q in s.queues.iter().filter(|q| q.queue == "email") {
        c = [q.pending, q.running, q.succeeded, q.dead, q.cancelled];
    }
    Ok(c)
}

pub async fn run<D: DemoDb>(db: &D, a: DemoArgs) -> anyhow::Result<()> {
    if a.jobs == 0 || a.jobs > 1_000_000 || a.workers < 2 || a.workers > 16 {
        return Err(CliError::invalid("--jobs must be 1..=1000000 and --workers 2..=16").into());
    }
    let started = Instant::now();
    // A fresh place each run (only ever one an earlier demo made).
    let store = db.fresh().await?;
    println!("Docket demo — {}", db.label());

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
        Ok(db
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
            let held = db.held(&store, &victim_owner).await?;
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

    let ((p50, p95, p99), how) = db.latency().await?;
    let sum = db.summary(&store).await?;
    let (unsent, stray) = (sum.unsent, sum.stray);
    println!();
    println!("summary");
    println!("  succeeded          {:>7}", sum.succeeded);
    println!(
        "  retried, then ok   {:>7}  (transient failures, backoff)",
        sum.retried
    );
    println!(
        "  dead               {:>7}  (permanent failures, kept with their error history)",
        sum.dead
    );
    println!(
        "  recovered leases   {:>7}  (jobs of the killed worker, requeued by the reaper)",
        sum.recovered
    );
    println!(
        "  jobs run twice     {:>7}  (at-least-once: a crash or a lost lease re-runs a job)",
        sum.rerun
    );
    println!(
        "  re-runs deduped    {:>7}  (the provider saw the job id again and did not resend)",
        sum.deduped
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
    println!("  pickup latency     p50 {p50:.1} ms · p95 {p95:.1} ms · p99 {p99:.1} ms  ({how})");
    println!(
        "  total time         {:.1}s",
        started.elapsed().as_secs_f64()
    );
    println!();
    println!("next:");
    for n in db.next() {
        println!("  {n}");
    }
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

/// Enqueue-to-start times (ms) of `samples` jobs, one at a time, picked up by an idle worker
/// in this process.
pub(crate) async fn in_process_latency<S: Store>(
    store: S,
    samples: usize,
) -> anyhow::Result<Vec<f64>> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut reg = docket_worker::Registry::default();
    reg.register_fn("ping", move |_a, _c| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Instant::now());
            Ok(())
        }
    });
    let mut cfg = docket_worker::WorkerConfig::default().queue("latency", 4);
    cfg.maintenance = false;
    let w = std::sync::Arc::new(docket_worker::Worker::new(store.clone(), reg, cfg)?);
    let shutdown = docket_worker::Shutdown::default();
    let (w2, s2) = (w.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w2.run(s2).await });
    // Start measuring once the worker listens and a claim came back (idle).
    tokio::time::timeout(Duration::from_secs(30), w.ready())
        .await
        .map_err(|_| anyhow::anyhow!("the latency worker did not start within 30 s"))?;
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        store
            .enqueue(&NewJob::new("latency", "ping", serde_json::json!({})))
            .await?;
        let ran = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .map_err(|_| anyhow::anyhow!("a latency job was not picked up within 10 s"))?
            .ok_or_else(|| anyhow::anyhow!("the latency worker stopped"))?;
        out.push(ran.duration_since(t).as_secs_f64() * 1000.0);
        // Idle between jobs on purpose: each sample is a pickup by an idle worker.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.graceful.cancel();
    let _ = task.await;
    Ok(out)
}
