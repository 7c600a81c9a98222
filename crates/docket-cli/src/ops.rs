//! Operator commands: stats, workers, reap, prune, explain, lab, embedded.

use docket_core::WorkerStatus;
use std::time::Duration;

use crate::engine::Open;
use crate::lab::{self, LabMode};
use comfy_table::Cell;
use docket_core::duration::{parse_bounded, MAX_DELAY};
use docket_core::{Retention, Store};

use crate::cli::{EmbeddedCommand, ExplainArgs, LabArgs, LabModeArg, PruneArgs};
use crate::fail::CliError;
use crate::{embedded, output, Ctx};

fn age(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120.0 => format!("{s:.1}s"),
        Some(s) if s < 7200.0 => format!("{:.1}m", s / 60.0),
        Some(s) => format!("{:.1}h", s / 3600.0),
    }
}

pub async fn stats(ctx: &impl Open, json: bool) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let s = store.stats().await?;
    if json {
        return output::json(&s);
    }
    let mut t = output::table(&[
        "queue",
        "paused",
        "ready",
        "pending",
        "blocked",
        "running",
        "expiring",
        "expired",
        "succeeded",
        "dead",
        "cancelled",
        "oldest ready",
        "oldest waiting",
        "oldest dead",
    ]);
    for q in &s.queues {
        t.add_row(vec![
            Cell::new(output::safe(&q.queue)),
            Cell::new(if q.paused { "paused" } else { "" }),
            Cell::new(q.ready),
            Cell::new(q.pending),
            Cell::new(q.blocked),
            Cell::new(q.running),
            Cell::new(q.running_near_expiry),
            Cell::new(q.running_expired),
            Cell::new(q.succeeded),
            Cell::new(q.dead),
            Cell::new(q.cancelled),
            Cell::new(age(q.oldest_ready_age_s)),
            Cell::new(age(q.oldest_waiting_age_s)),
            Cell::new(age(q.oldest_dead_age_s)),
        ]);
    }
    println!("{t}");
    // Engine-specific (PostgreSQL's vacuum statistics); absent on other engines.
    if let Some(tb) = &s.table {
        println!(
            "jobs table: {} live / {} dead tuples, {:.1} MiB, last vacuum {}, last autovacuum {}",
            tb.live_tuples,
            tb.dead_tuples,
            tb.total_bytes as f64 / 1048576.0,
            tb.last_vacuum
                .as_ref()
                .map(output::time)
                .unwrap_or_else(|| "never".into()),
            tb.last_autovacuum
                .as_ref()
                .map(output::time)
                .unwrap_or_else(|| "never".into()),
        );
    }
    Ok(())
}

/// `docket workers`: the live workers from the registry (each reports itself every
/// `presence_interval` and expires three intervals after its last report); with `--gone
/// WINDOW` also the workers gone within it, how each ended, and the leadership lease.
pub async fn workers(ctx: &impl Open, a: crate::cli::WorkersArgs) -> anyhow::Result<()> {
    let window = a
        .gone
        .as_deref()
        .map(|g| {
            docket_core::duration::parse_bounded(
                "gone",
                g,
                Duration::from_secs(1),
                Duration::from_secs(7 * 86_400),
            )
        })
        .transpose()
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let store = Open::existing(ctx, 1).await?;
    let reg = store.registry(window.unwrap_or(Duration::ZERO)).await?;
    let now = reg.now;
    let list: Vec<_> = reg
        .workers
        .iter()
        .filter(|w| window.is_some() || w.status(now) == WorkerStatus::Live)
        .collect();
    if a.json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|w| {
                let mut v = serde_json::to_value(w).unwrap_or_default();
                v["status"] = serde_json::to_value(w.status(now)).unwrap_or_default();
                v
            })
            .collect();
        // The same array as without --gone, each entry with its status.
        return output::json(&rows);
    }
    let mut t = output::table(&[
        "owner",
        "host",
        "pid",
        "queues",
        "slots",
        "executing",
        "buffered",
        "started",
        "seen",
        "status",
        "leader",
    ]);
    for w in &list {
        let b = &w.beat;
        let status = match w.status(now) {
            WorkerStatus::Live => "live".to_string(),
            WorkerStatus::Stopped(at) => format!("stopped {}", output::time(&at)),
            WorkerStatus::Expired(at) => {
                format!(
                    "gone, no report since {} (lease expired)",
                    output::time(&at)
                )
            }
        };
        t.add_row(vec![
            Cell::new(output::safe(&b.owner)),
            Cell::new(output::safe(&b.host)),
            Cell::new(b.pid),
            Cell::new(output::safe(&b.queues.join(","))),
            Cell::new(b.concurrency),
            Cell::new(b.in_flight.saturating_sub(b.buffered)),
            Cell::new(b.buffered),
            Cell::new(output::time(&w.started_at)),
            Cell::new(output::time(&w.seen_at)),
            Cell::new(status),
            Cell::new(if w.leader { "leader" } else { "" }),
        ]);
    }
    println!("{t}");
    if window.is_some() {
        match &reg.leader {
            Some(l) if l.expires_at > now => println!(
                "leader: {} (lease until {})",
                output::safe(&l.owner),
                output::time(&l.expires_at)
            ),
            Some(l) => println!(
                "leader: none live; the last, {}, lost its lease at {}",
                output::safe(&l.owner),
                output::time(&l.expires_at)
            ),
            None => println!("leader: nobody has led yet"),
        }
    }
    Ok(())
}

