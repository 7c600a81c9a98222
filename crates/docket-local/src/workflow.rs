//! Workflows on SQLite and MariaDB: a graph's enqueue, the nodes' completion, and the rule
//! that ends a node — each edge to its children consumed once, in the transaction that ends
//! the parent, a child claimable when its last edge is consumed. PostgreSQL's versions are
//! `enqueue_workflow()`, `complete_nodes_fenced()` and `workflow_resolve()` with the trigger
//! `jobs_workflow_ended` (migration 0030).
//!
//! Here the rule runs where this layer ends a job: [`complete_nodes`] (the runtime sends
//! every workflow node's success there), [`crate::writes::fail_many`], the reaper and an
//! operator's cancel. Each calls [`resolve`] only after its own fenced write changed the
//! row, so a stale attempt consumes no edge.

use std::collections::{BTreeSet, HashMap};

use docket_core::local::{entry, push_error};
use docket_core::mutants::{self, Mutant};
use docket_core::workflow::{
    marked_metadata, Graph, NodeDone, OnFailure, WorkflowDetail, WorkflowEdge, WorkflowNode,
    WorkflowSummary,
};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Inserted};
use crate::rows;
use crate::writes::{ended, outcome};

/// Checks and enqueues `graph` on `c` (inside a transaction) at database time `now`; the
/// queues whose roots are due go to `due`, for the caller to hint once it commits.
pub async fn enqueue_on<C: Conn>(
    c: &mut C,
    limits: &Limits,
    now: i64,
    graph: &Graph,
    due: &mut BTreeSet<String>,
) -> Result<WorkflowEnqueued> {
    graph.validate(limits)?;
    enqueue_into(c, now, graph, due, None).await
}

/// [`enqueue_on`] of a graph already checked, or with `spawner` = (workflow, running node):
/// the graph goes into that workflow, every root after the node, and the node's waiting
/// dependents after every sink.
async fn enqueue_into<C: Conn>(
    c: &mut C,
    now: i64,
    graph: &Graph,
    due: &mut BTreeSet<String>,
    spawner: Option<(i64, i64)>,
) -> Result<WorkflowEnqueued> {
    let count = i64::try_from(graph.nodes.len()).unwrap_or(i64::MAX);
    let wf = match spawner {
        Some((wf, _)) => {
            let names: Vec<String> = graph.nodes.iter().map(|n| n.name.clone()).collect();
            let taken: i64 = c
                .fetch_one("workflow_names_taken", args![wf, &names[..]])
                .await?
                .get("n")?;
            if taken > 0 {
                return Err(ValidationError::Other {
                    what: "workflow",
                    reason: "a spawned node is named like a node of the workflow".into(),
                }
                .into());
            }
            c.execute("workflow_grow", args![wf, count]).await?;
            wf
        }
        None => match c
            .insert("workflow_insert", args![&graph.name, count, now])
            .await?
        {
            Inserted::Id(id) => id,
            Inserted::Duplicate => return Err(corrupt("workflows has no unique key to meet")),
        },
    };
    let mut out = WorkflowEnqueued {
        id: wf,
        jobs: Vec::with_capacity(graph.nodes.len()),
    };
    let mut index: HashMap<&str, i64> = HashMap::with_capacity(graph.nodes.len());
    let mut scratch = BTreeSet::new();
    for node in &graph.nodes {
        let mut job = node.job();
        job.metadata = marked_metadata(node, wf);
        // A spawned root waits for the spawning node.
        let parents =
            i64::try_from(node.after.len().max(usize::from(spawner.is_some()))).unwrap_or(i64::MAX);
        // Only roots are due: a waiting node's queue is not woken for it.
        let sink = if parents == 0 {
            &mut *due
        } else {
            &mut scratch
        };
        let id = crate::enqueue::insert(c, now, std::slice::from_ref(&job), sink).await?[0].id;
        c.execute("workflow_node", args![wf, &node.name, parents, id.0])
            .await?;
        index.insert(node.name.as_str(), id.0);
        out.jobs.push((node.name.clone(), id));
    }
    for node in &graph.nodes {
        let child = index[node.name.as_str()];
        for d in &node.after {
            let parent = index[d.node()];
            c.execute(
                "dep_insert",
                args![parent, child, wf, d.on_failure().as_str()],
            )
            .await?;
        }
    }
    if let Some((_, spawner)) = spawner {
        let sinks: Vec<i64> = graph
            .nodes
            .iter()
            .filter(|n| {
                !graph
                    .nodes
                    .iter()
                    .any(|m| m.after.iter().any(|d| d.node() == n.name))
            })
            .map(|n| index[n.name.as_str()])
            .collect();
        // The spawner's waiting dependents (in id order) wait for every sink too.
        let dependents = c.fetch_all("deps_of_parent", args![spawner]).await?;
        for d in &dependents {
            let child: i64 = d.get("child_id")?;
            for &sink in &sinks {
                c.execute("dep_insert", args![sink, child, wf, "cancel"])
                    .await?;
            }
            let n = i64::try_from(sinks.len()).unwrap_or(i64::MAX);
            c.execute("child_grow", args![child, n]).await?;
        }
        for node in graph.nodes.iter().filter(|n| n.after.is_empty()) {
            let root = index[node.name.as_str()];
            c.execute("dep_insert", args![spawner, root, wf, "cancel"])
                .await?;
        }
    }
    Ok(out)
}

