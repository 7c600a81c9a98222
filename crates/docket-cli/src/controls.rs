//! `docket queues|keys|cron`: scheduling controls and periodic jobs.

use comfy_table::Cell;
use docket_core::{KeyLimit, MissedTicks, Periodic, QueueControl, QueueLimits, RateLimit, Store};

use crate::cli::{CronCommand, KeysCommand, QueuesCommand};
use crate::engine::Open;
use crate::fail::CliError;
use crate::output;

/// A flag that keeps (absent), clears (`none`) or sets a value.
fn cap(flag: &str, v: Option<&str>, current: Option<i32>) -> Result<Option<i32>, CliError> {
    match v {
        None => Ok(current),
        Some("none") => Ok(None),
        Some(s) => s.parse::<i32>().map(Some).map_err(|_| {
            CliError::invalid(format!("--{flag} {s:?}: expected a whole number or none"))
        }),
    }
}

fn rate(v: Option<&str>, current: Option<RateLimit>) -> Result<Option<RateLimit>, CliError> {
    match v {
        None => Ok(current),
        Some("none") => Ok(None),
        Some(s) => s
            .parse::<RateLimit>()
            .map(Some)
            .map_err(|e| CliError::invalid(e.to_string())),
    }
}

fn show_or(v: Option<impl ToString>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn print_controls(list: &[QueueControl]) {
    let mut t = output::table(&[
        "queue",
        "paused",
        "max running",
        "per key",
        "rate",
        "tokens",
    ]);
    for c in list {
        t.add_row(vec![
            Cell::new(output::safe(&c.queue)),
            Cell::new(c.paused_at.as_ref().map(output::time).unwrap_or_default()),
            Cell::new(show_or(c.limits.max_running)),
            Cell::new(show_or(c.limits.key_max_running)),
            Cell::new(show_or(c.limits.rate)),
            Cell::new(c.tokens.map(|t| format!("{t:.1}")).unwrap_or_default()),
        ]);
    }
    println!("{t}");
}

pub async fn queues(ctx: &impl Open, cmd: QueuesCommand) -> anyhow::Result<()> {
    let check =
        |q: &str| docket_core::validate::queue(q).map_err(|e| CliError::invalid(e.to_string()));
    match cmd {
        QueuesCommand::List(a) => {
            let list = Open::existing(ctx, 1).await?.queue_controls().await?;
            if a.json {
                output::json(&list)?;
            } else {
                print_controls(&list);
            }
        }
        QueuesCommand::Pause(a) => {
            check(&a.queue)?;
            let c = Open::existing(ctx, 1).await?.pause_queue(&a.queue).await?;
            if a.json {
                output::json(&c)?;
            } else {
                println!(
                    "queue {} paused: no worker claims from it until resumed",
                    a.queue
                );
            }
        }
        QueuesCommand::Resume(a) => {
            check(&a.queue)?;
            let c = Open::existing(ctx, 1).await?.resume_queue(&a.queue).await?;
            if a.json {
                output::json(&c)?;
            } else {
                println!("queue {} resumed", a.queue);
            }
        }
        QueuesCommand::Limit(a) => {
            check(&a.queue)?;
            if a.max_running.is_none() && a.key_max_running.is_none() && a.rate.is_none() {
                return Err(CliError::invalid(
                    "give at least one of --max-running, --key-max-running, --rate",
                )
                .into());
            }
            // Parse what can be parsed before connecting: bad input never touches the database.
            cap("max-running", a.max_running.as_deref(), None)?;
            cap("key-max-running", a.key_max_running.as_deref(), None)?;
            rate(a.rate.as_deref(), None)?;
            let store = Open::existing(ctx, 1).await?;
            let cur = store
                .queue_controls()
                .await?
                .into_iter()
                .find(|c| c.queue == a.queue)
                .map(|c| c.limits)
                .unwrap_or_default();
            let limits = QueueLimits {
                max_running: cap("max-running", a.max_running.as_deref(), cur.max_running)?,
                key_max_running: cap(
                    "key-max-running",
                    a.key_max_running.as_deref(),
                    cur.key_max_running,
                )?,
                rate: rate(a.rate.as_deref(), cur.rate)?,
            };
            limits
                .validate()
                .map_err(|e| CliError::invalid(e.to_string()))?;
            let c = store.set_queue_limits(&a.queue, &limits).await?;
            if a.json {
                output::json(&c)?;
            } else {
                print_controls(&[c]);
            }
        }
    }
    Ok(())
}

pub async fn keys(ctx: &impl Open, cmd: KeysCommand) -> anyhow::Result<()> {
    match cmd {
        KeysCommand::List(a) => {
            let list = Open::existing(ctx, 1).await?.key_limits().await?;
            if a.json {
                output::json(&list)?;
            } else {
                let mut t = output::table(&["key", "max running", "rate"]);
                for k in &list {
                    t.add_row(vec![
                        Cell::new(output::safe(&k.key)),
                        Cell::new(show_or(k.max_running)),
                        Cell::new(show_or(k.rate)),
                    ]);
                }
                println!("{t}");
            }
        }
        KeysCommand::Limit(a) => {
            if a.max_running.is_none() && a.rate.is_none() {
                return Err(CliError::invalid("give --max-running and/or --rate").into());
            }
            cap("max-running", a.max_running.as_deref(), None)?;
            rate(a.rate.as_deref(), None)?;
            docket_core::validate::key("concurrency key", Some(&a.key))
                .map_err(|e| CliError::invalid(e.to_string()))?;
            let store = Open::existing(ctx, 1).await?;
            let cur = store
                .key_limits()
                .await?
                .into_iter()
                .find(|k| k.key == a.key);
            let limit = KeyLimit {
                key: a.key.clone(),
                max_running: cap(
                    "max-running",
                    a.max_running.as_deref(),
                    cur.as_ref().and_then(|c| c.max_running),
                )?,
                rate: rate(a.rate.as_deref(), cur.as_ref().and_then(|c| c.rate))?,
            };
            limit
                .validate()
                .map_err(|e| CliError::invalid(e.to_string()))?;
            store.set_key_limit(&limit).await?;
            if a.json {
                output::json(&limit)?;
            } else if limit.max_running.is_none() && limit.rate.is_none() {
                println!("key {} has no limits any more", output::safe(&a.key));
            } else {
                println!(
                    "key {}: max running {}, rate {}",
                    output::safe(&a.key),
                    show_or(limit.max_running),
                    show_or(limit.rate)
                );
            }
        }
        KeysCommand::Blocked(a) => {
            if !(1..=100_000).contains(&a.limit) {
                return Err(CliError::invalid("--limit must be 1..=100000").into());
            }
            let list = Open::existing(ctx, 1).await?.blocked_keys(a.limit).await?;
            if a.json {
                output::json(&list)?;
            } else if list.is_empty() {
                println!("no ordering key is blocked by a dead job");
            } else {
                let mut t =
                    output::table(&["key", "dead head", "queue / kind", "dead since", "waiting"]);
                for b in &list {
                    t.add_row(vec![
                        Cell::new(output::safe(&b.key)),
                        Cell::new(b.head),
                        Cell::new(format!("{} / {}", b.queue, b.kind)),
                        Cell::new(b.dead_since.as_ref().map(output::time).unwrap_or_default()),
                        Cell::new(b.waiting),
                    ]);
                }
                println!("{t}");
                println!("fix: docket jobs retry <dead head>   or   docket jobs skip <dead head>");
            }
        }
    }
    Ok(())
}

pub async fn cron(ctx: &impl Open, cmd: CronCommand) -> anyhow::Result<()> {
    match cmd {
        CronCommand::List(a) => {
            let list = Open::existing(ctx, 1).await?.list_periodic().await?;
            if a.json {
                output::json(&list)?;
            } else {
                let mut t = output::table(&[
                    "name",
                    "cron",
                    "time zone",
                    "queue / kind",
                    "missed",
                    "next tick",
                    "last tick",
                    "last job",
                ]);
                for p in &list {
                    t.add_row(vec![
                        Cell::new(&p.def.name),
                        Cell::new(&p.def.cron),
                        Cell::new(&p.def.timezone),
                        Cell::new(format!("{} / {}", p.def.queue, p.def.kind)),
                        Cell::new(p.def.missed.as_str()),
                        Cell::new(output::time(&p.next_tick_at)),
                        Cell::new(
                            p.last_tick_at
                                .as_ref()
                                .map(output::time)
                                .unwrap_or_default(),
                        ),
                        Cell::new(show_or(p.last_job)),
                    ]);
                }
                println!("{t}");
            }
        }
        CronCommand::Add(a) => {
            let args: serde_json::Value = serde_json::from_str(&a.args)
                .map_err(|e| CliError::invalid(format!("--args is not valid JSON: {e}")))?;
            let missed: MissedTicks = a
                .missed
                .parse()
                .map_err(|e: docket_core::ValidationError| CliError::invalid(e.to_string()))?;
            let mut def = Periodic::new(&a.name, &a.cron, &a.queue, &a.kind, args)
                .timezone(&a.tz)
                .missed(missed);
            def.priority = a.priority;
            def.max_attempts = a.max_attempts;
            def.schedule()
                .map_err(|e| CliError::invalid(e.to_string()))?;
            let store = Open::existing(ctx, 1).await?;
            if !a.replace
                && store
                    .list_periodic()
                    .await?
                    .iter()
                    .any(|p| p.def.name == a.name)
            {
                return Err(CliError::new(
                    crate::cli::exit::CONFLICT,
                    format!(
                        "a periodic job named {} exists; nothing was changed",
                        output::safe(&a.name)
                    ),
                )
                .hint("docket cron add ... --replace to replace it")
                .into());
            }
            let st = store.upsert_periodic(&def).await?;
            if a.json {
                output::json(&st)?;
            } else {
                println!(
                    "periodic {} ({} in {}): next tick {}",
                    output::safe(&a.name),
                    output::safe(&a.cron),
                    output::safe(&a.tz),
                    output::time(&st.next_tick_at)
                );
            }
        }
        CronCommand::Remove(a) => {
            let removed = Open::existing(ctx, 1)
                .await?
                .remove_periodic(&a.name)
                .await?;
            if a.json {
                output::json(&serde_json::json!({"name": a.name, "removed": removed}))?;
            } else if removed {
                println!("periodic {} removed", output::safe(&a.name));
            } else {
                return Err(CliError::new(
                    crate::cli::exit::NOT_FOUND,
                    format!("no periodic job named {:?}", a.name),
                )
                .into());
            }
        }
    }
    Ok(())
}
