//! `docket bench`: Docket measured against the SQL floor of this machine, in the same run.
//!
//! Every throughput is printed next to `shared/bench/sql-floor.sh` (the pgbench floor for a
//! lease-based SKIP LOCKED queue) run in the same invocation on the same server, as a ratio.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docket_core::{NewJob, Store};
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};
use serde::Serialize;
use serde_json::json;

use crate::cli::{BenchArgs, BenchWorkerArgs};
use crate::fail::CliError;
use crate::Ctx;

/// One scenario's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchResult {
    /// The scenario (and the variant measured).
    pub scenario: String,
    /// Jobs it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u64>,
    /// Worker processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Run slots per process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Claim and completion batch size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Wall time of the measured part, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Rate: jobs per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_per_s: Option<f64>,
    /// The floor's rate in the same run (the raw SQL loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_jobs_per_s: Option<f64>,
    /// The rate as a share of the floor (or the ratio the note names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The floor's batch size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_batch: Option<usize>,
    /// Median latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 95th percentile latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// 99th percentile latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// What the numbers mean and how they were taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Scenario-specific numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
}

/// The bench's own schema, and every connection (Docket's and the floor's) with the same
/// `synchronous_commit`, so the ratio compares like with like whatever the server's default.
pub fn bench_ctx(ctx: &Ctx, synchronous_commit: &str) -> Ctx {
    let sep = if ctx.url.contains('?') { '&' } else { '?' };
    Ctx {
        url: format!(
            "{}{sep}options=-c%20synchronous_commit%3D{synchronous_commit}",
            ctx.url
        ),
        schema: format!("{}_bench", ctx.schema),
    }
}

/// A fresh bench schema on `ctx`'s server, migrated, with a pool of `conns`.
pub async fn fresh_store(ctx: &Ctx, conns: u32) -> anyhow::Result<docket_postgres::PgStore> {
    crate::scratch::fresh(ctx, "bench", conns).await
}

/// Finds `shared/bench/sql-floor.sh` beside the project (or `--floor-script`).
fn floor_script(explicit: &Option<PathBuf>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.clone());
    }
    let mut dir = std::env::current_dir().ok()?;
    for _ in 0..4 {
        let p = dir.join("../shared/bench/sql-floor.sh");
        if p.is_file() {
            return std::fs::canonicalize(p).ok();
        }
        dir = dir.parent()?.to_path_buf();
    }
    None
}

/// Runs the SQL floor: (jobs/s, the JSON it printed).
pub fn run_floor(
    script: &Option<PathBuf>,
    url: &str,
    synchronous_commit: &str,
    n: u64,
    clients: u32,
    batch: usize,
) -> Option<(f64, serde_json::Value)> {
    let script = floor_script(script)?;
    // The script drops and re-creates one scratch database (docket_sql_floor) on the server:
    // two floors at once on one server (two benches, or two tests) destroy each other's run.
    // They take turns through a lock file named after the server, held for the run (the
    // floor's pgbench runs on this machine, so this machine's lock is the one that matters).
    let _turn = floor_turn(url);
    // The script hands its URL to psql and pgbench on their command lines, where `ps` shows
    // it to every user: give it the URL without the password, and the password through
    // libpq's PGPASSWORD instead.
    let base = url.split('?').next().unwrap_or(url);
    let password = docket_postgres::connect::parse(base)
        .ok()
        .and_then(|t| t.password().map(str::to_string));
    let mut cmd = std::process::Command::new("bash");
    if let Some(p) = &password {
        cmd.env("PGPASSWORD", p);
    }
    let out = cmd
        .arg(&script)
        .args([n.to_string(), clients.to_string(), batch.to_string()])
        .env("DATABASE_URL", without_password(base))
        .env(
            "PGOPTIONS",
            format!("-c synchronous_commit={synchronous_commit}"),
        )
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.lines().last()?).ok()?;
    Some((v["jobs_per_s"].as_f64()?, v))
}

/// The longest wait for another floor's turn: a floor run takes seconds to a few minutes, so
/// a lock held longer is a stuck run or another user's file, and the floor goes ahead.
const FLOOR_TURN_WAIT: Duration = Duration::from_secs(600);

