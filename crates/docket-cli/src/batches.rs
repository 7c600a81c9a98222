//! `docket batches`: open a batch from a JSON file, add members, close it, read batches.

use clap::{Args, Subcommand};
use comfy_table::Cell;
use docket_core::batches::{check_jobs, BatchSpec, BatchStatus, JobSpec};
use docket_core::{Limits, Store};

use crate::engine::Open;
use crate::fail::CliError;
use crate::output;
use crate::workflows::read_bounded;

/// `docket batches …`.
#[derive(Debug, Subcommand)]
pub enum BatchesCommand {
    /// Open a batch from a JSON file (`-`: standard input), all or nothing: {"name": …,
    /// "jobs": [{"queue", "kind", "args"}, …], "on_success": job, "on_complete": job,
    /// "on_failure": job, "close": true}. With "close": false it stays open for `add` until
    /// `close`. Prints the batch's id and its members' job ids.
    Open(BatchFileArgs),
    /// Add members to an open batch from a JSON file holding an array of jobs.
    Add(BatchAddArgs),
    /// Close a batch: nothing more can be added; its callbacks fire once every member ended.
    Close(BatchIdArgs),
    /// The newest batches: state, members by end, callbacks fired.
    List(BatchListArgs),
    /// One batch: its counts, its callbacks (and their jobs once fired) and its members.
    Show(BatchIdArgs),
}

