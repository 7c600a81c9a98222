//! `docket bench --scenario concurrency`, `--scenario mixed` and `--scenario steps`: what one worker process with
//! the library's defaults does — `WorkerConfig::default().queue(q, W)` on a pool of 10, as the
//! README shows — at the concurrencies users run, next to the SQL floor measured before and
//! after in the same invocation.
//!
//! Time is taken from the database's own timestamps, from the first claim (`attempted_at`)
//! to the last completion (`finished_at`), so neither process start-up nor how long the
//! worker takes to notice that the queue is empty (its default 2 s poll) is counted, and
//! nothing polls the table while it drains.

use serde_json::json;

use crate::bench::{load_drain, run_floor, verify_drained, wait_exited, BenchResult};
use crate::cli::BenchArgs;
use crate::fail::CliError;
use crate::Ctx;

/// What one drain measured.
pub(crate) struct Drain {
    /// Jobs/s between first claim and last completion.
    pub(crate) rate: f64,
    /// The handlers' summed run time in seconds, as they measured it.
    handler_secs: f64,
    /// The worker process's peak resident set, MiB.
    peak_rss_mib: f64,
    /// CPU seconds the database server spent meanwhile (`None` when it is not on this
    /// machine): the drain's server time.
    pub(crate) server_cpu_s: Option<f64>,
    /// Jobs/s from the worker process's first step — before its pool connects, so start-up
    /// (connections, schema check, registry, election, LISTEN) counts — to the last
    /// completion. `None` where the drain kept its rows (no completion stamp to read) or the
    /// server runs elsewhere (another clock).
    pub(crate) from_start_rate: Option<f64>,
    /// CPU seconds the worker process used (start-up included).
    pub(crate) worker_cpu_s: f64,
}

/// CPU seconds the PostgreSQL server behind `store` has used so far, when it runs on this
/// machine (read from `/proc`): its postmaster's own and its exited children's (`cutime`,
/// `cstime`: backends that ended), plus every live child's. The difference of two readings is
/// what the server spent in between, whichever backend spent it. `None` elsewhere.
async fn server_cpu(store: &docket_postgres::PgStore) -> Option<f64> {
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .ok()?;
    let stat = crate::bench::proc_stat;
    let postmaster = *stat(&backend.to_string())?.first()?;
    let own = stat(&postmaster.to_string())?;
    let mut ticks = own.get(10..14)?.iter().sum::<i64>();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some(f) = stat(pid).filter(|f| f.first() == Some(&postmaster)) {
            ticks += f.get(10..12).map(|t| t.iter().sum::<i64>()).unwrap_or(0);
        }
    }
    // /proc reports these in USER_HZ ticks, 100 per second on every Linux architecture
    // (what sysconf(_SC_CLK_TCK) returns; this crate forbids the unsafe call to ask).
    Some(ticks as f64 / 100.0)
}

/// One drain by one default worker process.
pub(crate) async fn one_drain(
    ctx: &Ctx,
    n: u64,
    slots: usize,
    sleep_ms: u64,
) -> anyhow::Result<Drain> {
    drain_with(ctx, n, slots, sleep_ms, &[]).await
}

/// [`one_drain`] with more arguments for the worker (steps, outputs).
async fn drain_with(
    ctx: &Ctx,
    n: u64,
    slots: usize,
    sleep_ms: u64,
    extra: &[String],
) -> anyhow::Result<Drain> {
    let store = load_drain(ctx, n).await?;
    drain_loaded(ctx, &store, n, slots, sleep_ms, extra).await
}

