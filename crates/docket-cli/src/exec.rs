//! One job as one shell command (`docket work --exec`), and the end of every process it
//! started.
//!
//! - The command runs as `sh -c CMD` in a process group of its own, with the job's args as
//!   JSON on stdin and an environment without Docket's secrets (`DATABASE_URL`,
//!   `DOCKET_LISTEN_URL`, libpq's `PG*` variables, and any variable holding the database
//!   password).
//! - When the job must stop — cancelled, past its maximum runtime, shutdown deadline — the
//!   group gets SIGTERM, then SIGKILL after the grace, and the job ends only when no process of
//!   the group is left, even when `sh` exits first and a child that ignores SIGTERM lives on.
//!   The same on a lost lease: the runtime's watchdog stops a job whose lease it cannot renew
//!   early by more than the grace, so the group is gone before the database can hand the job
//!   to another worker.
//! - When the command exits by itself, anything it left running in its group (a background
//!   grandchild) is ended the same way: nothing outlives its job, and a grandchild holding
//!   stderr open cannot hold the job open.
//! - `sh` gets SIGKILL if the worker itself dies (parent-death signal).
//! - With `--capture-output`, stdout is the job's output: read up to the bound (the rest is
//!   drained and counted, so a chatty command never blocks on a full pipe), and kept only
//!   when the command exits 0 and it is one JSON document within the bound that carries none
//!   of the worker's secrets; otherwise the job fails at once with the reason.
//!
//! Processes are found by scanning `/proc` for the group: `kill(-pgid, 0)` would also count
//! zombies, which an init that does not reap (common in containers) leaves for good, and no
//! crate offers process-group membership.

use std::process::Stdio;
use std::time::{Duration, Instant};

use docket_worker::{JobContext, JobError, JobResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Exit code meaning "try again later" (sysexits EX_TEMPFAIL).
pub const EXIT_RETRY: i32 = 75;
/// Exit code meaning "this job can never succeed" (sysexits EX_DATAERR).
pub const EXIT_DISCARD: i32 = 65;
/// Bytes of stderr kept as the error.
const STDERR_TAIL: usize = 4096;
/// How often a group being stopped is looked at.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// What to run and how long a stopping command may take.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// The `sh -c` command.
    pub cmd: String,
    /// SIGTERM to SIGKILL.
    pub kill_grace: Duration,
    /// Environment variables removed from every job's environment.
    pub scrub: Vec<String>,
    /// Secret values (each as written and percent-encoded) cut out of a command's stderr
    /// before it is stored as the job's error.
    pub secrets: Vec<String>,
    /// Keep stdout (up to this many bytes) as the job's output.
    pub capture: Option<usize>,
}

impl ExecSpec {
    /// A spec whose environment scrub covers Docket's own secrets: the variables that name
    /// the database (`DATABASE_URL`, `MYSQL_URL`, `DOCKET_LISTEN_URL`, libpq's `PG*`), the
    /// dashboard's credentials (`DOCKET_DASHBOARD_*`), NATS's (`DOCKET_NATS_*`), and any whose value contains one of
    /// `passwords` (the database's, when the URL has one) or those credentials, as written or
    /// percent-encoded.
    pub fn new(cmd: String, kill_grace: Duration, passwords: &[String]) -> ExecSpec {
        let mut raw: Vec<String> = passwords.to_vec();
        for k in [
            "DOCKET_DASHBOARD_TOKEN",
            "DOCKET_DASHBOARD_PASSWORD",
            "DOCKET_METRICS_TOKEN",
            "DOCKET_NATS_TOKEN",
            "DOCKET_NATS_PASSWORD",
        ] {
            if let Ok(v) = std::env::var(k) {
                raw.push(v);
            }
        }
        let mut secrets = Vec::new();
        // Shorter than 4 bytes would cut innocent text (and guessing it is no work anyway).
        for s in raw.into_iter().filter(|s| s.len() >= 4) {
            let enc = percent_encoding::utf8_percent_encode(&s, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
            if enc != s {
                secrets.push(enc);
            }
            secrets.push(s);
        }
        // Longest first: an encoded form is never left half-replaced by a shorter one.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let scrub = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.to_string_lossy().into_owned();
                let v = v.to_string_lossy();
                let secret = matches!(
                    k.as_str(),
                    "DATABASE_URL" | "MYSQL_URL" | "DOCKET_LISTEN_URL"
                ) || k.starts_with("PG")
                    || k.starts_with("DOCKET_DASHBOARD_")
                    || k.starts_with("DOCKET_NATS_")
                    || k == "DOCKET_METRICS_TOKEN"
                    || {
                        // A value may carry a secret encoded any way: compare decoded too.
                        let decoded = percent_encoding::percent_decode_str(&v).decode_utf8_lossy();
                        secrets
                            .iter()
                            .any(|p| v.contains(p.as_str()) || decoded.contains(p.as_str()))
                    };
                secret.then_some(k)
            })
            .collect();
        ExecSpec {
            cmd,
            kill_grace,
            scrub,
            secrets,
            capture: None,
        }
    }

    /// `text` with connection-string passwords and every known secret replaced by `***`.
    pub fn scrub_text(&self, text: &str) -> String {
        let mut t = docket_core::redact::redact(text);
        for s in &self.secrets {
            t = t.replace(s.as_str(), "***");
        }
        t
    }
}