pub async fn reap(ctx: &impl Open, json: bool) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let mut all = docket_core::ReapReport::default();
    loop {
        let r = store.reap(1000).await?;
        let n = r.jobs.len();
        all.jobs.extend(r.jobs);
        if n < 1000 {
            break;
        }
    }
    if json {
        output::json(&serde_json::json!({
            "requeued": all.requeued(), "dead": all.dead(), "cancelled": all.cancelled(), "jobs": all.jobs
        }))
    } else {
        println!(
            "requeued {}, dead {}, cancelled {}",
            all.requeued(),
            all.dead(),
            all.cancelled()
        );
        Ok(())
    }
}

pub async fn prune(ctx: &impl Open, a: PruneArgs) -> anyhow::Result<()> {
    let parse = |what, s: &str| {
        parse_bounded(what, s, Duration::ZERO, MAX_DELAY)
            .map_err(|e| CliError::invalid(e.to_string()))
    };
    let retention = Retention {
        finished: parse("older-than", &a.older_than)?,
        dead: parse("dead-older-than", &a.dead_older_than)?,
        outputs: parse("outputs-older-than", &a.outputs_older_than)?,
        batch: 5_000,
    };
    let store = Open::existing(ctx, 1).await?;
    let r = store.prune(&retention).await?;
    if a.json {
        output::json(&r)
    } else {
        println!("deleted {} finished and {} dead job(s)", r.finished, r.dead);
        Ok(())
    }
}

pub async fn explain(ctx: &Ctx, a: ExplainArgs) -> anyhow::Result<()> {
    docket_core::validate::queue(&a.queue).map_err(|e| CliError::invalid(e.to_string()))?;
    let store = Open::existing(ctx, 1).await?;
    println!("{}", store.explain_claim(&a.queue, a.analyze).await?);
    Ok(())
}

pub async fn lab(ctx: &Ctx, a: LabArgs) -> anyhow::Result<()> {
    if a.jobs == 0 || a.jobs > 10_000_000 || a.workers == 0 || a.workers > 128 {
        return Err(CliError::invalid("--jobs must be 1..=10000000 and --workers 1..=128").into());
    }
    // The experiment gets a schema of its own: it never touches real jobs.
    let lab_ctx = Ctx {
        url: ctx.url.clone(),
        schema: format!("{}_lab", ctx.schema),
    };
    let store = lab_ctx.store(a.workers as u32 + 1).await?;
    let mode = match a.mode {
        LabModeArg::Naive => LabMode::Naive,
        LabModeArg::ForUpdate => LabMode::ForUpdate,
        LabModeArg::SkipLocked => LabMode::SkipLocked,
    };
    let r = lab::run(&store, mode, a.jobs, a.workers).await?;
    if a.json {
        return output::json(&r);
    }
    println!(
        "{:?}: {} of {} jobs done by {} workers in {:.2}s; claimed more than once: {}; highest claim count: {}; claims in total: {}",
        r.mode, r.done, r.jobs, r.workers, r.seconds, r.duplicated, r.max_claims, r.total_claims
    );
    let verdict = match mode {
        LabMode::Naive if r.duplicated > 0 => {
            "lost/duplicated work: concurrent workers picked the same row"
        }
        LabMode::Naive => "no duplicates this time (too little contention); try more --workers",
        LabMode::ForUpdate => "correct, but workers queued behind each other's row locks",
        LabMode::SkipLocked => "every job done exactly once, no waiting",
    };
    println!("{verdict}");
    Ok(())
}

pub async fn embedded(cmd: &EmbeddedCommand) -> anyhow::Result<()> {
    match cmd {
        EmbeddedCommand::Start => {
            let url = embedded::ensure_running()?;
            println!("{url}");
        }
        EmbeddedCommand::Stop => {
            if embedded::stop()? {
                println!("stopped");
            } else {
                println!("not running");
            }
        }
        EmbeddedCommand::Status(a) => {
            let s = embedded::status()?;
            if a.json {
                output::json(&s)?;
            } else {
                println!(
                    "home {}: {}{}",
                    s.home,
                    if !s.initialized {
                        "not created"
                    } else if s.running {
                        "running"
                    } else {
                        "stopped"
                    },
                    s.url.map(|u| format!(" at {u}")).unwrap_or_default()
                );
            }
        }
    }
    Ok(())
}

/// `docket grant`: the least-privilege roles of this schema.
pub async fn grant(ctx: &Ctx, a: crate::cli::GrantArgs) -> anyhow::Result<()> {
    let mut roles = docket_postgres::roles::Roles::for_schema(&ctx.schema);
    if let Some(r) = a.app {
        roles.app = r;
    }
    if let Some(r) = a.worker {
        roles.worker = r;
    }
    if let Some(r) = a.operator {
        roles.operator = r;
    }
    let sql = docket_postgres::roles::grant_script(&ctx.schema, &roles)
        .map_err(|e| CliError::invalid(e.to_string()))?;
    if a.print {
        print!("{sql}");
        return Ok(());
    }
    let store = ctx.store(1).await?;
    store.grant(&roles).await?;
    println!(
        "granted on schema {}: {} (enqueue only), {} (worker), {} (read-only); add login roles with GRANT {} TO <user>",
        ctx.schema, roles.app, roles.worker, roles.operator, roles.app
    );
    Ok(())
}
