//! `docket work --exec CMD`: a worker that runs a shell command per job, so any language can
//! process Docket jobs.
//!
//! Contract: `sh -c CMD` with the job's args as JSON on stdin and DOCKET_JOB_ID,
//! DOCKET_ATTEMPT, DOCKET_QUEUE, DOCKET_KIND in the environment. Exit 0 → succeeded;
//! 75 (EX_TEMPFAIL) → retry; 65 (EX_DATAERR) → discard (dead at once); anything else, or
//! death by a signal → failure, retried with backoff until attempts run out. The tail of
//! stderr is the stored error. When the job must stop (lease lost, cancelled, timed out,
//! shutdown deadline) the command's process group gets SIGTERM, then SIGKILL.

use std::process::Stdio;
use std::time::Duration;

use docket_core::duration::parse_bounded;
use docket_worker::{JobContext, JobError, JobResult, Registry, Shutdown, Worker, WorkerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cli::WorkArgs;
use crate::fail::CliError;
use crate::Ctx;

/// Exit code meaning "try again later" (sysexits EX_TEMPFAIL).
pub const EXIT_RETRY: i32 = 75;
/// Exit code meaning "this job can never succeed" (sysexits EX_DATAERR).
pub const EXIT_DISCARD: i32 = 65;
/// Bytes of stderr kept as the error.
const STDERR_TAIL: usize = 4096;

fn dur(what: &'static str, s: &str, min: Duration, max: Duration) -> Result<Duration, CliError> {
    parse_bounded(what, s, min, max).map_err(|e| CliError::invalid(e.to_string()))
}

pub async fn run(ctx: &Ctx, a: WorkArgs) -> anyhow::Result<()> {
    let lease = dur(
        "lease",
        &a.lease,
        Duration::from_secs(1),
        Duration::from_secs(24 * 3600),
    )?;
    let max_runtime = dur(
        "max-runtime",
        &a.max_runtime,
        Duration::from_millis(10),
        Duration::from_secs(7 * 24 * 3600),
    )?;
    let poll = dur(
        "poll",
        &a.poll,
        Duration::from_millis(10),
        Duration::from_secs(3600),
    )?;
    let kill_grace = dur(
        "kill-grace",
        &a.kill_grace,
        Duration::ZERO,
        Duration::from_secs(60),
    )?;
    if a.concurrency == 0 || a.concurrency > 10_000 {
        return Err(CliError::invalid("--concurrency must be 1..=10000").into());
    }
    if a.exec.trim().is_empty() {
        return Err(CliError::invalid("--exec must not be empty").into());
    }
    let mut cfg = WorkerConfig::default().lease(lease);
    cfg.queues.clear();
    for q in &a.queues {
        docket_core::validate::queue(q).map_err(|e| CliError::invalid(e.to_string()))?;
        cfg = cfg.queue(q, a.concurrency);
    }
    cfg.max_runtime = max_runtime;
    cfg.poll_interval = poll;
    cfg.cancel_grace = kill_grace + Duration::from_secs(2);
    cfg.maintenance = !a.no_maintenance;
    cfg.serverless = a.serverless;
    if let Some(u) = a.listen_url.as_deref().filter(|u| !u.trim().is_empty()) {
        // Checked now so a typo fails at start with a clear error, not in the notifier's log.
        docket_postgres::connect::parse(u).map_err(crate::fail::connect_error)?;
        cfg.listen_url = Some(u.to_string());
    }
    cfg.reap_interval = (lease / 4).max(Duration::from_millis(200));
    // Reaping matters on the lease's time scale; a dead leader should not hold it up longer.
    cfg.leader_ttl = lease.max(cfg.reap_interval * 3);
    let conns = (a.concurrency * a.queues.len()).min(20) as u32 + 4;
    let store = ctx.store(conns).await?;
    let mut registry = Registry::default();
    let cmd = a.exec.clone();
    registry.fallback(move |args, jctx| exec_job(cmd.clone(), kill_grace, args, jctx));
    let worker = Worker::new(store, registry, cfg)?;
    eprintln!("docket: worker {} serving {:?}", worker.owner(), a.queues);
    let shutdown = Shutdown::on_signals();
    let report = if a.drain {
        worker.drain(shutdown).await?
    } else {
        worker.run(shutdown).await?
    };
    eprintln!(
        "docket: worker stopped: {} succeeded, {} failed, {} released, {} fenced",
        report.metrics.completed,
        report.metrics.failed,
        report.metrics.released,
        report.metrics.fenced
    );
    Ok(())
}

/// Sends `sig` to the process group led by `pid`.
fn signal_group(pid: u32, sig: i32) {
    #[allow(unsafe_code)]
    // SAFETY: kill(2) with a negative pid addresses a process group; it has no memory effects.
    unsafe {
        libc::kill(-(pid as i32), sig);
    }
}

/// The tail of a stream, bounded to `STDERR_TAIL` bytes.
async fn read_tail(mut r: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > STDERR_TAIL * 2 {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
    if tail.len() > STDERR_TAIL {
        tail.drain(..tail.len() - STDERR_TAIL);
    }
    String::from_utf8_lossy(&tail).trim().to_string()
}

async fn exec_job(
    cmd: String,
    grace: Duration,
    args: serde_json::Value,
    ctx: JobContext,
) -> JobResult {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .env("DOCKET_JOB_ID", ctx.id.to_string())
        .env("DOCKET_ATTEMPT", ctx.attempt.to_string())
        .env("DOCKET_QUEUE", &ctx.queue)
        .env("DOCKET_KIND", &ctx.kind)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| JobError::retry(format!("cannot start `sh -c`: {e}")))?;
    let pid = child.id().unwrap_or(0);
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = serde_json::to_vec(&args).unwrap_or_default();
    // A command that never reads stdin must not block us: write in the background.
    tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let stderr = tokio::spawn(read_tail(child.stderr.take().expect("piped stderr")));
    let status = tokio::select! {
        s = child.wait() => s,
        _ = ctx.cancel.cancelled() => {
            signal_group(pid, libc::SIGTERM);
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    signal_group(pid, libc::SIGKILL);
                    child.wait().await
                }
            }
        }
    };
    let tail = stderr.await.unwrap_or_default();
    let status =
        status.map_err(|e| JobError::retry(format!("waiting for the command failed: {e}")))?;
    let with_tail = |head: String| {
        if tail.is_empty() {
            head
        } else {
            format!("{head}: {tail}")
        }
    };
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(()),
        (Some(EXIT_RETRY), _) => Err(JobError::retry(with_tail(format!(
            "exit {EXIT_RETRY} (retry)"
        )))),
        (Some(EXIT_DISCARD), _) => Err(JobError::discard(with_tail(format!(
            "exit {EXIT_DISCARD} (discard)"
        )))),
        (Some(code), _) => Err(JobError::retry(with_tail(format!("exit {code}")))),
        (None, Some(sig)) => Err(JobError::retry(with_tail(format!(
            "killed by signal {sig}"
        )))),
        (None, None) => Err(JobError::retry(with_tail("ended without status".into()))),
    }
}