/// `kill(-pgid, sig)`: `sig` to every process of group `pgid`, or with 0 only the check that
/// the group exists. Group 0 (which would be our own) and a `pgid` past `pid_t`'s range (its
/// negation would address another process) are refused without a call (EINVAL).
fn kill_group(pgid: u32, sig: i32) -> std::io::Result<()> {
    let Some(pgid) = i32::try_from(pgid).ok().filter(|&p| p > 0) else {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    #[allow(unsafe_code)]
    // SAFETY: kill(2) with a negative pid addresses a process group; it has no memory effects.
    let rc = unsafe { libc::kill(-pgid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sends `sig` to the process group `pgid` (never to group 0, which would be our own).
fn signal_group(pgid: u32, sig: i32) {
    let _ = kill_group(pgid, sig);
}

/// Whether no process at all (zombies included) is left in group `pgid`: `kill(-pgid, 0)`
/// fails with ESRCH. The common end of a job — `sh` and everything it started are gone — is
/// then one system call, where the scan of `/proc` below reads every process's `stat` file
/// (per job, with a few hundred processes on the machine, most of a busy `--exec` worker's
/// system time).
fn group_gone(pgid: u32) -> bool {
    kill_group(pgid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH))
}

/// Live (not zombie) processes in group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    if pgid == 0 || group_gone(pgid) {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and
            // parentheses, so parse after the last ')'.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 1..];
                    let mut f = rest.split_whitespace();
                    let state = f.next()?;
                    let _ppid = f.next()?;
                    let pgrp: u32 = f.next()?.parse().ok()?;
                    Some(pgrp == pgid && state != "Z" && state != "X")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Waits until group `pgid` is empty, at most `within`; true when it is.
async fn wait_empty(pgid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        if group_members(pgid).is_empty() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(GROUP_POLL).await;
    }
}

/// Ends every process of group `pgid`: SIGTERM and up to `grace` to go, then SIGKILL.
/// Returns once the group is empty (or, should a process be unkillable, after a further 5 s).
async fn end_group(pgid: u32, grace: Duration) {
    if group_members(pgid).is_empty() {
        return;
    }
    signal_group(pgid, libc::SIGTERM);
    if wait_empty(pgid, grace).await {
        return;
    }
    signal_group(pgid, libc::SIGKILL);
    wait_empty(pgid, Duration::from_secs(5)).await;
}

/// Kills the group if the job's future is dropped before it ended the group itself (the
/// runtime drops a handler that outlives its cancel grace).
struct GroupGuard {
    pgid: u32,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
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

/// Up to `max` bytes of a stream, and its whole length (the rest is read and dropped).
async fn read_bounded(mut r: impl tokio::io::AsyncRead + Unpin, max: usize) -> (Vec<u8>, usize) {
    let mut kept: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = max.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
    }
    (kept, total)
}

/// The captured stdout of a command that exited 0, as the job's output, or why not.
fn captured_output(
    spec: &ExecSpec,
    text: &[u8],
    total: usize,
    max: usize,
) -> Result<serde_json::Value, JobError> {
    if total > max {
        return Err(JobError::discard(format!(
            "--capture-output: stdout is {total} bytes, over the output bound of {max} bytes"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| {
        JobError::discard(format!(
            "--capture-output: stdout is not one JSON document: {e}"
        ))
    })?;
    let s = String::from_utf8_lossy(text);
    if spec.scrub_text(&s) != s {
        return Err(JobError::discard(
            "--capture-output: stdout holds a secret of the worker's (a password or token); nothing was kept",
        ));
    }
    Ok(v)
}

/// `{parent name: output}` (null for a parent that left none) in a temporary file.
async fn deps_file(ctx: &JobContext) -> Result<tempfile::NamedTempFile, JobError> {
    let deps = ctx.deps().await?;
    let map: serde_json::Map<String, serde_json::Value> = deps
        .into_iter()
        .map(|d| (d.node, d.output.unwrap_or(serde_json::Value::Null)))
        .collect();
    let write = || -> std::io::Result<tempfile::NamedTempFile> {
        let mut f = tempfile::Builder::new().prefix("docket-deps-").tempfile()?;
        serde_json::to_writer(&mut f, &map)?;
        std::io::Write::flush(&mut f)?;
        Ok(f)
    };
    write().map_err(|e| JobError::retry(format!("cannot write DOCKET_DEPS: {e}")))
}

/// Runs one job's command to its end (see the module doc).
pub async fn exec_job(spec: ExecSpec, args: serde_json::Value, ctx: JobContext) -> JobResult {
    // A workflow node's parents' outputs, as a file the command reads (kept until it exits;
    // private to this user, as tempfile creates it).
    let deps_file = match ctx.workflow() {
        Some(_) => Some(deps_file(&ctx).await?),
        None => None,
    };
    let mut cmd = tokio::process::Command::new("sh");
    if let (Some(f), Some((wf, node))) = (&deps_file, ctx.workflow()) {
        cmd.env("DOCKET_DEPS", f.path())
            .env("DOCKET_WORKFLOW_ID", wf.to_string())
            .env("DOCKET_NODE", node);
    }
    if let Some(b) = ctx.batch() {
        // A batch's callback: the batch, why it fired and the counts, as one JSON value
        // (numbers and the batch's checked name; no job data).
        cmd.env(
            "DOCKET_BATCH",
            serde_json::to_string(&b).unwrap_or_default(),
        );
    }
    cmd.arg("-c")
        .arg(&spec.cmd)
        .env("DOCKET_JOB_ID", ctx.id.to_string())
        .env("DOCKET_ATTEMPT", ctx.attempt.to_string())
        .env("DOCKET_FENCE", ctx.fence.to_string())
        .env("DOCKET_QUEUE", &ctx.queue)
        .env("DOCKET_KIND", &ctx.kind)
        .stdin(Stdio::piped())
        .stdout(if spec.capture.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for k in &spec.scrub {
        cmd.env_remove(k);
    }
    #[allow(unsafe_code)]
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| JobError::retry(format!("cannot start `sh -c`: {e}")))?;
    let pgid = child.id().unwrap_or(0);
    let mut guard = GroupGuard { pgid, armed: true };
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Exactly the stored JSON (numbers as written, thanks to serde_json's
    // arbitrary_precision), written in the background: a command that never reads stdin
    // must not block us.
    let input = serde_json::to_vec(&args).unwrap_or_default();
    tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let stderr = tokio::spawn(read_tail(child.stderr.take().expect("piped stderr")));
    let stdout = spec.capture.map(|max| {
        let out = child.stdout.take().expect("piped stdout");
        tokio::spawn(read_bounded(out, max))
    });
    // `sh` is reaped by its own task so the group can be watched while it is stopped.
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(child.wait().await);
    });
    let mut rx = rx;
    let status = tokio::select! {
        s = &mut rx => s,
        _ = ctx.cancel.cancelled() => {
            end_group(pgid, spec.kill_grace).await;
            rx.await
        }
    };
    // Whatever the command left behind in its group ends with the job.
    end_group(pgid, spec.kill_grace).await;
    guard.armed = false;
    // Every writer in the group is gone, so EOF is at hand; one that left the group
    // (setsid) cannot hold the job open for more than a moment.
    let tail = match tokio::time::timeout(Duration::from_secs(1), stderr).await {
        Ok(t) => spec.scrub_text(&t.unwrap_or_default()),
        Err(_) => String::new(),
    };
    let status = status
        .map_err(|_| JobError::retry("the command's waiter was lost"))?
        .map_err(|e| JobError::retry(format!("waiting for the command failed: {e}")))?;
    let with_tail = |head: String| {
        if tail.is_empty() {
            head
        } else {
            format!("{head}: {tail}")
        }
    };
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => match (stdout, spec.capture) {
            (Some(reader), Some(max)) => {
                let (text, total) = tokio::time::timeout(Duration::from_secs(1), reader)
                    .await
                    .map_err(|_| {
                        JobError::retry(
                            "--capture-output: stdout was held open past the command's end",
                        )
                    })?
                    .map_err(|_| JobError::retry("--capture-output: the stdout reader was lost"))?;
                let v = captured_output(&spec, &text, total, max)?;
                ctx.set_output(&v)
            }
            _ => Ok(()),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Group 0 is our own and a pgid past `pid_t` would wrap to another target: neither
    /// reaches kill(2). A group that cannot exist reads as gone.
    #[test]
    fn kill_group_refuses_our_group_and_pgids_out_of_range() {
        for pgid in [0, u32::MAX, i32::MAX as u32 + 1] {
            let e = kill_group(pgid, 0).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "pgid {pgid}");
        }
        assert!(!group_gone(0));
        // pid_max is at most 2^22 on Linux: no group has this id.
        assert!(group_gone(i32::MAX as u32));
        assert!(group_members(0).is_empty());
    }
}