/// [`drain_with`] of a store already holding its `n` jobs (a workflow scenario's graphs).
pub(crate) async fn drain_loaded(
    ctx: &Ctx,
    store: &docket_postgres::PgStore,
    n: u64,
    slots: usize,
    sleep_ms: u64,
    extra: &[String],
) -> anyhow::Result<Drain> {
    let store = store.clone();
    let cpu_before = server_cpu(&store).await;
    let mut c = ctx.child("__bench-worker")?;
    // The worker prints its handlers' summed time on stdout at the end (one short line, well
    // inside a pipe's buffer, so it is read after the exit).
    c.arg("--print-handler-time")
        .stdout(std::process::Stdio::piped());
    c.args([
        "--concurrency",
        &slots.to_string(),
        "--batch",
        "100",
        "--connections",
        "10",
    ])
    .args(["--defaults", "--sleep-ms", &sleep_ms.to_string()])
    .args(extra);
    let mut children = vec![c.spawn()?];
    let waited = wait_exited(&mut children).await;
    crate::stop_children(&mut children);
    waited?;
    let server_cpu_s = match (cpu_before, server_cpu(&store).await) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let secs = verify_drained(ctx, &store, n).await?;
    let mut printed = String::new();
    if let Some(mut out) = children[0].stdout.take() {
        std::io::Read::read_to_string(&mut out, &mut printed)?;
    }
    let bad = || {
        CliError::new(
            1,
            format!(
                "the bench worker printed {printed:?}, not its handler time, peak RSS, start and CPU"
            ),
        )
    };
    let fields: Vec<f64> = printed
        .split_whitespace()
        .map(str::parse::<f64>)
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let [handler_ns, rss_kib, started_us, cpu_ticks] = fields[..] else {
        return Err(bad().into());
    };
    // The last completion's stamp (`bench_last`, microseconds since the epoch, taken by the
    // server's clock): only drains that delete what they complete have one, and it is
    // compared with the worker's clock only where the server runs on this machine (its CPU
    // was readable), so both are one clock.
    let last_us: Option<i64> = if server_cpu_s.is_some() {
        sqlx::query_scalar(&format!(
            "SELECT last_value FROM {}.bench_last WHERE is_called",
            ctx.schema
        ))
        .fetch_optional(store.pool())
        .await
        .ok()
        .flatten()
    } else {
        None
    };
    let from_start_rate = last_us
        .map(|l| (l as f64 - started_us) / 1e6)
        .filter(|s| *s > 0.0)
        .map(|s| n as f64 / s);
    Ok(Drain {
        rate: n as f64 / secs.unwrap_or(f64::INFINITY).max(1e-6),
        handler_secs: handler_ns / 1e9,
        peak_rss_mib: rss_kib / 1024.0,
        server_cpu_s,
        from_start_rate,
        worker_cpu_s: cpu_ticks / 100.0,
    })
}