/// An exclusive lock on `<temp>/docket-sql-floor-<server>.lock`, waited for up to
/// [`FLOOR_TURN_WAIT`] with a message; `None` when the file cannot be opened or the wait
/// ran out (the floor then runs unguarded, as before, and says so).
fn floor_turn(url: &str) -> Option<std::fs::File> {
    use std::hash::{Hash, Hasher};
    let server = docket_postgres::connect::parse(url.split('?').next().unwrap_or(url))
        .map(|t| format!("{}:{}", t.options.get_host(), t.options.get_port()))
        .unwrap_or_else(|_| url.to_string());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    server.hash(&mut h);
    let path = std::env::temp_dir().join(format!("docket-sql-floor-{:016x}.lock", h.finish()));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ok()?;
    let deadline = std::time::Instant::now() + FLOOR_TURN_WAIT;
    let mut told = false;
    loop {
        match f.try_lock() {
            Ok(()) => return Some(f),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                if !told {
                    eprintln!(
                        "bench: another SQL floor is running on this server; waiting for its turn ({})",
                        path.display()
                    );
                    told = true;
                }
                // Polled: flock has no wait with a time-out, and a blocked lock() could not
                // be abandoned.
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(_) => {
                eprintln!(
                    "bench: no turn for the SQL floor ({}); running it unguarded",
                    path.display()
                );
                return None;
            }
        }
    }
}

/// `scheme://user:password@host/db` → `scheme://user@host/db`.
fn without_password(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => {
            let userinfo = &url[start..start + at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..start], &url[start + at..])
        }
        None => url.to_string(),
    }
}

/// This process's peak resident set (VmHWM, KiB) from /proc/self/status; `None` off Linux.
/// Read by hand: one line of a procfs file; the crates that report memory give the current
/// RSS, not the peak, and the target (≤ 50 MB at W = 200) is about the peak.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The fields of `/proc/<pid>/stat` from the fourth on (`man 5 proc`; read after the command
/// name, which may hold spaces, and the state): index i is field i + 4 — ppid 0, utime 10,
/// stime 11, cutime 12, cstime 13, times in USER_HZ ticks of 10 ms. `None` where there is no
/// such process (or no `/proc`).
pub(crate) fn proc_stat(pid: &str) -> Option<Vec<i64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// CPU this process has used so far (user + system), in ticks of 10 ms.
pub fn cpu_ticks() -> Option<u64> {
    let f = proc_stat("self")?;
    u64::try_from(f.get(10)? + f.get(11)?).ok()
}

/// Sleeps `d` with a nanosecond deadline: a timerfd registered with tokio's reactor.
#[cfg(target_os = "linux")]
async fn precise_sleep(d: Duration) -> std::io::Result<()> {
    tokio_timerfd::sleep(d).await
}

/// Sleeps `d` on a blocking-pool thread (nanosleep) where there is no timerfd.
#[cfg(not(target_os = "linux"))]
async fn precise_sleep(d: Duration) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || std::thread::sleep(d))
        .await
        .map_err(std::io::Error::other)
}