/// Adds `graph` to the workflow of the running node `lease`, fenced by its claim and once
/// per `step` (recorded as the node's step `docket:spawn:<step>`). PostgreSQL:
/// `spawn_nodes()` (migration 0030).
pub async fn spawn_nodes<E: Engine>(
    e: &E,
    owner: &str,
    lease: &Lease,
    step: &str,
    graph: &Graph,
) -> Result<WorkflowEnqueued> {
    graph.validate(e.limits())?;
    let name = docket_core::workflow::spawn_step(step)?;
    let lease = *lease;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let held = tx
        .fetch_optional("step_fence", args![lease.id.0, lease.attempt, owner, now])
        .await?
        .is_some();
    if !held && !mutants::active(Mutant::WorkflowStaleSpawns) {
        drop(tx);
        return Err(crate::writes::lease_lost(e, lease).await?.into());
    }
    let Some(row) = tx.fetch_optional("node_row", args![lease.id.0]).await? else {
        return Err(StoreError::NotFound(lease.id));
    };
    let Some(wf) = row.get::<Option<i64>>("workflow_id")? else {
        return Err(ValidationError::Other {
            what: "workflow",
            reason: "only a workflow node can spawn nodes".into(),
        }
        .into());
    };
    if let Some(r) = tx
        .fetch_optional("step_get", args![lease.id.0, &name])
        .await?
    {
        let output = rows::json(&r, "output")?;
        return docket_core::workflow::spawned(wf, &output)
            .ok_or_else(|| corrupt(format!("the spawn step {name:?} holds no job ids")));
    }
    let mut due = BTreeSet::new();
    let out = enqueue_into(&mut tx, now, graph, &mut due, Some((wf, lease.id.0))).await?;
    let ids: serde_json::Map<String, serde_json::Value> = out
        .jobs
        .iter()
        .map(|(n, id)| (n.clone(), id.0.into()))
        .collect();
    let text = serde_json::Value::Object(ids).to_string();
    tx.execute(
        "step_insert",
        args![lease.id.0, &name, lease.attempt, &text, now],
    )
    .await?;
    tx.commit().await?;
    Ok(out)
}

/// Enqueues a workflow in a transaction of its own: every node and edge, or nothing.
pub async fn enqueue_workflow<E: Engine>(e: &E, graph: &Graph) -> Result<WorkflowEnqueued> {
    graph.validate(e.limits())?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut due = BTreeSet::new();
    let out = enqueue_into(&mut tx, now, graph, &mut due, None).await?;
    tx.commit().await?;
    for q in due {
        e.hint(Wake::Queue(q));
    }
    Ok(out)
}