/// `docket batches open`.
#[derive(Debug, Args)]
pub struct BatchFileArgs {
    /// The batch's JSON file, or `-` for standard input (at most 16 MiB).
    pub file: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket batches add`.
#[derive(Debug, Args)]
pub struct BatchAddArgs {
    /// The batch's id.
    pub id: i64,
    /// A JSON file holding an array of jobs, or `-` for standard input (at most 16 MiB).
    pub file: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket batches close|show`.
#[derive(Debug, Args)]
pub struct BatchIdArgs {
    /// The batch's id.
    pub id: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket batches list`.
#[derive(Debug, Args)]
pub struct BatchListArgs {
    /// How many, 1..=1000.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `docket batches` command.
pub async fn run(ctx: &impl Open, cmd: BatchesCommand) -> anyhow::Result<()> {
    match cmd {
        BatchesCommand::Open(a) => open(ctx, a).await,
        BatchesCommand::Add(a) => add(ctx, a).await,
        BatchesCommand::Close(a) => close(ctx, a).await,
        BatchesCommand::List(a) => list(ctx, a).await,
        BatchesCommand::Show(a) => show(ctx, a).await,
    }
}

const NOTHING: &str = "nothing was enqueued";

/// A missing batch said as one (the store names it as a job id).
fn not_found(id: i64, e: docket_core::StoreError) -> anyhow::Error {
    match e {
        docket_core::StoreError::NotFound(_) => {
            CliError::new(crate::cli::exit::NOT_FOUND, format!("no batch {id}")).into()
        }
        docket_core::StoreError::Invalid(v) => CliError::invalid(v.to_string()).into(),
        e => e.into(),
    }
}

/// The batch in `path`, parsed and checked before any connection is opened.
fn read_spec(path: &str) -> anyhow::Result<BatchSpec> {
    let text = read_bounded(path, "a batch file holds one batch")?;
    let spec = BatchSpec::from_json(&text)
        .map_err(|e| CliError::invalid(format!("{path}: {e}")).hint(NOTHING))?;
    spec.validate(&Limits::default())
        .map_err(|e| CliError::invalid(format!("{path}: {e}")).hint(NOTHING))?;
    Ok(spec)
}

async fn open(ctx: &impl Open, a: BatchFileArgs) -> anyhow::Result<()> {
    let spec = read_spec(&a.file)?;
    let store = ctx.migrated(1).await?;
    let out = store.open_batch(&spec).await?;
    if a.json {
        return output::json(&out);
    }
    let ids: Vec<String> = out.jobs.iter().map(|j| j.0.to_string()).collect();
    let state = if spec.close { "closed" } else { "open" };
    println!(
        "batch {} enqueued ({state}): {} members {}",
        out.id,
        out.jobs.len(),
        ids.join(" ")
    );
    Ok(())
}

async fn add(ctx: &impl Open, a: BatchAddArgs) -> anyhow::Result<()> {
    let text = read_bounded(&a.file, "a file of members holds one array of jobs")?;
    let jobs: Vec<JobSpec> = serde_json::from_str(&text)
        .map_err(|e| CliError::invalid(format!("{}: {e}", a.file)).hint(NOTHING))?;
    check_jobs(&jobs, &Limits::default())
        .map_err(|e| CliError::invalid(format!("{}: {e}", a.file)).hint(NOTHING))?;
    let store = Open::existing(ctx, 1).await?;
    let ids = store
        .add_to_batch(a.id, &jobs)
        .await
        .map_err(|e| not_found(a.id, e))?;
    if a.json {
        return output::json(&serde_json::json!({ "batch": a.id, "jobs": ids }));
    }
    let ids: Vec<String> = ids.iter().map(|j| j.0.to_string()).collect();
    println!(
        "batch {}: {} members added {}",
        a.id,
        ids.len(),
        ids.join(" ")
    );
    Ok(())
}

async fn close(ctx: &impl Open, a: BatchIdArgs) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let b = store
        .close_batch(a.id)
        .await
        .map_err(|e| not_found(a.id, e))?;
    crate::audit::record(
        &store,
        "batch.close",
        a.id.to_string(),
        serde_json::json!({ "unfinished": b.unfinished }),
    )
    .await;
    if a.json {
        return output::json(&b);
    }
    println!("{}", headline(&b));
    Ok(())
}

fn callbacks_text(b: &BatchStatus) -> String {
    b.callbacks
        .iter()
        .map(|(c, job)| match job {
            Some(j) => format!("{c} (job {j})"),
            None => format!("{c} (not fired)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn headline(b: &BatchStatus) -> String {
    format!(
        "batch {} {}: {} ({} members: {})",
        b.id,
        docket_core::validate::visible(&b.name),
        b.state(),
        b.total,
        b.counts_text()
    )
}

async fn list(ctx: &impl Open, a: BatchListArgs) -> anyhow::Result<()> {
    docket_core::workflow::check_limit(a.limit).map_err(|e| CliError::invalid(e.to_string()))?;
    let store = Open::existing(ctx, 1).await?;
    let list = store.batches(a.limit).await?;
    if a.json {
        return output::json(&list);
    }
    let mut t = output::table(&[
        "id",
        "name",
        "state",
        "members",
        "by end",
        "callbacks",
        "created",
    ]);
    for b in &list {
        t.add_row(vec![
            Cell::new(b.id),
            Cell::new(docket_core::validate::visible(&b.name)),
            Cell::new(b.state()),
            Cell::new(b.total),
            Cell::new(b.counts_text()),
            Cell::new(callbacks_text(b)),
            Cell::new(output::time(&b.created_at)),
        ]);
    }
    println!("{t}");
    Ok(())
}

async fn show(ctx: &impl Open, a: BatchIdArgs) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let b = store.batch(a.id).await.map_err(|e| not_found(a.id, e))?;
    let members = store
        .workflow(a.id)
        .await
        .map_err(|e| not_found(a.id, e))?
        .nodes;
    if a.json {
        return output::json(&serde_json::json!({ "batch": b, "members": members }));
    }
    println!("{}", headline(&b));
    let closed = b.closed_at.as_ref().map(output::time);
    println!(
        "created {}, closed {}, ended {}",
        output::time(&b.created_at),
        closed.unwrap_or_else(|| "no (open)".into()),
        b.ended_at
            .as_ref()
            .map(output::time)
            .unwrap_or_else(|| "no".into())
    );
    println!("callbacks: {}", callbacks_text(&b));
    let mut t = output::table(&["member", "job", "state", "kind"]);
    for n in &members {
        t.add_row(vec![
            Cell::new(docket_core::validate::visible(&n.name)),
            Cell::new(n.id.0),
            output::state_cell(n.state),
            Cell::new(docket_core::validate::visible(&n.kind)),
        ]);
    }
    println!("{t}");
    Ok(())
}
