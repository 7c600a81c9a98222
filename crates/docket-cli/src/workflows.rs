//! `docket workflows`: enqueue a graph from a JSON file, read a node's parents.

use std::io::Read;

use comfy_table::Cell;
use docket_core::workflow::Graph;
use docket_core::{JobId, Store};

use crate::cli::{WorkflowFileArgs, WorkflowJobArgs, WorkflowsCommand};
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
    }
}

/// The graph in `path` (`-`: standard input), parsed and checked before any connection is
/// opened: a bad file writes nothing and says what is wrong.
pub fn read_graph(path: &str) -> anyhow::Result<Graph> {
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
            "{path} is over {} MiB; a workflow file holds one graph",
            MAX_FILE_BYTES / 1024 / 1024
        ))
        .into());
    }
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
