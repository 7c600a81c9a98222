//! Workflows: a graph of jobs enqueued together, each node claimable once every parent has
//! succeeded (or ended on an edge whose policy lets the child go on).
//!
//! The graph is checked here before anything is written — on SQLite and MariaDB this is the
//! check; PostgreSQL's `enqueue_workflow()` repeats it in SQL, because SQL callers reach the
//! function without this crate (the conformance suite holds the two to the same refusals).
//! Readiness is a counter on the child (`deps_waiting`), decremented by the transaction that
//! ends a parent, edge by edge, each edge consumed once; a stale attempt's completion changes
//! no row, so it consumes no edge.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::validate::{self, Limits};
use crate::{JobId, JobState, NewJob, ValidationError};

mod view;
pub use view::*;

/// Nodes a workflow may have: room for a fan-in of ten thousand parents into one child
/// twice over, a graph that still enqueues in one transaction in a few seconds on this
/// project's machines; a larger fan-out belongs in several workflows.
pub const MAX_NODES: usize = 20_000;
/// Edges a workflow may have (five per node on average).
pub const MAX_EDGES: usize = 100_000;
/// Bytes of a node's or a workflow's name.
pub const MAX_NAME_BYTES: usize = 128;
/// The metadata key that marks a claimed job as a workflow node (`{"id": …, "node": …}`):
/// the runtime completes such a job through [`crate::Store::complete_nodes`], so the
/// engines' plain completions stay as they were. The columns `workflow_id` and `node` are
/// the truth; the marker only routes.
pub const MARKER: &str = "docket:workflow";

/// What a child does when a parent ends without success (dead or cancelled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The child is cancelled, and so are its own dependents (transitively), each with the
    /// reason recorded. The default: a child of a failed step should not run.
    #[default]
    Cancel,
    /// The edge counts as satisfied: the child runs once its other parents allow it.
    Ignore,
    /// The child stays waiting until the parent is retried and succeeds (or an operator
    /// cancels it).
    Hold,
}

impl OnFailure {
    /// The name stored with the edge.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Cancel => "cancel",
            OnFailure::Ignore => "ignore",
            OnFailure::Hold => "hold",
        }
    }

    /// The policy named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cancel" => Some(OnFailure::Cancel),
            "ignore" => Some(OnFailure::Ignore),
            "hold" => Some(OnFailure::Hold),
            _ => None,
        }
    }
}

/// One dependency of a node: a parent's name, with the policy when it fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Dep {
    /// A parent by name, with the default policy (`cancel`).
    Name(String),
    /// A parent by name with its policy.
    Edge {
        /// The parent's name.
        node: String,
        /// What this node does if the parent ends without success.
        #[serde(default)]
        on_failure: OnFailure,
    },
}

impl Dep {
    /// The parent's name.
    pub fn node(&self) -> &str {
        match self {
            Dep::Name(n) | Dep::Edge { node: n, .. } => n,
        }
    }

    /// The edge's policy.
    pub fn on_failure(&self) -> OnFailure {
        match self {
            Dep::Name(_) => OnFailure::Cancel,
            Dep::Edge { on_failure, .. } => *on_failure,
        }
    }
}

impl From<&str> for Dep {
    fn from(s: &str) -> Self {
        Dep::Name(s.to_owned())
    }
}

impl From<String> for Dep {
    fn from(s: String) -> Self {
        Dep::Name(s)
    }
}

fn default_queue() -> String {
    "default".to_owned()
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn default_attempts() -> i32 {
    crate::DEFAULT_MAX_ATTEMPTS
}

/// A node of a workflow as the JSON graph spells it (the CLI's file, the SQL function's
/// argument, what the library sends PostgreSQL).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Unique within the workflow (1–128 bytes, no control characters).
    pub name: String,
    /// Queue (default `default`).
    #[serde(default = "default_queue")]
    pub queue: String,
    /// Handler kind.
    pub kind: String,
    /// Handler arguments.
    #[serde(default = "empty_object")]
    pub args: serde_json::Value,
    /// Metadata (a JSON object; [`MARKER`] is added by Docket).
    #[serde(default = "empty_object")]
    pub metadata: serde_json::Value,
    /// Priority (lower first).
    #[serde(default)]
    pub priority: i16,
    /// Claims allowed.
    #[serde(default = "default_attempts")]
    pub max_attempts: i32,
    /// Retry backoff's first delay (ms); default as a plain job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_base_ms: Option<i64>,
    /// Retry backoff's cap (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_cap_ms: Option<i64>,
    /// Parents: names, or `{"node": name, "on_failure": "cancel" | "ignore" | "hold"}`.
    #[serde(default)]
    pub after: Vec<Dep>,
}

