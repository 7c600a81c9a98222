//! Workflows as operators see them: a workflow's state and counts, its nodes and edges, and
//! each node's depth (what the CLI, the dashboard and the gauges show).

use std::collections::HashMap;

use serde::Serialize;

use crate::{JobId, JobState, ValidationError};

/// Where a workflow stands, from its nodes' states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowState {
    /// A node is waiting, pending or running.
    Running,
    /// Every node succeeded.
    Succeeded,
    /// Nothing is left to run and a node ended dead.
    Failed,
    /// Nothing is left to run, none is dead, and a node was cancelled.
    Cancelled,
}

impl WorkflowState {
    /// The name shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Running => "running",
            WorkflowState::Succeeded => "succeeded",
            WorkflowState::Failed => "failed",
            WorkflowState::Cancelled => "cancelled",
        }
    }

    /// The state of a workflow whose nodes count `counts` (state, how many).
    pub fn of(counts: &[(JobState, i64)]) -> Self {
        let n = |s: JobState| {
            counts
                .iter()
                .filter(|(st, _)| *st == s)
                .map(|(_, c)| *c)
                .sum::<i64>()
        };
        if n(JobState::Waiting) + n(JobState::Pending) + n(JobState::Running) > 0 {
            WorkflowState::Running
        } else if n(JobState::Dead) > 0 {
            WorkflowState::Failed
        } else if n(JobState::Cancelled) > 0 {
            WorkflowState::Cancelled
        } else {
            WorkflowState::Succeeded
        }
    }
}

impl std::fmt::Display for WorkflowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workflow as the operator's list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowSummary {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// When it was enqueued.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Nodes it was enqueued with (pruned nodes are no longer counted in `counts`).
    pub nodes: i64,
    /// Its nodes by state (states with none left out).
    pub counts: Vec<(JobState, i64)>,
    /// Where it stands.
    pub state: WorkflowState,
}

impl WorkflowSummary {
    /// The nodes by state as people read them: "3 waiting, 1 pending".
    pub fn counts_text(&self) -> String {
        self.counts
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The summary of a workflow whose nodes still in the table are `nodes`.
    pub fn of_nodes(
        id: i64,
        name: String,
        created_at: chrono::DateTime<chrono::Utc>,
        enqueued: i64,
        nodes: &[WorkflowNode],
    ) -> Self {
        let mut counts: Vec<(JobState, i64)> = Vec::new();
        for n in nodes {
            match counts.iter_mut().find(|(s, _)| *s == n.state) {
                Some((_, c)) => *c += 1,
                None => counts.push((n.state, 1)),
            }
        }
        counts.sort_by_key(|(s, _)| JobState::ALL.iter().position(|x| x == s));
        WorkflowSummary {
            id,
            name,
            created_at,
            nodes: enqueued,
            state: WorkflowState::of(&counts),
            counts,
        }
    }
}

/// One node of a workflow as the operator's page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowNode {
    /// Its name.
    pub name: String,
    /// Its job.
    pub id: JobId,
    /// Its job's state.
    pub state: JobState,
    /// Its job's kind.
    pub kind: String,
}

/// One edge of a workflow: parent to child, the child's policy, and whether it was consumed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowEdge {
    /// The parent's job.
    pub parent: JobId,
    /// The child's job.
    pub child: JobId,
    /// `cancel`, `ignore` or `hold`.
    pub on_failure: String,
    /// `waiting`, `satisfied` or `failed`.
    pub state: String,
}

/// A whole workflow: its summary, nodes (in enqueue order) and edges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowDetail {
    /// The list's line.
    pub summary: WorkflowSummary,
    /// Its nodes still in the table.
    pub nodes: Vec<WorkflowNode>,
    /// Its edges still in the table.
    pub edges: Vec<WorkflowEdge>,
}

impl WorkflowDetail {
    /// Node indexes in an order where every parent comes before its children (the edges'
    /// graph is acyclic by construction), and each node's depth (longest path from a root):
    /// what the dashboard lays the graph out by.
    pub fn depths(&self) -> Vec<usize> {
        let at: HashMap<JobId, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id, i))
            .collect();
        let mut depth = vec![0usize; self.nodes.len()];
        // Nodes are stored in enqueue order, which a graph's check does not sort; relax the
        // edges until nothing moves (at most one pass per level of the graph).
        for _ in 0..=self.nodes.len() {
            let mut moved = false;
            for e in &self.edges {
                if let (Some(&p), Some(&c)) = (at.get(&e.parent), at.get(&e.child)) {
                    if depth[c] < depth[p] + 1 {
                        depth[c] = depth[p] + 1;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        depth
    }
}

/// One row of an engine's workflow list: (id, name, created_at, nodes, a state of some of
/// its nodes or none, how many).
pub type ListRow = (
    i64,
    String,
    chrono::DateTime<chrono::Utc>,
    i64,
    Option<JobState>,
    i64,
);

/// The list's rows (ordered by workflow) grouped into summaries, in their order.
pub fn summaries(rows: Vec<ListRow>) -> Vec<WorkflowSummary> {
    let mut out: Vec<WorkflowSummary> = Vec::new();
    for (id, name, created_at, nodes, state, n) in rows {
        if out.last().map(|w| w.id) != Some(id) {
            out.push(WorkflowSummary {
                id,
                name,
                created_at,
                nodes,
                counts: Vec::new(),
                state: WorkflowState::Succeeded,
            });
        }
        let w = out.last_mut().expect("pushed");
        if let Some(s) = state {
            w.counts.push((s, n));
        }
    }
    for w in &mut out {
        w.counts
            .sort_by_key(|(s, _)| JobState::ALL.iter().position(|x| x == s));
        w.state = WorkflowState::of(&w.counts);
    }
    out
}

/// Checks a list's limit.
pub fn check_limit(limit: i64) -> Result<(), ValidationError> {
    if (1..=1000).contains(&limit) {
        Ok(())
    } else {
        Err(ValidationError::Other {
            what: "limit",
            reason: format!("{limit} is out of range 1..=1000"),
        })
    }
}
