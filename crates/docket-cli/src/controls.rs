//! `docket queues|keys|cron`: scheduling controls and periodic jobs.

use comfy_table::Cell;
use docket_core::{KeyLimit, MissedTicks, Periodic, QueueControl, QueueLimits, RateLimit, Store};

use crate::audit;
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

/// Refuses a queue nobody knows — no pending, running, blocked or dead job, no stored
/// controls, no live worker serving it — unless `new`: `docket queues pause emial` would
/// otherwise pause nothing, exit 0 and leave a row behind. Read from the bounded overview
/// (index probes per queue, never a count of the table).
async fn known_queue(store: &impl Store, queue: &str, new: bool) -> anyhow::Result<()> {
    if new {
        return Ok(());
    }
    let o = store.overview(1).await?;
    if o.queues.iter().any(|q| q.queue == queue) {
        return Ok(());
    }
    let mut names: Vec<&str> = o.queues.iter().map(|q| q.queue.as_str()).collect();
    names.truncate(20);
    Err(CliError::invalid(format!(
        "no queue {} is known (no pending, running or dead job, no stored controls, no live worker)",
        output::safe(queue)
    ))
    .hint(if names.is_empty() {
        "add --new to set it up before any job arrives".to_string()
    } else {
        format!(
            "known queues: {}; add --new to set up a queue before any job arrives",
            output::safe(&names.join(", "))
        )
    })
    .into())
}

/// A control's values for the audit log's before/after.
fn control_json(c: Option<&QueueControl>) -> serde_json::Value {
    match c {
        None => serde_json::Value::Null,
        Some(c) => serde_json::json!({
            "paused": c.paused_at.is_some(),
            "max_running": c.limits.max_running,
            "key_max_running": c.limits.key_max_running,
            "rate": c.limits.rate.map(|r| r.to_string()),
        }),
    }
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
            let store = Open::existing(ctx, 1).await?;
            known_queue(&store, &a.queue, a.new).await?;
            let c = store.pause_queue(&a.queue).await?;
            audit::record(&store, "queue.pause", &a.queue, serde_json::json!({})).await;
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
            let store = Open::existing(ctx, 1).await?;
            let c = store.resume_queue(&a.queue).await?;
            audit::record(&store, "queue.resume", &a.queue, serde_json::json!({})).await;
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
            known_queue(&store, &a.queue, a.new).await?;
            let before = store
                .queue_controls()
                .await?
                .into_iter()
                .find(|c| c.queue == a.queue);
            let cur = before.as_ref().map(|c| c.limits).unwrap_or_default();
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
            audit::record(
                &store,
                "queue.limits",
                &a.queue,
                serde_json::json!({"before": control_json(before.as_ref()), "after": control_json(Some(&c))}),
            )
            .await;
            if a.json {
                output::json(&c)?;
            } else {
                print_controls(&[c]);
            }
        }
        QueuesCommand::Remove(a) => {
            check(&a.queue)?;
            let store = Open::existing(ctx, 1).await?;
            let before = store
                .queue_controls()
                .await?
                .into_iter()
                .find(|c| c.queue == a.queue);
            let Some(before) = before else {
                return Err(CliError::new(
                    crate::cli::exit::NOT_FOUND,
                    format!(
                        "queue {} has no stored controls: nothing to remove",
                        output::safe(&a.queue)
                    ),
                )
                .into());
            };
            if !store.remove_queue(&a.queue).await? {
                return Err(CliError::new(
                    crate::cli::exit::CONFLICT,
                    format!(
                        "queue {} still has pending or running jobs: its controls stay",
                        output::safe(&a.queue)
                    ),
                )
                .into());
            }
            audit::record(
                &store,
                "queue.remove",
                &a.queue,
                serde_json::json!({"before": control_json(Some(&before))}),
            )
            .await;
            if a.json {
                output::json(&serde_json::json!({"queue": a.queue, "removed": true}))?;
            } else {
                println!("queue {}: stored controls removed", output::safe(&a.queue));
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
            audit::record(
                &store,
                "key.limits",
                &a.key,
                serde_json::json!({"before": cur, "after": limit}),
            )
            .await;
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
                    "paused",
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
                        Cell::new(p.paused_at.as_ref().map(output::time).unwrap_or_default()),
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
            let detail = serde_json::json!({"cron": a.cron, "tz": a.tz, "queue": def.queue, "kind": def.kind});
            audit::record(&store, "cron.add", &a.name, detail).await;
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
            let store = Open::existing(ctx, 1).await?;
            let removed = store.remove_periodic(&a.name).await?;
            if removed {
                audit::record(&store, "cron.remove", &a.name, serde_json::json!({})).await;
            }
            if a.json {
                output::json(&serde_json::json!({"name": a.name, "removed": removed}))?;
            } else if removed {
                println!("periodic {} removed", output::safe(&a.name));
            } else {
                return Err(no_periodic(&a.name).into());
            }
        }
        CronCommand::Pause(a) => pause_cron(ctx, a, true).await?,
        CronCommand::Resume(a) => pause_cron(ctx, a, false).await?,
        CronCommand::Run(a) => {
            let store = Open::existing(ctx, 1).await?;
            let Some(e) =
                docket_core::periodic::run_now(&store, &a.name, chrono::Utc::now()).await?
            else {
                return Err(no_periodic(&a.name).into());
            };
            audit::record(
                &store,
                "cron.run",
                &a.name,
                serde_json::json!({"job": e.id, "duplicate": e.duplicate}),
            )
            .await;
            if a.json {
                output::json(
                    &serde_json::json!({"name": a.name, "job": e.id, "duplicate": e.duplicate}),
                )?;
            } else {
                println!(
                    "periodic {} enqueued now: job {}",
                    output::safe(&a.name),
                    e.id
                );
            }
        }
    }
    Ok(())
}

/// `docket cron pause|resume NAME`.
async fn pause_cron(
    ctx: &impl Open,
    a: crate::cli::CronNameArg,
    paused: bool,
) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    if !store.pause_periodic(&a.name, paused).await? {
        return Err(no_periodic(&a.name).into());
    }
    let action = if paused { "cron.pause" } else { "cron.resume" };
    audit::record(&store, action, &a.name, serde_json::json!({})).await;
    if a.json {
        output::json(&serde_json::json!({"name": a.name, "paused": paused}))?;
    } else {
        println!(
            "periodic {} {}",
            output::safe(&a.name),
            if paused { "paused" } else { "resumed" }
        );
    }
    Ok(())
}

fn no_periodic(name: &str) -> CliError {
    CliError::new(
        crate::cli::exit::NOT_FOUND,
        format!("no periodic job named {}", output::safe(name)),
    )
}