/// Completes claimed workflow nodes (fenced), each with its output or none, and resolves
/// each completed node's edges in the same transaction. The batch's waiting children are
/// locked first, in id order.
pub async fn complete_nodes<E: Engine>(
    e: &E,
    owner: &str,
    nodes: &[NodeDone],
) -> Result<BatchOutcome> {
    if nodes.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let mut sorted = nodes.to_vec();
    sorted.sort_by_key(|n| n.lease.id);
    sorted.dedup_by_key(|n| n.lease.id);
    let mut texts = Vec::with_capacity(sorted.len());
    for n in &sorted {
        texts.push(match &n.output {
            Some(v) => {
                output::check(v, output::MAX_OUTPUT_BYTES)?;
                Some(v.to_string())
            }
            None => None,
        });
    }
    let leases: Vec<Lease> = sorted.iter().map(|n| n.lease).collect();
    let ids: Vec<i64> = leases.iter().map(|l| l.id.0).collect();
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.fetch_all("children_lock", args![&ids[..]]).await?;
    let mut members: HashMap<i64, i64> = HashMap::new();
    for r in tx.fetch_all("batch_members", args![&ids[..]]).await? {
        members.insert(r.get("id")?, r.get("batch_id")?);
    }
    let mut done = Vec::new();
    let mut ready = BTreeSet::new();
    for (l, text) in leases.iter().zip(&texts) {
        let n = tx
            .execute(
                "complete_output",
                args![l.id.0, l.attempt, owner, now, text.as_deref()],
            )
            .await?;
        if n == 1 {
            let batch = members.get(&l.id.0).copied();
            let succeeded = JobState::Succeeded;
            crate::batches::moved(
                &mut tx,
                now,
                batch,
                JobState::Running,
                succeeded,
                &mut ready,
            )
            .await?;
        }
        if n == 1 || mutants::active(Mutant::WorkflowStaleUnblocks) {
            resolve(&mut tx, now, l.id, JobState::Succeeded, &mut ready).await?;
        }
        if n == 1 {
            done.push(*l);
        }
    }
    tx.commit().await?;
    ended(e, &done);
    for l in &done {
        e.hint(Wake::Done(l.id));
    }
    for q in ready {
        e.hint(Wake::Queue(q));
    }
    outcome(e, &leases, done).await
}