/// One (N, W) cell's runs.
#[derive(Default)]
struct Measured {
    rates: Vec<f64>,
    rss: f64,
    from_start: Vec<f64>,
    worker_us: Vec<f64>,
    server_us: Vec<f64>,
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// W = each of `a.levels`, N = each of `a.counts`, `a.runs` drains each (median), the floor
/// before and after.
pub async fn concurrency(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    if a.runs == 0 || a.levels.is_empty() || a.counts.is_empty() {
        return Err(CliError::invalid("--runs, --levels and --counts must not be empty").into());
    }
    let floor = || {
        run_floor(
            &a.floor_script,
            &ctx.url,
            &a.synchronous_commit,
            200_000,
            4,
            100,
        )
    };
    let before = floor().map(|f| f.0);
    let mut measured = Vec::new();
    for &n in &a.counts {
        for &w in &a.levels {
            let mut m = Measured::default();
            for _ in 0..a.runs {
                let d = one_drain(ctx, n, w, 0).await?;
                m.rates.push(d.rate);
                m.rss = m.rss.max(d.peak_rss_mib);
                m.from_start.extend(d.from_start_rate);
                m.worker_us.push(d.worker_cpu_s * 1e6 / n as f64);
                m.server_us
                    .extend(d.server_cpu_s.map(|s| s * 1e6 / n as f64));
            }
            measured.push((n, w, m));
        }
    }
    let after = floor().map(|f| f.0);
    let floor = match (before, after) {
        (Some(b), Some(a)) => Some((b + a) / 2.0),
        (b, a) => b.or(a),
    };
    Ok(measured
        .into_iter()
        .map(|(n, w, runs)| {
            let Measured {
                rates,
                rss,
                from_start,
                worker_us,
                server_us,
            } = runs;
            let m = median(rates.clone());
            let from_start_m = (!from_start.is_empty()).then(|| median(from_start.clone()));
            let from_start_ratio = from_start_m.zip(floor).map(|(r, f)| r / f);
            let (worker_m, server_m) = (
                (!worker_us.is_empty()).then(|| median(worker_us.clone())),
                (!server_us.is_empty()).then(|| median(server_us.clone())),
            );
            BenchResult {
                scenario: "concurrency".into(),
                jobs: Some(n),
                workers: Some(1),
                concurrency: Some(w),
                jobs_per_s: Some(m),
                seconds: Some(n as f64 / m),
                floor_jobs_per_s: floor,
                ratio: floor.map(|f| m / f),
                note: Some(format!(
                    "one process, library defaults; median of {} runs; floor before {} / after {}; \
                     from the worker's start (connections, schema check, election, LISTEN \
                     included): {} jobs/s, ratio {}; CPU a job: worker {} µs, server {} µs; \
                     worker peak RSS {rss:.1} MiB",
                    rates.len(),
                    before.map_or("-".into(), |f| format!("{f:.0}")),
                    after.map_or("-".into(), |f| format!("{f:.0}")),
                    from_start_m.map_or("-".into(), |r| format!("{r:.0}")),
                    from_start_ratio.map_or("-".into(), |r| format!("{r:.2}")),
                    worker_m.map_or("-".into(), |c| format!("{c:.1}")),
                    server_m.map_or("-".into(), |c| format!("{c:.1}")),
                )),
                extra: Some(json!({
                    "runs_jobs_per_s": rates,
                    "peak_rss_mib": rss,
                    "runs_from_start_jobs_per_s": from_start,
                    "from_start_ratio": from_start_ratio,
                    "worker_cpu_us_per_job": worker_us,
                    "server_cpu_us_per_job": server_us,
                })),
                ..Default::default()
            }
        })
        .collect())
}

/// 20,000 jobs whose handlers sleep 5 ms, one default process with 50 slots: the time
/// against the ideal (N × 5 ms / 50).
pub async fn mixed(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<BenchResult> {
    let (n, w, sleep_ms) = (a.jobs.unwrap_or(20_000).min(1_000_000), 50usize, 5u64);
    let Drain {
        rate,
        handler_secs,
        peak_rss_mib,
        ..
    } = one_drain(ctx, n, w, sleep_ms).await?;
    let secs = n as f64 / rate;
    let ideal = n as f64 * sleep_ms as f64 / 1000.0 / w as f64;
    // The ideal of the handlers as they ran: their measured time spread over the slots. The
    // ratio column stays the nominal one (the target is stated for it); this one says how
    // much of the gap is the queue's and how much the timer's.
    let measured_ideal = handler_secs / w as f64;
    let mean_ms = handler_secs * 1000.0 / n as f64;
    Ok(BenchResult {
        scenario: "mixed".into(),
        jobs: Some(n),
        workers: Some(1),
        concurrency: Some(w),
        seconds: Some(secs),
        jobs_per_s: Some(rate),
        ratio: Some(secs / ideal),
        note: Some(format!(
            "handlers sleep {sleep_ms} ms; ratio = time / ideal ({ideal:.2} s), target <= 1.15; \
             the handlers measured {mean_ms:.2} ms each: time / their ideal ({measured_ideal:.2} s) = {:.2}; \
             worker peak RSS {peak_rss_mib:.1} MiB",
            secs / measured_ideal.max(1e-9)
        )),
        extra: Some(json!({
            "peak_rss_mib": peak_rss_mib,
            "handler_ms": mean_ms,
            "ratio_to_handlers_ideal": secs / measured_ideal.max(1e-9),
        })),
        ..Default::default()
    })
}

/// Durable jobs' cost at W = each of `a.levels` (one default process), alternating so drift hits all three
/// alike: plain no-op jobs; jobs of 10 memoized steps (target: a job costs at most 12 × a
/// plain one's server time — the database server's CPU per job, where the server runs on
/// this machine, else the drain rate); jobs with a 64 KiB output (target: at least 0.5 × the
/// plain rate).
pub async fn steps(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    let n = a.jobs.unwrap_or(20_000).min(1_000_000);
    let mut out = Vec::new();
    for &w in &a.levels {
        out.extend(steps_at(ctx, a, n, w).await?);
    }
    Ok(out)
}

/// The floor of a job with a 64 KiB output: rows of the same JSON value (a 64 KiB string)
/// inserted into a table like the jobs' output column (jsonb, lz4 where the server has it),
/// 100 a statement, each statement its own transaction, from 4 connections at once (as
/// `sql-floor.sh` runs 4 clients) — what storing such an output costs this server whatever
/// the queue does around it (PostgreSQL parses every jsonb value it receives). Jobs/s.
async fn output_floor(ctx: &Ctx, n: u64, bytes: usize) -> anyhow::Result<f64> {
    const CLIENTS: u64 = 4;
    let store = crate::bench::fresh_store(ctx, CLIENTS as u32).await?;
    let table = format!("{}.bench_output_floor", ctx.schema);
    sqlx::query(&format!(
        "CREATE TABLE {table} (id bigserial PRIMARY KEY, v jsonb NOT NULL)"
    ))
    .execute(store.pool())
    .await?;
    // lz4 as the jobs' output column has it (migration 0020); pglz where the server lacks it.
    let _ = sqlx::query(&format!(
        "ALTER TABLE {table} ALTER COLUMN v SET COMPRESSION lz4"
    ))
    .execute(store.pool())
    .await;
    let value = serde_json::Value::String("x".repeat(bytes));
    let batch: Vec<&serde_json::Value> = std::iter::repeat_n(&value, 100).collect();
    let insert = format!("INSERT INTO {table} (v) SELECT * FROM unnest($1::jsonb[])");
    let t = std::time::Instant::now();
    let client = |share: u64| {
        let (store, insert, batch) = (&store, &insert, &batch);
        async move {
            let mut done = 0;
            while done < share {
                let k = (share - done).min(100) as usize;
                sqlx::query(insert)
                    .bind(&batch[..k])
                    .execute(store.pool())
                    .await?;
                done += k as u64;
            }
            anyhow::Ok(())
        }
    };
    let shares = (0..CLIENTS).map(|i| n / CLIENTS + u64::from(i < n % CLIENTS));
    futures::future::try_join_all(shares.map(client)).await?;
    Ok(n as f64 / t.elapsed().as_secs_f64().max(1e-6))
}

/// `runs` rounds (at least one) of one drain of `n` jobs at `w` slots per case, the cases in
/// turn so a drift of the machine's pace falls on each alike: per case, its rates and the
/// server's CPU µs a job (where it could be read).
pub(crate) async fn alternating(
    ctx: &Ctx,
    n: u64,
    w: usize,
    runs: usize,
    cases: &[Vec<String>],
) -> anyhow::Result<(Vec<Vec<f64>>, Vec<Vec<f64>>)> {
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs.max(1) {
        for (i, extra) in cases.iter().enumerate() {
            let d = drain_with(ctx, n, w, 0, extra).await?;
            rates[i].push(d.rate);
            if let Some(c) = d.server_cpu_s {
                cpu[i].push(c * 1e6 / n as f64);
            }
        }
    }
    Ok((rates, cpu))
}

/// The median of `v` when every one of `runs` rounds gave a value, else none (a server CPU
/// that could not be read in some round is not reported from the others).
pub(crate) fn median_of_all(v: &[f64], runs: usize) -> Option<f64> {
    (v.len() == runs.max(1)).then(|| median(v.to_vec()))
}

/// The steps scenario at `w` slots.
async fn steps_at(ctx: &Ctx, a: &BenchArgs, n: u64, w: usize) -> anyhow::Result<Vec<BenchResult>> {
    let cases: [(&str, Vec<String>); 3] = [
        ("plain", vec![]),
        ("10 steps", vec!["--steps".into(), "10".into()]),
        (
            "64 KiB output",
            vec!["--output-bytes".into(), "65536".into()],
        ),
    ];
    let extras: Vec<Vec<String>> = cases.iter().map(|(_, e)| e.clone()).collect();
    let (rates, cpu) = alternating(ctx, n, w, a.runs, &extras).await?;
    let floor = output_floor(ctx, n, 65536).await?;
    let plain = median(rates[0].clone());
    let plain_cpu = median_of_all(&cpu[0], a.runs);
    Ok(cases
        .iter()
        .zip(rates)
        .zip(cpu)
        .map(|(((name, _), r), c)| {
            let m = median(r.clone());
            let us = median_of_all(&c, a.runs);
            let (ratio, target) = match (*name, us.zip(plain_cpu)) {
                ("10 steps", Some((us, p))) => {
                    (us / p, "server CPU per job vs plain, target <= 12")
                }
                ("10 steps", None) => (plain / m, "cost per job vs plain (rate), target <= 12"),
                ("64 KiB output", _) => (m / plain, "rate vs plain, target >= 0.5"),
                _ => (1.0, "the baseline"),
            };
            BenchResult {
                scenario: format!("steps: {name}"),
                jobs: Some(n),
                workers: Some(1),
                concurrency: Some(w),
                jobs_per_s: Some(m),
                seconds: Some(n as f64 / m),
                ratio: Some(ratio),
                note: Some(format!(
                    "{target}; one process, library defaults; median of {} runs, alternating",
                    r.len()
                )),
                extra: Some(json!({
                    "runs_jobs_per_s": r,
                    "server_cpu_us_per_job": us,
                    "runs_server_cpu_us_per_job": c,
                    "rate_vs_plain": m / plain,
                    "output_floor_jobs_per_s": (*name == "64 KiB output").then_some(floor),
                    "rate_vs_output_floor": (*name == "64 KiB output").then_some(m / floor),
                })),
                ..Default::default()
            }
        })
        .collect())
}
