//! `docket workflows`: enqueue a graph from a JSON file, read a node's parents.

use std::io::Read;

use comfy_table::Cell;
use docket_core::workflow::Graph;
use docket_core::{JobId, Store};

use crate::cli::{
    WorkflowEdgeArgs, WorkflowFileArgs, WorkflowIdArgs, WorkflowJobArgs, WorkflowListArgs,
    WorkflowsCommand,
};
use crate::engine::Open;
use crate::fail::CliError;
use crate::output;

/// The largest graph file read: a thousand nodes with their arguments (256 KiB each at
/// most) would not fit, but a graph that large belongs in code; the bound keeps a mistaken
/// path (a log file, a device) from being read whole.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Runs a `docket workflows` command.
pub async fn run(ctx: &impl Open, cmd: WorkflowsCommand) -> anyhow::Result<()> {
    match cmd {
        WorkflowsCommand::Enqueue(a) => enqueue(ctx, a).await,
        WorkflowsCommand::Deps(a) => deps(ctx, a).await,
        WorkflowsCommand::List(a) => list(ctx, a).await,
        WorkflowsCommand::Show(a) => show(ctx, a).await,
        WorkflowsCommand::Cancel(a) => act(ctx, a, false).await,
        WorkflowsCommand::Retry(a) => act(ctx, a, true).await,
        WorkflowsCommand::SkipEdge(a) => skip_edge(ctx, a).await,
    }
}

async fn skip_edge(ctx: &impl Open, a: WorkflowEdgeArgs) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let child = store
        .skip_edge(JobId(a.parent), JobId(a.child))
        .await
        .map_err(|e| match e {
            docket_core::StoreError::Invalid(v) => CliError::invalid(v.to_string()).into(),
            e => anyhow::Error::from(e),
        })?;
    crate::audit::record(
        &store,
        "workflow.skip_edge",
        format!("job {}", a.child),
        serde_json::json!({ "parent": a.parent, "child": a.child }),
    )
    .await;
    if a.json {
        return output::json(&child);
    }
    println!(
        "edge {} -> {} skipped: job {} is {}",
        a.parent, a.child, a.child, child.state
    );
    Ok(())
}

/// A missing workflow said as one (the store names it as a job id).
fn not_found(id: i64, e: docket_core::StoreError) -> anyhow::Error {
    match e {
        docket_core::StoreError::NotFound(_) => {
            CliError::new(crate::cli::exit::NOT_FOUND, format!("no workflow {id}")).into()
        }
        e => e.into(),
    }
}

async fn list(ctx: &impl Open, a: WorkflowListArgs) -> anyhow::Result<()> {
    docket_core::workflow::check_limit(a.limit).map_err(|e| CliError::invalid(e.to_string()))?;
    let store = Open::existing(ctx, 1).await?;
    let list = store.workflows(a.limit).await?;
    if a.json {
        return output::json(&list);
    }
    let mut t = output::table(&["id", "name", "state", "nodes", "by state", "created"]);
    for w in &list {
        t.add_row(vec![
            Cell::new(w.id),
            Cell::new(docket_core::validate::visible(&w.name)),
            Cell::new(w.state),
            Cell::new(w.nodes),
            Cell::new(w.counts_text()),
            Cell::new(output::time(&w.created_at)),
        ]);
    }
    println!("{t}");
    Ok(())
}

async fn show(ctx: &impl Open, a: WorkflowIdArgs) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let w = store.workflow(a.id).await.map_err(|e| not_found(a.id, e))?;
    if a.json {
        return output::json(&w);
    }
    println!(
        "workflow {} {}: {} ({})",
        w.summary.id,
        docket_core::validate::visible(&w.summary.name),
        w.summary.state,
        w.summary.counts_text()
    );
    let depth = w.depths();
    let name = |id: JobId| {
        w.nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| docket_core::validate::visible(&n.name))
            .unwrap_or_else(|| format!("job {id}"))
    };
    let mut t = output::table(&["node", "job", "state", "kind", "depth", "after"]);
    for (i, n) in w.nodes.iter().enumerate() {
        let after: Vec<String> = w
            .edges
            .iter()
            .filter(|e| e.child == n.id)
            .map(|e| format!("{} ({}, {})", name(e.parent), e.on_failure, e.state))
            .collect();
        t.add_row(vec![
            Cell::new(docket_core::validate::visible(&n.name)),
            Cell::new(n.id.0),
            output::state_cell(n.state),
            Cell::new(docket_core::validate::visible(&n.kind)),
            Cell::new(depth[i]),
            Cell::new(after.join(", ")),
        ]);
    }
    println!("{t}");
    Ok(())
}