/// The rule that ends a node: every edge from `parent` (now `state`) still waiting is
/// consumed once — satisfied when the parent succeeded or the edge ignores failures (the
/// child pending when it was the last), failed and the child cancelled on a `cancel` edge
/// (its own children then resolved in turn), left waiting on a `hold` edge. Queues with a
/// child made ready go to `ready`. Nothing for a state that is not terminal.
pub async fn resolve<C: Conn>(
    c: &mut C,
    now: i64,
    parent: JobId,
    state: JobState,
    ready: &mut BTreeSet<String>,
) -> Result<()> {
    // A worklist, not recursion: a long chain cancelled from its root.
    let mut work = vec![(parent.0, state)];
    while let Some((p, st)) = work.pop() {
        if !st.is_terminal() {
            continue;
        }
        let edges = c.fetch_all("deps_of_parent", args![p]).await?;
        if edges.is_empty() {
            continue;
        }
        let name: Option<String> = match c.fetch_optional("node_row", args![p]).await? {
            Some(r) => r.get("node")?,
            None => None,
        };
        let name = name.unwrap_or_else(|| p.to_string());
        for edge in &edges {
            let child: i64 = edge.get("child_id")?;
            let policy: String = edge.get("on_failure")?;
            let policy = OnFailure::parse(&policy)
                .ok_or_else(|| corrupt(format!("edge policy {policy:?}")))?;
            let satisfied = st == JobState::Succeeded || policy == OnFailure::Ignore;
            if !satisfied && policy == OnFailure::Hold {
                continue;
            }
            let to = if satisfied { "satisfied" } else { "failed" };
            let consumed = if satisfied && mutants::active(Mutant::WorkflowDoubleDecrement) {
                1
            } else {
                c.execute("dep_consume", args![p, child, to]).await?
            };
            if consumed == 0 {
                continue;
            }
            if satisfied {
                c.execute("child_satisfied", args![child, now]).await?;
                if let Some(r) = c.fetch_optional("node_row", args![child]).await? {
                    let s: String = r.get("state")?;
                    if rows::state(&s)? == JobState::Pending {
                        ready.insert(r.get("queue")?);
                    }
                }
            } else if !mutants::active(Mutant::WorkflowCancelNotApplied) {
                let Some(r) = c.fetch_optional("node_row", args![child]).await? else {
                    continue;
                };
                let s: String = r.get("state")?;
                if rows::state(&s)? != JobState::Waiting {
                    continue;
                }
                let attempt: i32 = r.get("attempt")?;
                let errors: String = r.get("errors")?;
                let errors = push_error(
                    &errors,
                    entry(
                        crate::writes::run_of(&r, attempt),
                        now,
                        "dependency",
                        &format!("cancelled: its parent {name} ended {st}"),
                        None,
                    ),
                );
                let n = c
                    .execute("child_cancel", args![child, now, &errors])
                    .await?;
                if n == 1 {
                    work.push((child, JobState::Cancelled));
                }
            }
        }
    }
    Ok(())
}

/// An operator's skip of a held edge (PostgreSQL: `skip_edge()`, migration 0031): the
/// child's row locked first (as a parent's end locks its children first), then the edge;
/// satisfied once when its parent ended dead or cancelled, or was pruned after it did.
pub async fn skip_edge<E: Engine>(e: &E, parent: JobId, child: JobId) -> Result<JobRecord> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.fetch_optional("job_lock", args![child.0]).await?;
    let outcome = match tx
        .fetch_optional("dep_row", args![parent.0, child.0])
        .await?
    {
        None => "no_edge".to_string(),
        Some(r) if r.get::<String>("state")? != "waiting" => "consumed".to_string(),
        Some(_) => match tx.fetch_optional("node_row", args![parent.0]).await? {
            Some(p) if !rows::state(&p.get::<String>("state")?)?.is_terminal() => {
                format!("parent_{}", p.get::<String>("state")?)
            }
            _ => {
                tx.execute("dep_consume", args![parent.0, child.0, "satisfied"])
                    .await?;
                tx.execute("child_satisfied", args![child.0, now]).await?;
                "skipped".to_string()
            }
        },
    };
    if let Some(err) = docket_core::workflow::skip_refusal(parent, child, &outcome) {
        return Err(err);
    }
    tx.commit().await?;
    let job = crate::writes::get(e, child).await?;
    if job.state == JobState::Pending {
        e.hint(Wake::Queue(job.queue.clone()));
    }
    Ok(job)
}

/// An end written inside the caller's transaction, whose row was not read: job `id` (any
/// job) ended `state`; one read finds its workflow and batch, and each rule runs only for
/// what it has.
pub async fn ended_in_caller<C: Conn>(
    c: &mut C,
    now: i64,
    id: JobId,
    state: JobState,
    ready: &mut BTreeSet<String>,
) -> Result<()> {
    let Some(r) = c.fetch_optional("job_links", args![id.0]).await? else {
        return Ok(());
    };
    let batch: Option<i64> = r.get("batch_id")?;
    crate::batches::moved(c, now, batch, JobState::Running, state, ready).await?;
    if r.get::<Option<i64>>("workflow_id")?.is_some() {
        resolve(c, now, id, state, ready).await?;
    }
    Ok(())
}

