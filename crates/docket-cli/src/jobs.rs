//! `docket jobs list|show|retry|cancel|skip|why|output|signal`.

use comfy_table::Cell;
use docket_core::{Gate, JobFilter, JobId, JobState, Store, WhyReport};

use crate::audit;
use crate::cli::{exit, JobsCommand, OutputArgs, SignalArgs};
use crate::engine::Open;
use crate::fail::CliError;
use crate::output;

/// `docket jobs why` for a person: one line per gate, every value from job data escaped.
fn why_text(r: &WhyReport) -> String {
    let q = output::safe(&r.queue);
    let mut out = if r.next_up() {
        format!(
            "job {} (queue {q}) is pending and next: the next claim of its queue takes it\n",
            r.id
        )
    } else if let [Gate::NotPending { state }] = r.gates.as_slice() {
        return format!("job {} (queue {q}) is {state}, not waiting to run\n", r.id);
    } else {
        format!("job {} (queue {q}) is pending, held by:\n", r.id)
    };
    for g in &r.gates {
        let line = output::safe(&g.describe(&r.queue));
        out.push_str(&format!("  - {line}\n"));
    }
    out
}

/// JSON for a person: pretty-printed, each line made terminal-safe (serde escapes the C0
/// controls inside strings; C1 controls and bidirectional overrides are escaped here).
fn pretty(v: &serde_json::Value) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(v)?;
    Ok(text
        .lines()
        .map(output::safe)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// `docket jobs output ID [--wait D] [--json]`.
async fn show_output(ctx: &impl Open, a: OutputArgs) -> anyhow::Result<()> {
    use docket_worker::{OutputError, Outputs};
    let wait = a
        .wait
        .as_deref()
        .map(|w| {
            docket_core::duration::parse_bounded(
                "wait",
                w,
                std::time::Duration::ZERO,
                docket_core::duration::MAX_DELAY,
            )
            .map_err(|e| CliError::invalid(e.to_string()))
        })
        .transpose()?;
    // A wait listens on a connection of its own besides the one that reads.
    let store = Open::existing(ctx, if wait.is_some() { 2 } else { 1 }).await?;
    let id = JobId(a.id);
    if let Some(w) = wait {
        match store.wait_output::<serde_json::Value>(id, w).await {
            Ok(_) | Err(OutputError::Ended { .. } | OutputError::TimedOut { .. }) => {}
            Err(OutputError::Store(e)) => return Err(e.into()),
            Err(e) => return Err(e.into()),
        }
    }
    let o = store.job_output(id).await?;
    if a.json {
        return output::json(&serde_json::json!({
            "id": id,
            "state": o.state,
            "finished_at": o.finished_at,
            "output": o.output,
        }));
    }
    match (o.state, &o.output) {
        (_, Some(v)) => println!("{}", pretty(v)?),
        (JobState::Waiting | JobState::Pending | JobState::Running, None) => {
            return Err(CliError::new(
                exit::CONFLICT,
                format!("job {id} is {}: no output yet", o.state.as_str()),
            )
            .hint("--wait 30s waits for it")
            .into())
        }
        (state, None) => {
            return Err(CliError::new(
                exit::CONFLICT,
                format!("job {id} ended {} without an output", state.as_str()),
            )
            .hint(format!("`docket jobs show {id}` shows its errors"))
            .into())
        }
    }
    Ok(())
}

/// `docket jobs signal ID NAME [--payload JSON] [--json]`.
async fn send_signal(ctx: &impl Open, a: SignalArgs) -> anyhow::Result<()> {
    let payload = match a.payload.as_deref() {
        None => serde_json::Value::Null,
        Some(p) => serde_json::from_str(p)
            .map_err(|e| CliError::invalid(format!("--payload is not one JSON document: {e}")))?,
    };
    docket_core::signals::check(&a.name, &payload).map_err(|e| CliError::invalid(e.to_string()))?;
    let store = Open::existing(ctx, 1).await?;
    let id = JobId(a.id);
    let sent = store.signal(id, &a.name, &payload).await?;
    // The name, not the payload: a payload may carry what the log's readers must not see.
    let detail = serde_json::json!({"name": a.name, "new": sent.new, "woke": sent.woke});
    audit::record(&store, "job.signal", id.to_string(), detail).await;
    if a.json {
        return output::json(
            &serde_json::json!({"id": id, "name": a.name, "new": sent.new, "woke": sent.woke}),
        );
    }
    let name = output::safe(&a.name);
    match (sent.new, sent.woke) {
        (false, _) => println!("job {id} already had signal {name}: nothing changed"),
        (true, true) => println!("signal {name} sent to job {id}; it was waiting and runs now"),
        (true, false) => println!("signal {name} sent to job {id}; its wait will find it"),
    }
    Ok(())
}

/// `docket jobs list` with the dashboard's filters: the same parser
/// ([`docket_core::JobQuery::from_fields`]) and the same keyset pages, walked until `--limit`
/// jobs are found or the filter is exhausted. Bad filters are exit 5 before any query.
async fn list_search(ctx: &impl Open, a: crate::cli::ListArgs) -> anyhow::Result<()> {
    if !(1..=100_000).contains(&a.limit) {
        return Err(CliError::invalid("--limit must be 1..=100000").into());
    }
    let fields: Vec<(&str, Option<&str>)> = vec![
        ("queue", a.queue.as_deref()),
        ("state", a.state.as_deref()),
        ("kind", a.kind.as_deref()),
        ("priority", a.priority.as_deref()),
        ("since", a.since.as_deref()),
        ("until", a.until.as_deref()),
        ("ordering_key", a.ordering_key.as_deref()),
        ("concurrency_key", a.concurrency_key.as_deref()),
        ("field", a.field.as_deref()),
        ("error", a.error.as_deref()),
    ];
    let get = |k: &str| fields.iter().find(|(n, _)| *n == k).and_then(|(_, v)| *v);
    let mut q = docket_core::JobQuery::from_fields(get).map_err(CliError::invalid)?;
    q.limit = a.limit.min(docket_core::MAX_PAGE);
    let store = Open::existing(ctx, 1).await?;
    let mut jobs = Vec::new();
    // A filter no index serves reads bounded windows; this bounds how many it reads in all.
    for _ in 0..1000 {
        let page = store.search(&q).await?;
        jobs.extend(page.jobs);
        match page.next {
            Some(n) if (jobs.len() as i64) < a.limit => {
                q.before = Some(n);
                q.before_finished_at = page.next_finished_at;
            }
            _ => break,
        }
    }
    jobs.truncate(a.limit as usize);
    if a.json {
        output::json(&jobs)?;
    } else {
        println!("{}", output::jobs_table(&jobs));
    }
    Ok(())
}

pub async fn run(ctx: &impl Open, cmd: JobsCommand) -> anyhow::Result<()> {
    match cmd {
        JobsCommand::Signal(a) => send_signal(ctx, a).await?,
        JobsCommand::Output(a) => show_output(ctx, a).await?,
        JobsCommand::List(a) if a.has_search_filters() => list_search(ctx, a).await?,
        JobsCommand::List(a) => {
            let state = a
                .state
                .as_deref()
                .map(|s| s.parse::<JobState>())
                .transpose()
                .map_err(|e| CliError::invalid(e.to_string()))?;
            if let Some(q) = &a.queue {
                docket_core::validate::queue(q).map_err(|e| CliError::invalid(e.to_string()))?;
            }
            if !(1..=100_000).contains(&a.limit) {
                return Err(CliError::invalid("--limit must be 1..=100000").into());
            }
            let store = Open::existing(ctx, 1).await?;
            let jobs = store
                .list(&JobFilter {
                    queue: a.queue,
                    state,
                    limit: a.limit,
                })
                .await?;
            if a.json {
                output::json(&jobs)?;
            } else {
                println!("{}", output::jobs_table(&jobs));
            }
        }
        JobsCommand::Show(a) => {
            let store = Open::existing(ctx, 1).await?;
            let j = store.get(JobId(a.id)).await?;
            if a.json {
                output::json(&j)?;
            } else {
                let mut t = output::table(&["field", "value"]);
                let opt = |t: &Option<chrono::DateTime<chrono::Utc>>| {
                    t.as_ref().map(output::time).unwrap_or_default()
                };
                t.add_row(vec![Cell::new("id"), Cell::new(j.id)]);
                t.add_row(vec![
                    Cell::new("queue / kind"),
                    Cell::new(output::safe(&format!("{} / {}", j.queue, j.kind))),
                ]);
                t.add_row(vec![Cell::new("state"), output::state_cell(j.state)]);
                t.add_row(vec![
                    Cell::new("attempt"),
                    Cell::new(format!("{} of {}", j.runs(), j.max_runs())),
                ]);
                t.add_row(vec![Cell::new("priority"), Cell::new(j.priority)]);
                t.add_row(vec![
                    Cell::new("run_at"),
                    Cell::new(output::time(&j.run_at)),
                ]);
                t.add_row(vec![
                    Cell::new("created_at"),
                    Cell::new(output::time(&j.created_at)),
                ]);
                t.add_row(vec![
                    Cell::new("finished_at"),
                    Cell::new(opt(&j.finished_at)),
                ]);
                t.add_row(vec![
                    Cell::new("lease"),
                    Cell::new(match (&j.lease_owner, &j.lease_expires_at) {
                        (Some(o), Some(e)) => {
                            format!("{} until {}", output::safe(o), output::time(e))
                        }
                        _ => String::new(),
                    }),
                ]);
                t.add_row(vec![
                    Cell::new("unique_key"),
                    Cell::new(output::safe(j.unique_key.as_deref().unwrap_or_default())),
                ]);
                t.add_row(vec![
                    Cell::new("args"),
                    Cell::new(output::preview(&j.args, 2000)),
                ]);
                t.add_row(vec![
                    Cell::new("metadata"),
                    Cell::new(output::preview(&j.metadata, 500)),
                ]);
                if let Some(p) = &j.progress {
                    t.add_row(vec![
                        Cell::new("progress"),
                        Cell::new(format!(
                            "{:.1}% {} (at {})",
                            p.percent,
                            output::safe(&p.message),
                            output::time(&p.at)
                        )),
                    ]);
                }
                if j.state == JobState::Succeeded {
                    if let Some(v) = store.job_output(j.id).await?.output {
                        t.add_row(vec![
                            Cell::new("output"),
                            Cell::new(output::preview(&v, 2000)),
                        ]);
                    }
                }
                if !j.invalid.is_empty() {
                    t.add_row(vec![
                        Cell::new("INVALID ROW"),
                        Cell::new(output::safe(&j.invalid.join("; "))),
                    ]);
                }
                println!("{t}");
                if !j.errors.is_empty() {
                    let mut e = output::table(&["attempt", "at", "class", "owner", "message"]);
                    for err in &j.errors {
                        e.add_row(vec![
                            Cell::new(err.attempt),
                            Cell::new(output::time(&err.at)),
                            Cell::new(output::safe(&err.class)),
                            Cell::new(output::safe(err.owner.as_deref().unwrap_or_default())),
                            Cell::new(output::safe(&err.message)),
                        ]);
                    }
                    println!("errors:\n{e}");
                }
                let steps = store.job_steps(j.id).await?;
                if !steps.is_empty() {
                    let mut t = output::table(&["step", "run", "recorded", "output"]);
                    for s in &steps {
                        t.add_row(vec![
                            Cell::new(output::safe(&s.name)),
                            Cell::new(s.attempt),
                            Cell::new(output::time(&s.recorded_at)),
                            Cell::new(output::preview(&s.output, 200)),
                        ]);
                    }
                    println!("steps:\n{t}");
                }
            }
        }
        JobsCommand::Retry(a) => {
            let store = Open::existing(ctx, 1).await?;
            let j = store.retry(JobId(a.id), a.extra_attempts).await?;
            let detail = serde_json::json!({"extra_attempts": a.extra_attempts});
            audit::record(&store, "job.retry", a.id.to_string(), detail).await;
            if a.json {
                output::json(&j)?;
            } else {
                println!(
                    "job {} is pending again ({} more attempt(s))",
                    j.id, a.extra_attempts
                );
            }
        }
        JobsCommand::Skip(a) => {
            let store = Open::existing(ctx, 1).await?;
            let j = store.skip(JobId(a.id)).await?;
            audit::record(&store, "job.skip", a.id.to_string(), serde_json::json!({})).await;
            if a.json {
                output::json(&j)?;
            } else {
                // Keys are job data: escaped for the terminal.
                let key = output::safe(j.ordering_key.as_deref().unwrap_or("-"));
                println!(
                    "job {} skipped (now cancelled); ordering key {key} moves on",
                    a.id
                );
            }
        }
        JobsCommand::Why(a) => {
            let store = Open::existing(ctx, 1).await?;
            let r = store.why(JobId(a.id)).await?;
            if a.json {
                output::json(&r)?;
            } else {
                print!("{}", why_text(&r));
            }
        }
        JobsCommand::Cancel(a) => {
            let store = Open::existing(ctx, 1).await?;
            let out = store.cancel(JobId(a.id)).await?;
            let detail = serde_json::json!({"outcome": out});
            audit::record(&store, "job.cancel", a.id.to_string(), detail).await;
            if a.json {
                output::json(&serde_json::json!({"id": a.id, "outcome": out}))?;
            } else {
                match out {
                    docket_core::CancelOutcome::Cancelled => println!("job {} cancelled", a.id),
                    docket_core::CancelOutcome::Requested => {
                        println!("job {} is running; its worker was asked to stop it", a.id)
                    }
                }
            }
        }
    }
    Ok(())
}
