//! `docket work --exec CMD`: a worker that runs a shell command per job, so any language can
//! process Docket jobs.
//!
//! Contract: `sh -c CMD` with the job's args as JSON on stdin and DOCKET_JOB_ID,
//! DOCKET_ATTEMPT (the run: 1 on the first), DOCKET_FENCE (the claim's fencing token),
//! DOCKET_QUEUE, DOCKET_KIND in the environment. Exit 0 → succeeded;
//! 75 (EX_TEMPFAIL) → retry; 65 (EX_DATAERR) → discard (dead at once); anything else, or
//! death by a signal → failure, retried with backoff until attempts run out. The tail of
//! stderr is the stored error. When the job must stop (lease lost, cancelled, timed out,
//! shutdown deadline) the command's process group gets SIGTERM, then SIGKILL.

use std::time::Duration;

use docket_core::duration::parse_bounded;
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};

use crate::cli::WorkArgs;
use crate::engine::Open;
use crate::exec::{exec_job, ExecSpec};
use crate::fail::CliError;

/// The store, connected and migrated, riding out a connection the server cuts while the
/// worker starts (an administrator's `pg_terminate_backend`, a server going down for a
/// restart) as the running worker rides out the same cut: up to five more tries, 100 ms
/// apart and doubling, each said on stderr. Only a cut by a server that answered is retried
/// (its error carries an SQLSTATE); a server that cannot be reached, a bad password or a
/// schema error still fail at once, naming the cause.
async fn migrated_through_cuts<O: Open>(ctx: &O, conns: u32) -> anyhow::Result<O::Store> {
    let mut delay = Duration::from_millis(100);
    let mut tries = 1;
    loop {
        match ctx.migrated(conns).await {
            Err(e) if tries < 6 && cut_by_the_server(&e) => {
                let cause = docket_core::redact::redact(&e.to_string());
                eprintln!("docket: the server cut the connection while the worker started ({cause}); trying again in {delay:?}");
                // A pause between tries of a server that just dropped us, not a wait for an
                // event: nothing signals that the server is back but a new connection.
                tokio::time::sleep(delay).await;
                delay *= 2;
                tries += 1;
            }
            r => return r,
        }
    }
}

/// An unavailable database whose error the server itself sent (SQLSTATE class 57, 08, …).
fn cut_by_the_server(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<docket_core::StoreError>(),
        Some(docket_core::StoreError::Unavailable(inner))
            if matches!(inner.downcast_ref::<sqlx::Error>(), Some(sqlx::Error::Database(_)))
    )
}

fn dur(what: &'static str, s: &str, min: Duration, max: Duration) -> Result<Duration, CliError> {
    parse_bounded(what, s, min, max).map_err(|e| CliError::invalid(e.to_string()))
}

pub async fn run(ctx: &impl Open, a: WorkArgs) -> anyhow::Result<()> {
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
    // The command must be gone before the lease can expire in the database (the runtime
    // stops a job whose lease it cannot renew early by its cancel grace, at most a third of
    // the lease): so the grace is at most a quarter of the lease.
    let kill_grace = match &a.kill_grace {
        Some(g) => dur("kill-grace", g, Duration::ZERO, lease / 4)?,
        None => (lease / 10).min(Duration::from_secs(2)),
    };
    if a.concurrency == 0 || a.concurrency > 10_000 {
        return Err(CliError::invalid("--concurrency must be 1..=10000").into());
    }
    if let Some(m) = &a.metrics_listen {
        crate::dashboard::addr("--metrics-listen", m)?;
    }
    if a.exec.trim().is_empty() {
        return Err(CliError::invalid("--exec must not be empty").into());
    }
    let mut cfg = WorkerConfig::default().lease(lease);
    cfg.queues.clear();
    for (i, q) in a.queues.iter().enumerate() {
        docket_core::validate::queue(q).map_err(|e| CliError::invalid(e.to_string()))?;
        if a.queues[..i].contains(q) {
            return Err(CliError::invalid(format!(
                "--queue {:?} is given twice (a queue is served once; --concurrency sets its slots)",
                crate::output::safe(q)
            ))
            .into());
        }
        cfg = cfg.queue(q, a.concurrency);
    }
    cfg.max_runtime = max_runtime;
    cfg.keep_succeeded = !a.delete_succeeded;
    cfg.max_output_bytes = a.max_output_bytes;
    cfg.shutdown_timeout = dur(
        "shutdown-timeout",
        &a.shutdown_timeout,
        Duration::ZERO,
        Duration::from_secs(24 * 3600),
    )?;
    cfg.poll_interval = poll;
    // Longer than the command's own stop (grace, then SIGKILL and up to 5 s for the group to
    // go), so the runtime never drops a handler that is still ending its processes.
    cfg.cancel_grace = kill_grace + Duration::from_secs(6);
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
    let conns = match a.max_connections {
        // Fetcher, completer, heartbeater, leader and LISTEN each hold at most one at a time;
        // fewer than 3 would leave a claim waiting behind the completer for every batch.
        Some(n) if !(3..=1000).contains(&n) => {
            return Err(CliError::invalid("--max-connections must be 3..=1000").into())
        }
        Some(n) => n,
        None => (a.concurrency * a.queues.len()).min(20) as u32 + 4,
    };
    let store = migrated_through_cuts(ctx, conns).await?;
    let mut registry = Registry::default();
    let secrets = ctx.secrets();
    let mut spec = ExecSpec::new(a.exec.clone(), kill_grace, &secrets);
    spec.capture = a.capture_output.then_some(a.max_output_bytes);
    registry.fallback(move |args, jctx| exec_job(spec.clone(), args, jctx));
    if let Some(addr) = &a.metrics_listen {
        crate::dashboard::serve_metrics(addr, store.clone()).await?;
    }
    let relay = match &a.relay_stream {
        Some(stream) => Some(crate::outbox::relay_service(store.clone(), stream).await?),
        None => None,
    };
    let worker = Worker::new(store, registry, cfg)?;
    eprintln!("docket: worker {} serving {:?}", worker.owner(), a.queues);
    let shutdown = Shutdown::on_signals();
    // Stops with the worker's first signal, or once the worker itself has stopped.
    let relay_stop = shutdown.graceful.child_token();
    let relay = relay.map(|r| tokio::spawn(r.run(relay_stop.clone())));
    let report = if a.drain {
        worker.drain(shutdown).await?
    } else {
        worker.run(shutdown).await?
    };
    if let Some(r) = relay {
        // The relay finishes the pass it is in (its acknowledgements and their mark).
        relay_stop.cancel();
        let _ = r.await;
    }
    eprintln!(
        "docket: worker stopped: {} succeeded, {} failed, {} released, {} fenced",
        report.metrics.completed,
        report.metrics.failed,
        report.metrics.released,
        report.metrics.fenced
    );
    Ok(())
}