impl Node {
    /// The job this node enqueues (without the workflow's marker).
    pub fn job(&self) -> NewJob {
        crate::batches::JobSpec {
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            args: self.args.clone(),
            metadata: self.metadata.clone(),
            priority: self.priority,
            max_attempts: self.max_attempts,
            backoff_base_ms: self.backoff_base_ms,
            backoff_cap_ms: self.backoff_cap_ms,
        }
        .job()
    }
}

/// A whole workflow: a name and its nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// The workflow's name (1–128 bytes; not unique: it names a kind of workflow).
    pub name: String,
    /// Its nodes, in any order.
    pub nodes: Vec<Node>,
}

/// A graph refused, naming what is wrong; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The workflow's name is empty, too long or holds a control character.
    #[error("invalid workflow name {0:?}: use 1-128 bytes without control characters")]
    Name(String),
    /// No nodes.
    #[error("a workflow needs at least one node")]
    Empty,
    /// Over [`MAX_NODES`].
    #[error("{0} nodes, over the limit of {MAX_NODES}")]
    TooManyNodes(usize),
    /// Over [`MAX_EDGES`].
    #[error("{0} edges, over the limit of {MAX_EDGES}")]
    TooManyEdges(usize),
    /// A node's name is empty, too long or holds a control character.
    #[error("invalid node name {0:?}: use 1-128 bytes without control characters")]
    NodeName(String),
    /// Two nodes share a name.
    #[error("node {0:?} is defined twice")]
    Duplicate(String),
    /// A node depends on a name that is not in the graph.
    #[error("node {node:?} depends on {missing:?}, which is not in the workflow")]
    Missing {
        /// The node.
        node: String,
        /// The name it refers to.
        missing: String,
    },
    /// A node depends on itself.
    #[error("node {0:?} depends on itself")]
    SelfEdge(String),
    /// A node lists the same parent twice.
    #[error("node {node:?} lists {parent:?} twice")]
    DuplicateEdge {
        /// The node.
        node: String,
        /// The parent listed twice.
        parent: String,
    },
    /// The dependencies form a cycle through this node (the cycle, in order).
    #[error("a cycle through node {node:?}: {}", path.join(" -> "))]
    Cycle {
        /// A node on the cycle.
        node: String,
        /// The cycle, from `node` back to it.
        path: Vec<String>,
    },
    /// A node's job is invalid.
    #[error("node {node:?}: {error}")]
    Job {
        /// The node.
        node: String,
        /// What is wrong with its job.
        error: Box<ValidationError>,
    },
    /// A node uses an option a workflow node does not support yet.
    #[error("node {node:?}: {what} is not supported in a workflow node")]
    Unsupported {
        /// The node.
        node: String,
        /// The option.
        what: &'static str,
    },
}

fn good_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_BYTES && !s.chars().any(char::is_control)
}

impl Graph {
    /// Parses a JSON graph (a file, an argument), refusing unknown fields.
    pub fn from_json(text: &str) -> Result<Graph, ValidationError> {
        serde_json::from_str(text).map_err(|e| ValidationError::Other {
            what: "workflow graph",
            reason: e.to_string(),
        })
    }

    /// Checks the graph; returns the nodes in an order where every parent comes before its
    /// children (indexes into `nodes`).
    pub fn validate(&self, limits: &Limits) -> Result<Vec<usize>, WorkflowError> {
        if !good_name(&self.name) {
            return Err(WorkflowError::Name(validate::visible(&self.name)));
        }
        if self.nodes.is_empty() {
            return Err(WorkflowError::Empty);
        }
        if self.nodes.len() > MAX_NODES {
            return Err(WorkflowError::TooManyNodes(self.nodes.len()));
        }
        let edges: usize = self.nodes.iter().map(|n| n.after.len()).sum();
        if edges > MAX_EDGES {
            return Err(WorkflowError::TooManyEdges(edges));
        }
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            if !good_name(&n.name) {
                return Err(WorkflowError::NodeName(validate::visible(&n.name)));
            }
            if index.insert(n.name.as_str(), i).is_some() {
                return Err(WorkflowError::Duplicate(n.name.clone()));
            }
        }
        let mut parents: Vec<Vec<usize>> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let job = n.job();
            validate::new_job(&job, limits).map_err(|e| WorkflowError::Job {
                node: n.name.clone(),
                error: Box::new(e),
            })?;
            if n.metadata.get(MARKER).is_some() {
                return Err(WorkflowError::Unsupported {
                    node: n.name.clone(),
                    what: "the metadata key docket:workflow",
                });
            }
            let mut mine = Vec::with_capacity(n.after.len());
            for d in &n.after {
                let p = d.node();
                if p == n.name {
                    return Err(WorkflowError::SelfEdge(n.name.clone()));
                }
                let Some(&pi) = index.get(p) else {
                    return Err(WorkflowError::Missing {
                        node: n.name.clone(),
                        missing: validate::visible(p),
                    });
                };
                if mine.contains(&pi) {
                    return Err(WorkflowError::DuplicateEdge {
                        node: n.name.clone(),
                        parent: p.to_owned(),
                    });
                }
                mine.push(pi);
            }
            parents.push(mine);
        }
        topological(&self.nodes, &parents)
    }
}

