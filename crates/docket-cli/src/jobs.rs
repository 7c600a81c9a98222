//! `docket jobs list|show|retry|cancel|skip|why`.

use comfy_table::Cell;
use docket_core::{Gate, JobFilter, JobId, JobState, Store, WhyReport};

use crate::cli::JobsCommand;
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

pub async fn run(ctx: &impl Open, cmd: JobsCommand) -> anyhow::Result<()> {
    match cmd {
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
            }
        }
        JobsCommand::Retry(a) => {
            let store = Open::existing(ctx, 1).await?;
            let j = store.retry(JobId(a.id), a.extra_attempts).await?;
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