/// The hidden bench worker process: no-op jobs, nothing else.
pub async fn worker(ctx: &Ctx, a: BenchWorkerArgs) -> anyhow::Result<()> {
    // What a user's process pays before its first job counts too (issue 31's "from
    // `Worker::new`"): the pool's connections, the schema check, the registry, the election
    // and LISTEN all come after this instant. The wall clock, not `Instant`: the scenario
    // compares it with the database's timestamp of the last completion (same machine).
    let started_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let store = ctx.connect(a.connections).await?;
    let mut reg = Registry::default();
    let sleep = Duration::from_millis(a.sleep_ms);
    // What the handlers really took, reported next to the nominal ideal. The sleep is a
    // timerfd on Linux, not `tokio::time::sleep`: tokio's timer wheel has 1 ms ticks and a
    // sleep ends at the first tick at or after its deadline, so a "5 ms" tokio sleep
    // measured 6.5 ms on average here and the mixed scenario's ideal (stated for 5 ms
    // handlers) was out of reach for a queue with no overhead at all.
    let handler_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = handler_ns.clone();
    let (steps, output) = (a.steps, "x".repeat(a.output_bytes.min(16 << 20)));
    reg.register_fn("noop", move |_a, c: docket_worker::JobContext| {
        let total = total.clone();
        let output = output.clone();
        async move {
            for i in 0..steps {
                c.step(&format!("s{i}"), || async move { Ok(i) }).await?;
            }
            if !output.is_empty() {
                c.set_output(&output)?;
            }
            if !sleep.is_zero() {
                // The job's work itself (mixed scenario), not a wait for anything.
                let t = std::time::Instant::now();
                precise_sleep(sleep).await?;
                let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                total.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(())
        }
    });
    reg.register_fn("real", |args: serde_json::Value, _c| async move {
        let ms = args["ms"].as_u64().unwrap_or(0).min(60_000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    });
    let mut cfg = WorkerConfig::default().queue("bench", a.concurrency);
    if a.output_bytes > 0 {
        cfg = cfg.max_output_bytes(a.output_bytes + 64);
    }
    if a.real_handlers || a.keep_succeeded {
        cfg = cfg.keep_succeeded(true);
    }
    if a.defaults {
        let w = Worker::new(store, reg, cfg)?;
        let r = w.drain(crate::shutdown_with_parent()).await?;
        eprintln!("bench worker: {}", serde_json::to_string(&r.metrics)?);
        if a.print_handler_time {
            println!(
                "{} {} {started_us} {}",
                handler_ns.load(std::sync::atomic::Ordering::Relaxed),
                peak_rss_kib().unwrap_or(0),
                cpu_ticks().unwrap_or(0)
            );
        }
        return Ok(());
    }
    cfg.claim_batch = a.batch;
    // Maintenance (leader, reaper, pruner) only for the churn scenario, which prunes.
    cfg.maintenance = a.retention_s.is_some();
    if let Some(r) = a.retention_s {
        cfg.retention.finished = Duration::from_secs(r);
        cfg.prune_interval = Duration::from_secs(10);
    }
    if a.drain {
        // The drain scenario's end is the workers' own drain check (see `drain`); an idle
        // fetcher re-polls this often, so the last worker notices the end within ~50 ms.
        // While jobs are claimed the poll never fires (full claims are repeated at once).
        cfg.poll_interval = Duration::from_millis(50);
    }
    let w = Worker::new(store, reg, cfg)?;
    let r = if a.drain {
        w.drain(crate::shutdown_with_parent()).await?
    } else {
        w.run(crate::shutdown_with_parent()).await?
    };
    eprintln!("bench worker: {}", serde_json::to_string(&r.metrics)?);
    Ok(())
}

/// Starts `n` bench worker processes (`retention`: run maintenance and prune, for churn;
/// without it they drain the queue and exit).
pub fn spawn_workers(
    ctx: &Ctx,
    n: u32,
    concurrency: usize,
    batch: usize,
    retention: Option<Duration>,
) -> anyhow::Result<Vec<std::process::Child>> {
    let conns = ((concurrency / 10).clamp(2, 8) + 3).to_string();
    let mut children = Vec::new();
    for _ in 0..n {
        let mut c = ctx.child("__bench-worker")?;
        c.args(["--concurrency", &concurrency.to_string()]).args([
            "--batch",
            &batch.to_string(),
            "--connections",
            &conns,
        ]);
        match retention {
            Some(r) => c.args(["--retention-s", &r.as_secs().to_string()]),
            None => c.arg("--drain"),
        };
        children.push(c.spawn()?);
    }
    Ok(children)
}

/// Waits for every drain worker to exit (each exits when nothing of the queue is ready or
/// running anywhere). The end used to be found by polling `any_active` from here every
/// 20 ms; each poll walked the dead index entries a drain leaves behind (2.7 ms mean,
/// measured with pg_stat_statements), about a tenth of a core taken from the drain itself.
pub async fn wait_exited(children: &mut [std::process::Child]) -> anyhow::Result<()> {
    let mut running: Vec<usize> = (0..children.len()).collect();
    while !running.is_empty() {
        let mut still = Vec::new();
        for i in running {
            match children[i].try_wait()? {
                Some(st) if st.success() => {}
                Some(st) => {
                    return Err(CliError::new(1, format!("a bench worker failed: {st}")).into())
                }
                None => still.push(i),
            }
        }
        running = still;
        // Polling process status, not standing in for a signal: `std::process::Child` has no
        // async wait, and a worker that fails must end the wait at once rather than after the
        // others (which would wait for its jobs' leases forever: the bench runs no reaper).
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// A fresh bench schema holding `n` no-op jobs, vacuumed: the start of every drain. The jobs
/// are streamed in (`enqueue_iter`), not built all at once.
pub async fn load_drain(ctx: &Ctx, n: u64) -> anyhow::Result<docket_postgres::PgStore> {
    let store = fresh_store(ctx, 4).await?;
    store
        .enqueue_iter((0..n).map(|i| NewJob::new("bench", "noop", json!({ "n": i }))))
        .await?;
    sqlx::query(&format!("VACUUM ANALYZE {}.jobs", ctx.schema))
        .execute(store.pool())
        .await?;
    mark_statements(ctx, &store).await?;
    Ok(store)
}

/// The drain's clock and count on the database, for workers that delete the jobs they
/// complete (the library's default, which leaves no row to count and no `finished_at` to time
/// by): statement-level triggers on the bench schema's `jobs` record the first UPDATE (a
/// claim) and the last DELETE (a completion) in two sequences — `setval` is not transactional
/// and takes no row lock, so concurrent statements never wait for each other here — and each
/// completing statement adds how many jobs it deleted and their highest attempt to
/// `bench_done`, from its transition table. About one call per ~100 jobs; the deleted rows'
/// copy into the transition table is a cost the drain pays here and a user's would not. Not
/// part of Docket's schema.
async fn mark_statements(ctx: &Ctx, store: &docket_postgres::PgStore) -> anyhow::Result<()> {
    let s = &ctx.schema;
    for q in [
        format!("CREATE SEQUENCE {s}.bench_first MINVALUE 0"),
        format!("CREATE SEQUENCE {s}.bench_last MINVALUE 0"),
        format!("CREATE TABLE {s}.bench_done (n bigint NOT NULL, max_attempt int)"),
        format!(
            "CREATE FUNCTION {s}.bench_first() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
               IF NOT (SELECT is_called FROM {s}.bench_first) THEN
                 PERFORM setval('{s}.bench_first', (extract(epoch FROM clock_timestamp()) * 1e6)::bigint);
               END IF;
               RETURN NULL;
             END$$"
        ),
        format!(
            "CREATE FUNCTION {s}.bench_last() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
               INSERT INTO {s}.bench_done SELECT count(*), max(attempt) FROM gone;
               PERFORM setval('{s}.bench_last', (extract(epoch FROM clock_timestamp()) * 1e6)::bigint);
               RETURN NULL;
             END$$"
        ),
        format!("CREATE TRIGGER bench_first AFTER UPDATE ON {s}.jobs FOR EACH STATEMENT EXECUTE FUNCTION {s}.bench_first()"),
        format!("CREATE TRIGGER bench_last AFTER DELETE ON {s}.jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {s}.bench_last()"),
    ] {
        sqlx::query(&q).execute(store.pool()).await?;
    }
    Ok(())
}

/// Checks that every one of the `n` jobs was completed exactly once, on its first claim: by
/// deleting statements that deleted `n` rows of attempt 1 in all (workers that delete what
/// succeeds, the default; a failure would leave its row), or as `n` rows succeeded at attempt 1. Returns the
/// database's own duration of the drain, first claim to last completion, in seconds.
pub async fn verify_drained(
    ctx: &Ctx,
    store: &docket_postgres::PgStore,
    n: u64,
) -> anyhow::Result<Option<f64>> {
    let s = &ctx.schema;
    let (left, done, max_attempt, secs): (i64, i64, i32, Option<f64>) = sqlx::query_as(&format!(
        "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'), coalesce(max(attempt), 0),
                extract(epoch FROM max(finished_at) - min(attempted_at))::float8
         FROM {s}.jobs_all"
    ))
    .fetch_one(store.pool())
    .await?;
    if left == 0 && n > 0 {
        let (deleted, max_attempt, first, last): (i64, i32, i64, i64) = sqlx::query_as(&format!(
            "SELECT coalesce(sum(n), 0)::bigint, coalesce(max(max_attempt), 0),
                    (SELECT last_value FROM {s}.bench_first), (SELECT last_value FROM {s}.bench_last)
             FROM {s}.bench_done"
        ))
        .fetch_one(store.pool())
        .await?;
        if deleted as u64 != n || max_attempt != 1 {
            return Err(CliError::new(
                1,
                format!(
                    "drain verification failed: {deleted} of {n} completed (deleted), max attempt {max_attempt}"
                ),
            )
            .into());
        }
        return Ok((last > first).then(|| (last - first) as f64 / 1e6));
    }
    if done as u64 != n || max_attempt != 1 {
        return Err(CliError::new(
            1,
            format!(
                "drain verification failed: {done} of {n} succeeded ({left} rows left), max attempt {max_attempt}"
            ),
        )
        .into());
    }
    Ok(secs)
}

/// Drain: N no-op jobs, W worker processes × C concurrency.
pub async fn drain(
    ctx: &Ctx,
    n: u64,
    workers: u32,
    concurrency: usize,
    batch: usize,
) -> anyhow::Result<BenchResult> {
    let store = load_drain(ctx, n).await?;
    let started = Instant::now();
    let mut children = spawn_workers(ctx, workers, concurrency, batch, None)?;
    let waited = wait_exited(&mut children).await;
    let wall = started.elapsed().as_secs_f64();
    crate::stop_children(&mut children);
    waited?;
    // The database's span, first claim to last completion, as the concurrency scenario
    // measures; the wall time (process starts and the workers' drain check included) is
    // reported beside it.
    let secs = verify_drained(ctx, &store, n).await?.unwrap_or(wall);
    Ok(BenchResult {
        scenario: "drain".into(),
        jobs: Some(n),
        workers: Some(workers),
        concurrency: Some(concurrency),
        batch: Some(batch),
        seconds: Some(secs),
        jobs_per_s: Some(n as f64 / secs),
        note: Some(format!(
            "database time, first claim to last completion (wall {wall:.2} s); each job \
             verified completed once, at attempt 1 (row deleted, the default)"
        )),
        extra: Some(json!({ "wall_seconds": wall })),
        ..Default::default()
    })
}

/// Enqueue: single-job round trips with P producers, and bulk.
pub async fn enqueue(ctx: &Ctx, n: u64, producers: u32) -> anyhow::Result<Vec<BenchResult>> {
    let store = fresh_store(ctx, producers + 2).await?;
    let per = (n / 10).max(1000) / u64::from(producers);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..producers {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                s.enqueue(&NewJob::new("bench", "noop", json!({ "i": i })))
                    .await?;
            }
            Ok::<_, docket_core::StoreError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let single_secs = started.elapsed().as_secs_f64();
    let single_n = per * u64::from(producers);
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new("bench", "noop", json!({ "n": i })))
        .collect();
    let started = Instant::now();
    for chunk in jobs.chunks(10_000) {
        store.enqueue_many(chunk).await?;
    }
    let bulk_secs = started.elapsed().as_secs_f64();
    // Two producers streaming chunks side by side: the server's insert work on both cores.
    let jobs = std::sync::Arc::new(jobs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for half in 0..2 {
        let (s, jobs) = (store.clone(), jobs.clone());
        tasks.push(tokio::spawn(async move {
            for chunk in jobs.chunks(10_000).skip(half).step_by(2) {
                s.enqueue_many(chunk).await?;
            }
            Ok::<_, docket_core::StoreError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let parallel_secs = started.elapsed().as_secs_f64();
    Ok(vec![
        BenchResult {
            scenario: "enqueue_single".into(),
            jobs: Some(single_n),
            workers: Some(producers),
            seconds: Some(single_secs),
            jobs_per_s: Some(single_n as f64 / single_secs),
            note: Some(format!("{producers} producers, one job per transaction")),
            ..Default::default()
        },
        BenchResult {
            scenario: "enqueue_bulk".into(),
            jobs: Some(n),
            batch: Some(10_000),
            seconds: Some(bulk_secs),
            jobs_per_s: Some(n as f64 / bulk_secs),
            note: Some("enqueue_many, 10,000 jobs per call (the COPY path), one producer".into()),
            ..Default::default()
        },
        BenchResult {
            scenario: "enqueue_bulk_2".into(),
            jobs: Some(n),
            batch: Some(10_000),
            workers: Some(2),
            seconds: Some(parallel_secs),
            jobs_per_s: Some(n as f64 / parallel_secs),
            note: Some("enqueue_many, 10,000 jobs per call, two producers".into()),
            ..Default::default()
        },
    ])
}

/// The 50th, 95th and 99th percentiles of `v` (the sample at the rounded rank).
pub fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.95), p(0.99))
}

/// Pickup latency: idle workers, jobs enqueued one at a time; from the enqueue's commit
/// (returned to the producer) to the handler's start, both on this process's clock.
pub async fn latency(ctx: &Ctx, samples: usize, listen: bool) -> anyhow::Result<BenchResult> {
    let (ms, poll) = latency_samples(ctx, samples, listen).await?;
    let (p50, p95, p99) = percentiles(ms);
    Ok(BenchResult {
        scenario: if listen { "latency" } else { "latency_polling" }.into(),
        jobs: Some(samples as u64),
        p50_ms: Some(p50),
        p95_ms: Some(p95),
        p99_ms: Some(p99),
        note: Some(if listen {
            "LISTEN/NOTIFY wake-ups".to_string()
        } else {
            format!(
                "polling only, every {} ±20 %",
                humantime::format_duration(poll)
            )
        }),
        ..Default::default()
    })
}

/// Raw pickup latencies in ms, and the poll interval in force.
pub async fn latency_samples(
    ctx: &Ctx,
    samples: usize,
    listen: bool,
) -> anyhow::Result<(Vec<f64>, Duration)> {
    let store = fresh_store(ctx, 8).await?;
    let starts: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let mut reg = Registry::default();
    let s = starts.clone();
    reg.register_fn("ping", move |_a, c| {
        let s = s.clone();
        async move {
            s.lock().expect("poisoned").insert(c.id.0, Instant::now());
            Ok(())
        }
    });
    let mut cfg = WorkerConfig::default().queue("latency", 8);
    cfg.listen = listen;
    cfg.maintenance = false;
    let poll = cfg.poll_interval;
    let w = Arc::new(Worker::new(ctx.connect(6).await?, reg, cfg)?);
    let shutdown = Shutdown::default();
    let (w2, s2) = (w.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w2.run(s2).await });
    if listen {
        while w.metrics().snapshot().listen_connects == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let mut committed = HashMap::new();
    for _ in 0..samples {
        let e = store
            .enqueue(&NewJob::new("latency", "ping", json!({})))
            .await?;
        committed.insert(e.id.0, Instant::now());
        // Idle between jobs (jittered so polling is not in phase with the producer).
        let pause = if listen {
            5
        } else {
            rand::random::<u64>() % 300 + 50
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    while starts.lock().expect("poisoned").len() < samples {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.graceful.cancel();
    let _ = task.await;
    let starts = starts.lock().expect("poisoned");
    let ms: Vec<f64> = committed
        .iter()
        .map(|(id, t0)| starts[id].saturating_duration_since(*t0).as_secs_f64() * 1000.0)
        .collect();
    Ok((ms, poll))
}

/// Sizes refused up front, before anything is created or measured (also before the
/// embedded cluster is started: `crate::run` calls this first).
pub fn check_sizes(a: &BenchArgs) -> anyhow::Result<()> {
    let bad =
        |what: &str, range: &str| Err(CliError::invalid(format!("{what} must be {range}")).into());
    if a.workers == 0 || a.workers > 64 {
        return bad("--workers", "1..=64");
    }
    if a.concurrency == 0 || a.concurrency > 10_000 {
        return bad("--concurrency", "1..=10000");
    }
    if a.batch == 0 || a.batch > 10_000 {
        return bad("--batch", "1..=10000");
    }
    if a.jobs.is_some_and(|n| n == 0 || n > 100_000_000) {
        return bad("--jobs", "1..=100000000");
    }
    Ok(())
}

/// Runs `docket bench` as `a` asks.
pub async fn run(ctx: &Ctx, a: BenchArgs) -> anyhow::Result<()> {
    if !["on", "off", "local", "remote_write", "remote_apply"]
        .contains(&a.synchronous_commit.as_str())
    {
        return Err(CliError::invalid(
            "--synchronous-commit: on, off, local, remote_write or remote_apply",
        )
        .into());
    }
    check_sizes(&a)?;
    let ctx = bench_ctx(ctx, &a.synchronous_commit);
    let all = a.scenario == "all";
    let mut results = Vec::new();
    let want = |s: &str| all || a.scenario == s;
    if ![
        "all",
        "drain",
        "concurrency",
        "mixed",
        "enqueue",
        "latency",
        "handlers",
        "steps",
        "workflows",
        "outbox",
        "jetstream",
        "keep",
    ]
    .contains(&a.scenario.as_str())
    {
        let hint = if ["scale", "churn", "charts"].contains(&a.scenario.as_str()) {
            "the long benchmarks (scale, churn, charts) are `docket-bench`'s: cargo run --release -p docket-bench -- <scenario>"
        } else {
            "drain, concurrency, mixed, handlers, steps, workflows, outbox, jetstream, keep, enqueue, latency or all"
        };
        return Err(
            CliError::invalid(format!("unknown scenario {:?}", a.scenario))
                .hint(hint)
                .into(),
        );
    }
    if a.scenario == "concurrency" {
        let r = crate::bench_concurrency::concurrency(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "handlers" {
        let r = crate::bench_handlers::handlers(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "mixed" {
        let r = crate::bench_concurrency::mixed(&ctx, &a).await?;
        return print(&[r], a.json);
    }
    if a.scenario == "steps" {
        let r = crate::bench_concurrency::steps(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "outbox" {
        let r = crate::bench_outbox::outbox(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "keep" {
        let r = crate::bench_keep::keep(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "jetstream" {
        let r = crate::bench_jetstream::jetstream(&a).await?;
        return print(&r, a.json);
    }
    if a.scenario == "workflows" {
        let r = crate::bench_workflows::workflows(&ctx, &a).await?;
        return print(&r, a.json);
    }
    if want("drain") {
        let mut r = drain(&ctx, a.jobs(), a.workers, a.concurrency, a.batch).await?;
        if let Some((floor, _)) = run_floor(
            &a.floor_script,
            &ctx.url,
            &a.synchronous_commit,
            a.jobs().max(10_000),
            4,
            100,
        ) {
            r.floor_jobs_per_s = Some(floor);
            r.floor_batch = Some(100);
            r.ratio = r.jobs_per_s.map(|j| j / floor);
        }
        results.push(r.clone());
        if a.batch != 100 {
            if let Some((floor, _)) = run_floor(
                &a.floor_script,
                &ctx.url,
                &a.synchronous_commit,
                a.jobs().max(10_000),
                4,
                a.batch,
            ) {
                let mut r2 = r.clone();
                r2.scenario = "drain_vs_floor_at_docket_batch".into();
                r2.floor_jobs_per_s = Some(floor);
                r2.floor_batch = Some(a.batch);
                r2.ratio = r2.jobs_per_s.map(|j| j / floor);
                results.push(r2);
            }
        }
    }
    if want("enqueue") {
        let results_enq = enqueue(&ctx, a.jobs(), a.producers).await?;
        let floor = run_floor(
            &a.floor_script,
            &ctx.url,
            &a.synchronous_commit,
            100_000,
            4,
            100,
        );
        for mut r in results_enq {
            if let Some((floor, _)) = floor {
                r.floor_jobs_per_s = Some(floor);
                r.floor_batch = Some(100);
                r.ratio = r.jobs_per_s.map(|j| j / floor);
            }
            results.push(r);
        }
    }
    if want("latency") {
        results.push(latency(&ctx, a.samples, true).await?);
        results.push(latency(&ctx, a.samples.min(100), false).await?);
    }
    print(&results, a.json)?;
    Ok(())
}

/// Prints results as a table, or as JSON lines with `json`.
pub fn print(results: &[BenchResult], json: bool) -> anyhow::Result<()> {
    if json {
        for r in results {
            crate::output::json(r)?;
        }
        return Ok(());
    }
    let mut t = crate::output::table(&[
        "scenario",
        "jobs",
        "jobs/s",
        "floor jobs/s",
        "ratio",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "note",
    ]);
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_default();
    for r in results {
        t.add_row(vec![
            r.scenario.clone(),
            r.jobs.map(|j| j.to_string()).unwrap_or_default(),
            f(r.jobs_per_s, 0),
            f(r.floor_jobs_per_s, 0),
            f(r.ratio, 2),
            f(r.p50_ms, 2),
            f(r.p95_ms, 2),
            f(r.p99_ms, 2),
            r.note.clone().unwrap_or_default(),
        ]);
    }
    println!("{t}");
    Ok(())
}