/// Kahn's algorithm over the parent lists, then a walk to name a cycle if one is left.
/// Written here (thirty lines) rather than pulling a graph crate into every user's build for
/// one sort over at most a thousand nodes.
fn topological(nodes: &[Node], parents: &[Vec<usize>]) -> Result<Vec<usize>, WorkflowError> {
    let n = nodes.len();
    let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (c, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(c);
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut at = 0;
    while at < order.len() {
        let p = order[at];
        at += 1;
        for &c in &children[p] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                order.push(c);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every node left has a parent left: walking parents from any of them must come back
    // to a node already seen, which closes a cycle.
    let start = (0..n).find(|&i| waiting[i] > 0).expect("a node is left");
    let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
    let mut path = vec![start];
    let mut cur = start;
    loop {
        seen.insert(cur, path.len() - 1);
        let next = *parents[cur]
            .iter()
            .find(|&&p| waiting[p] > 0)
            .expect("a node left has a parent left");
        if let Some(&from) = seen.get(&next) {
            let mut cycle: Vec<String> = path[from..]
                .iter()
                .rev()
                .map(|&i| nodes[i].name.clone())
                .collect();
            cycle.insert(0, nodes[next].name.clone());
            cycle.dedup();
            let first = cycle[0].clone();
            if cycle.last() != Some(&first) {
                cycle.push(first.clone());
            }
            return Err(WorkflowError::Cycle {
                node: first,
                path: cycle,
            });
        }
        path.push(next);
        cur = next;
    }
}

/// A workflow built in code: `Workflow::new("signup").add("charge", job).add_after("email",
/// job2, ["charge"])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    graph: Graph,
    unsupported: Vec<(String, &'static str)>,
}

impl Workflow {
    /// An empty workflow named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Workflow {
            graph: Graph {
                name: name.into(),
                nodes: Vec::new(),
            },
            unsupported: Vec::new(),
        }
    }

    /// A node with no parents (a root).
    pub fn add(self, name: impl Into<String>, job: NewJob) -> Self {
        self.add_after(name, job, std::iter::empty::<Dep>())
    }

    /// A node that runs after `after` (names, or [`Dep::Edge`] for a policy).
    pub fn add_after<D: Into<Dep>>(
        mut self,
        name: impl Into<String>,
        job: NewJob,
        after: impl IntoIterator<Item = D>,
    ) -> Self {
        let name = name.into();
        if let Some(what) = crate::batches::unsupported(&job) {
            self.unsupported.push((name.clone(), what));
        }
        let spec = crate::batches::JobSpec::fields_of(&job);
        self.graph.nodes.push(Node {
            name,
            queue: spec.queue,
            kind: spec.kind,
            args: spec.args,
            metadata: spec.metadata,
            priority: spec.priority,
            max_attempts: spec.max_attempts,
            backoff_base_ms: spec.backoff_base_ms,
            backoff_cap_ms: spec.backoff_cap_ms,
            after: after.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// The graph, checked: what is enqueued.
    pub fn graph(&self, limits: &Limits) -> Result<&Graph, WorkflowError> {
        if let Some((node, what)) = self.unsupported.first() {
            return Err(WorkflowError::Unsupported {
                node: node.clone(),
                what,
            });
        }
        self.graph.validate(limits)?;
        Ok(&self.graph)
    }

    /// The graph as built, unchecked.
    pub fn into_graph(self) -> Graph {
        self.graph
    }
}

/// An enqueued workflow: its id and each node's job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowEnqueued {
    /// The workflow's id.
    pub id: i64,
    /// Each node's name and job id, in the graph's order.
    pub jobs: Vec<(String, JobId)>,
}

impl WorkflowEnqueued {
    /// The job id of node `name`.
    pub fn job(&self, name: &str) -> Option<JobId> {
        self.jobs.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
    }
}

/// The step that records a spawn named `step`, checked: `docket:spawn:<step>`.
pub fn spawn_step(step: &str) -> Result<String, ValidationError> {
    crate::steps::check_user_name(step)?;
    let name = format!("{}spawn:{step}", crate::steps::RESERVED_PREFIX);
    crate::steps::check_name(&name)?;
    Ok(name)
}

/// The jobs a recorded spawn created, from its step's output (`{node: job id}`).
pub fn spawned(workflow: i64, output: &serde_json::Value) -> Option<WorkflowEnqueued> {
    let map = output.as_object()?;
    let mut jobs: Vec<(String, JobId)> = map
        .iter()
        .map(|(k, v)| Some((k.clone(), JobId(v.as_i64()?))))
        .collect::<Option<_>>()?;
    jobs.sort_by_key(|(_, id)| *id);
    Some(WorkflowEnqueued { id: workflow, jobs })
}

/// A parent of a job as its child sees it: name, state and output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DepOutput {
    /// The parent's node name.
    pub node: String,
    /// The parent's job.
    pub id: JobId,
    /// Its state now.
    pub state: JobState,
    /// Its output, when it succeeded with one.
    pub output: Option<serde_json::Value>,
}

/// A node's successful end, with its output if it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDone {
    /// The claim being completed.
    pub lease: crate::Lease,
    /// The output, checked by [`crate::output::check`] before it gets here.
    pub output: Option<serde_json::Value>,
}