async fn act(ctx: &impl Open, a: WorkflowIdArgs, retry: bool) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let n = if retry {
        store.retry_workflow(a.id).await
    } else {
        store.cancel_workflow(a.id).await
    }
    .map_err(|e| not_found(a.id, e))?;
    let action = if retry {
        "workflow.retry"
    } else {
        "workflow.cancel"
    };
    crate::audit::record(
        &store,
        action,
        a.id.to_string(),
        serde_json::json!({ "nodes": n }),
    )
    .await;
    if a.json {
        return output::json(&serde_json::json!({ "workflow": a.id, "nodes": n }));
    }
    let verb = if retry { "retried" } else { "cancelled" };
    println!("workflow {}: {n} nodes {verb}", a.id);
    Ok(())
}

/// The text of `path` (`-`: standard input), at most 16 MiB (`what` names what the file
/// should hold).
pub fn read_bounded(path: &str, what: &str) -> anyhow::Result<String> {
    let reader: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError::invalid(format!("cannot read {path}: {e}")))?,
        )
    };
    let mut text = String::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::invalid(format!("cannot read {path}: {e}")))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(CliError::invalid(format!(
            "{path} is over {} MiB; {what}",
            MAX_FILE_BYTES / 1024 / 1024
        ))
        .into());
    }
    Ok(text)
}

/// The graph in `path` (`-`: standard input), parsed and checked before any connection is
/// opened: a bad file writes nothing and says what is wrong.
pub fn read_graph(path: &str) -> anyhow::Result<Graph> {
    let text = read_bounded(path, "a workflow file holds one graph")?;
    let nothing = "nothing was enqueued";
    let graph = Graph::from_json(&text)
        .map_err(|e| CliError::invalid(format!("{path}: {e}")).hint(nothing))?;
    graph
        .validate(&docket_core::Limits::default())
        .map_err(|e| CliError::invalid(format!("{path}: {e}")).hint(nothing))?;
    Ok(graph)
}

async fn enqueue(ctx: &impl Open, a: WorkflowFileArgs) -> anyhow::Result<()> {
    let graph = read_graph(&a.file)?;
    let store = ctx.migrated(1).await?;
    let out = store.enqueue_workflow(&graph).await?;
    if a.json {
        let jobs: serde_json::Map<String, serde_json::Value> = out
            .jobs
            .iter()
            .map(|(n, id)| (n.clone(), id.0.into()))
            .collect();
        return output::json(&serde_json::json!({ "workflow": out.id, "jobs": jobs }));
    }
    println!("workflow {} enqueued: {} nodes", out.id, out.jobs.len());
    let mut t = output::table(&["node", "job"]);
    for (n, id) in &out.jobs {
        t.add_row(vec![
            Cell::new(docket_core::validate::visible(n)),
            Cell::new(id.0),
        ]);
    }
    println!("{t}");
    Ok(())
}

async fn deps(ctx: &impl Open, a: WorkflowJobArgs) -> anyhow::Result<()> {
    let store = Open::existing(ctx, 1).await?;
    let deps = store.dep_outputs(JobId(a.id)).await?;
    if a.json {
        return output::json(&deps);
    }
    if deps.is_empty() {
        println!("job {} has no parents in a workflow", a.id);
        return Ok(());
    }
    let mut t = output::table(&["parent", "job", "state", "output"]);
    for d in &deps {
        t.add_row(vec![
            Cell::new(docket_core::validate::visible(&d.node)),
            Cell::new(d.id.0),
            output::state_cell(d.state),
            Cell::new(
                d.output
                    .as_ref()
                    .map(|v| {
                        let text: String = v.to_string().chars().take(200).collect();
                        docket_core::validate::visible(&text)
                    })
                    .unwrap_or_default(),
            ),
        ]);
    }
    println!("{t}");
    Ok(())
}