/// After a retry (same transaction): a workflow node's failed edges re-armed, and the node
/// waiting again while any edge into it waits.
pub async fn rearm<C: Conn>(c: &mut C, id: JobId) -> Result<()> {
    c.execute("deps_rearm", args![id.0]).await?;
    let n: i64 = c
        .fetch_one("deps_waiting_count", args![id.0])
        .await?
        .get("n")?;
    c.execute("node_rewait", args![id.0, n]).await?;
    Ok(())
}

/// Deletes workflow edges into nodes that no longer exist and workflows with no node left,
/// `batch` at a time until none is left; returns how many rows went.
pub async fn prune<E: Engine>(e: &E, batch: i64) -> Result<u64> {
    let batch = batch.max(1);
    let mut total = 0u64;
    for empty in [false, true] {
        loop {
            let mut tx = e.begin().await?;
            let now = tx.now();
            let n = if empty {
                tx.execute("workflows_prune_empty", args![batch, now])
                    .await?
            } else {
                tx.execute("workflows_prune", args![batch]).await?
            };
            tx.commit().await?;
            total += n;
            if n < batch as u64 {
                break;
            }
        }
    }
    Ok(total)
}

/// The newest `limit` workflows with their nodes' counts.
pub async fn workflows<E: Engine>(e: &E, limit: i64) -> Result<Vec<WorkflowSummary>> {
    docket_core::workflow::check_limit(limit)?;
    let rows = e.reader().fetch_all("workflows_list", args![limit]).await?;
    let mut list = Vec::with_capacity(rows.len());
    for r in &rows {
        let state: Option<String> = r.get("state")?;
        list.push((
            r.get("id")?,
            r.get("name")?,
            rows::time(r, "created_at")?,
            r.get("nodes")?,
            state.map(|s| rows::state(&s)).transpose()?,
            r.get("n")?,
        ));
    }
    Ok(docket_core::workflow::summaries(list))
}

/// One workflow: its nodes and edges.
pub async fn workflow<E: Engine>(e: &E, id: i64) -> Result<WorkflowDetail> {
    let mut c = e.reader();
    let nodes = c.fetch_all("workflow_nodes", args![id]).await?;
    let edges = c.fetch_all("workflow_edges", args![id]).await?;
    let Some(first) = nodes.first() else {
        return Err(StoreError::NotFound(JobId(id)));
    };
    let mut out = Vec::new();
    for r in &nodes {
        let Some(job) = r.get::<Option<i64>>("id")? else {
            continue;
        };
        out.push(WorkflowNode {
            name: r.get("node")?,
            id: JobId(job),
            state: rows::state(&r.get::<String>("state")?)?,
            kind: r.get("kind")?,
        });
    }
    let summary = WorkflowSummary::of_nodes(
        first.get("workflow_id")?,
        first.get("name")?,
        rows::time(first, "created_at")?,
        first.get("nodes")?,
        &out,
    );
    let edges = edges
        .iter()
        .map(|r| {
            Ok(WorkflowEdge {
                parent: JobId(r.get("parent_id")?),
                child: JobId(r.get("child_id")?),
                on_failure: r.get("on_failure")?,
                state: r.get("state")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(WorkflowDetail {
        summary,
        nodes: out,
        edges,
    })
}

/// A job's parents in its workflow, with their states and outputs.
pub async fn dep_outputs<E: Engine>(e: &E, id: JobId) -> Result<Vec<DepOutput>> {
    let rows = e.reader().fetch_all("dep_outputs", args![id.0]).await?;
    rows.iter()
        .map(|r| {
            let state: String = r.get("state")?;
            Ok(DepOutput {
                node: r.get("node")?,
                id: JobId(r.get("id")?),
                state: rows::state(&state)?,
                output: match r.get::<Option<String>>("output")? {
                    Some(t) => Some(serde_json::from_str(&t).map_err(|e| corrupt(e.to_string()))?),
                    None => None,
                },
            })
        })
        .collect()
}