/// The marker [`MARKER`] of a claimed job's metadata: (workflow id, node name).
pub fn marker(metadata: &serde_json::Value) -> Option<(i64, &str)> {
    let m = metadata.get(MARKER)?;
    Some((m.get("id")?.as_i64()?, m.get("node")?.as_str()?))
}

/// The metadata a node's job is stored with: its own, plus the marker.
pub fn marked_metadata(node: &Node, workflow: i64) -> serde_json::Value {
    let mut m = match &node.metadata {
        serde_json::Value::Object(o) => o.clone(),
        _ => Default::default(),
    };
    m.insert(
        MARKER.to_owned(),
        serde_json::json!({"id": workflow, "node": node.name}),
    );
    serde_json::Value::Object(m)
}

/// What an engine's skip of a held edge found, as a typed error (or `None`: skipped).
/// `parent_state` is the parent's state when it had not ended.
pub fn skip_refusal(parent: JobId, child: JobId, outcome: &str) -> Option<crate::StoreError> {
    let other = |reason: String| {
        Some(crate::StoreError::Invalid(ValidationError::Other {
            what: "edge",
            reason,
        }))
    };
    match outcome {
        "skipped" => None,
        "no_edge" => other(format!("job {child} has no parent {parent} in a workflow")),
        "consumed" => other(format!(
            "the edge from job {parent} to job {child} was already consumed (satisfied or failed)"
        )),
        s => match s
            .strip_prefix("parent_")
            .and_then(|p| p.parse::<JobState>().ok())
        {
            Some(state) => Some(crate::StoreError::WrongState {
                id: parent,
                state,
                op: "skip edge (only an edge whose parent ended dead or cancelled can be skipped)",
            }),
            None => other(format!("unexpected outcome {s:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, after: &[&str]) -> Node {
        Node {
            name: name.into(),
            queue: "q".into(),
            kind: "k".into(),
            args: serde_json::json!({}),
            metadata: serde_json::json!({}),
            priority: 0,
            max_attempts: 3,
            backoff_base_ms: None,
            backoff_cap_ms: None,
            after: after.iter().map(|&a| Dep::from(a)).collect(),
        }
    }

    fn graph(nodes: Vec<Node>) -> Graph {
        Graph {
            name: "g".into(),
            nodes,
        }
    }

    #[test]
    fn a_diamond_sorts_parents_first() {
        let g = graph(vec![
            node("d", &["b", "c"]),
            node("b", &["a"]),
            node("c", &["a"]),
            node("a", &[]),
        ]);
        let order = g.validate(&Limits::default()).unwrap();
        let pos = |n: &str| order.iter().position(|&i| g.nodes[i].name == n).unwrap();
        assert!(pos("a") < pos("b") && pos("a") < pos("c"));
        assert!(pos("b") < pos("d") && pos("c") < pos("d"));
    }

    #[test]
    fn bad_graphs_are_refused_naming_the_node() {
        let l = Limits::default();
        let e = graph(vec![node("a", &[]), node("a", &[])]).validate(&l);
        assert_eq!(e, Err(WorkflowError::Duplicate("a".into())));
        let e = graph(vec![node("a", &["zz"])]).validate(&l);
        assert!(
            matches!(e, Err(WorkflowError::Missing { ref node, ref missing }) if node == "a" && missing == "zz")
        );
        let e = graph(vec![node("a", &["a"])]).validate(&l);
        assert_eq!(e, Err(WorkflowError::SelfEdge("a".into())));
        let e = graph(vec![node("a", &[]), node("b", &["a", "a"])]).validate(&l);
        assert!(matches!(e, Err(WorkflowError::DuplicateEdge { .. })));
        let e = graph(vec![]).validate(&l);
        assert_eq!(e, Err(WorkflowError::Empty));
        let e = graph(vec![node("", &[])]).validate(&l);
        assert!(matches!(e, Err(WorkflowError::NodeName(_))));
        let mut bad = node("a", &[]);
        bad.queue = "no spaces".into();
        assert!(matches!(
            graph(vec![bad]).validate(&l),
            Err(WorkflowError::Job { .. })
        ));
    }

    #[test]
    fn a_cycle_is_named_in_order() {
        let g = graph(vec![
            node("root", &[]),
            node("a", &["root", "c"]),
            node("b", &["a"]),
            node("c", &["b"]),
            node("tail", &["c"]),
        ]);
        match g.validate(&Limits::default()) {
            Err(WorkflowError::Cycle { node, path }) => {
                assert_eq!(path.first(), Some(&node));
                assert_eq!(path.last(), Some(&node));
                assert_eq!(path.len(), 4, "{path:?}");
                for w in path.windows(2) {
                    // Each step goes from a node to one of its children.
                    let child = g.nodes.iter().find(|n| n.name == w[1]).unwrap();
                    assert!(child.after.iter().any(|d| d.node() == w[0]), "{path:?}");
                }
            }
            other => panic!("expected a cycle, got {other:?}"),
        }
    }

    #[test]
    fn caps_are_enforced() {
        let l = Limits::default();
        let many: Vec<Node> = (0..=MAX_NODES)
            .map(|i| node(&format!("n{i}"), &[]))
            .collect();
        assert_eq!(
            graph(many).validate(&l),
            Err(WorkflowError::TooManyNodes(MAX_NODES + 1))
        );
        let mut nodes: Vec<Node> = (0..1000).map(|i| node(&format!("n{i}"), &[])).collect();
        let names: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
        for j in 0..120 {
            let mut n = node(&format!("j{j}"), &[]);
            n.after = names.iter().map(|s| Dep::from(s.as_str())).collect();
            nodes.push(n);
        }
        assert_eq!(
            graph(nodes).validate(&l),
            Err(WorkflowError::TooManyEdges(120_000))
        );
    }

    #[test]
    fn the_json_shape_round_trips_and_refuses_unknown_fields() {
        let text = r#"{"name":"signup","nodes":[
            {"name":"charge","kind":"charge","args":{"cents":100}},
            {"name":"email","queue":"mail","kind":"email","after":["charge"]},
            {"name":"audit","kind":"audit","after":[{"node":"charge","on_failure":"ignore"}]}]}"#;
        let g = Graph::from_json(text).unwrap();
        assert_eq!(g.nodes[0].queue, "default");
        assert_eq!(g.nodes[2].after[0].on_failure(), OnFailure::Ignore);
        assert_eq!(g.nodes[1].after[0].on_failure(), OnFailure::Cancel);
        let back = Graph::from_json(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
        assert!(
            Graph::from_json(r#"{"name":"x","nodes":[{"name":"a","kind":"k","afterr":[]}]}"#)
                .is_err()
        );
    }

    #[test]
    fn the_builder_refuses_options_a_node_cannot_carry() {
        let j = NewJob::new("q", "k", serde_json::json!({})).unique_key("u");
        let w = Workflow::new("w").add("a", j);
        assert!(matches!(
            w.graph(&Limits::default()),
            Err(WorkflowError::Unsupported { .. })
        ));
        let ok = Workflow::new("w")
            .add("a", NewJob::new("q", "k", serde_json::json!({})))
            .add_after("b", NewJob::new("q", "k", serde_json::json!({})), ["a"]);
        assert_eq!(ok.graph(&Limits::default()).unwrap().nodes.len(), 2);
    }

    #[test]
    fn the_marker_round_trips() {
        let n = node("a", &[]);
        let m = marked_metadata(&n, 42);
        assert_eq!(marker(&m), Some((42, "a")));
        assert_eq!(marker(&serde_json::json!({})), None);
    }
}
