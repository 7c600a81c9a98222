//! The model-based test of workflows: random graphs of up to eight nodes with random edge
//! policies, driven by random sequences of claims, completions (fresh and stale), failures,
//! operator cancels and retries, reaps — compared with an in-memory model of the rules
//! (`docs/workflows.md`) after every step, node by node.

use docket_core::workflow::{Dep, Graph, Node, OnFailure};
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;

use super::*;

/// One step of a case. Node indexes are taken modulo the graph's size.
#[derive(Debug, Clone)]
enum Op {
    /// Claim everything claimable (the model predicts exactly which nodes).
    Claim,
    /// Complete a running node under its claim.
    Complete(usize),
    /// Complete a running node with the attempt before its claim's: refused, nothing moves.
    Stale(usize),
    /// Fail a running node for good (dead).
    Fail(usize),
    /// An operator cancels a waiting or pending node.
    Cancel(usize),
    /// An operator retries a dead or cancelled node.
    Retry(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Claim),
        4 => (0..8usize).prop_map(Op::Complete),
        1 => (0..8usize).prop_map(Op::Stale),
        2 => (0..8usize).prop_map(Op::Fail),
        1 => (0..8usize).prop_map(Op::Cancel),
        2 => (0..8usize).prop_map(Op::Retry),
    ]
}

/// A graph: for each node, its parents among the earlier ones, each with a policy.
fn dag() -> impl Strategy<Value = Vec<Vec<(usize, OnFailure)>>> {
    (1..=8usize).prop_flat_map(|n| {
        (0..n)
            .map(|i| {
                proptest::collection::vec(
                    (
                        0..i.max(1),
                        prop_oneof![
                            Just(OnFailure::Cancel),
                            Just(OnFailure::Ignore),
                            Just(OnFailure::Hold)
                        ],
                    ),
                    0..=i.min(3),
                )
                .prop_map(move |mut v| {
                    if i == 0 {
                        v.clear();
                    }
                    v.sort_by_key(|(p, _)| *p);
                    v.dedup_by_key(|(p, _)| *p);
                    v
                })
            })
            .collect::<Vec<_>>()
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Waiting,
    Satisfied,
    Failed,
}

struct Model {
    parents: Vec<Vec<(usize, OnFailure)>>,
    state: Vec<JobState>,
    /// Edge (parent, child) → its state.
    edges: std::collections::HashMap<(usize, usize), Edge>,
}

impl Model {
    fn new(parents: Vec<Vec<(usize, OnFailure)>>) -> Self {
        let mut edges = std::collections::HashMap::new();
        for (c, ps) in parents.iter().enumerate() {
            for &(p, _) in ps {
                edges.insert((p, c), Edge::Waiting);
            }
        }
        let state = parents
            .iter()
            .map(|p| {
                if p.is_empty() {
                    JobState::Pending
                } else {
                    JobState::Waiting
                }
            })
            .collect();
        Model {
            parents,
            state,
            edges,
        }
    }

    fn waiting_into(&self, c: usize) -> usize {
        self.parents[c]
            .iter()
            .filter(|(p, _)| self.edges[&(*p, c)] == Edge::Waiting)
            .count()
    }

    /// `workflow_resolve()`: node `p` just reached `st`.
    fn resolve(&mut self, p: usize, st: JobState) {
        let mut work = vec![(p, st)];
        while let Some((p, st)) = work.pop() {
            for c in 0..self.parents.len() {
                let Some(&(_, policy)) = self.parents[c].iter().find(|(x, _)| *x == p) else {
                    continue;
                };
                if self.edges[&(p, c)] != Edge::Waiting {
                    continue;
                }
                if st == JobState::Succeeded || policy == OnFailure::Ignore {
                    self.edges.insert((p, c), Edge::Satisfied);
                    if self.state[c] == JobState::Waiting && self.waiting_into(c) == 0 {
                        self.state[c] = JobState::Pending;
                    }
                } else if policy == OnFailure::Cancel {
                    self.edges.insert((p, c), Edge::Failed);
                    if self.state[c] == JobState::Waiting {
                        self.state[c] = JobState::Cancelled;
                        work.push((c, JobState::Cancelled));
                    }
                }
            }
        }
    }

    /// `retry_job()` of node `c`.
    fn retry(&mut self, c: usize) {
        for &(p, _) in &self.parents[c] {
            if self.edges[&(p, c)] == Edge::Failed {
                let again = if self.state[p] == JobState::Succeeded {
                    Edge::Satisfied
                } else {
                    Edge::Waiting
                };
                self.edges.insert((p, c), again);
            }
        }
        self.state[c] = if self.waiting_into(c) > 0 {
            JobState::Waiting
        } else {
            JobState::Pending
        };
    }
}

async fn run_case<H: Harness>(
    h: &H,
    parents: &[Vec<(usize, OnFailure)>],
    ops: &[Op],
) -> Result<(), TestCaseError> {
    h.reset().await;
    let s = h.store();
    let graph = Graph {
        name: "model".into(),
        nodes: parents
            .iter()
            .enumerate()
            .map(|(i, ps)| Node {
                name: format!("n{i}"),
                queue: "q".into(),
                kind: "k".into(),
                args: json!({}),
                metadata: json!({}),
                priority: 0,
                max_attempts: 25,
                backoff_base_ms: None,
                backoff_cap_ms: None,
                after: ps
                    .iter()
                    .map(|&(p, on_failure)| Dep::Edge {
                        node: format!("n{p}"),
                        on_failure,
                    })
                    .collect(),
            })
            .collect(),
    };
    let wf = s
        .enqueue_workflow(&graph)
        .await
        .map_err(|e| TestCaseError::fail(format!("enqueue: {e}")))?;
    let ids: Vec<JobId> = (0..parents.len())
        .map(|i| wf.job(&format!("n{i}")).expect("a job per node"))
        .collect();
    let mut m = Model::new(parents.to_vec());
    let mut held: Vec<Option<ClaimedJob>> = vec![None; parents.len()];
    let n = parents.len();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Claim => {
                let got = claim(s, "q", 50, "w", LONG).await;
                let mut want: Vec<JobId> = (0..n)
                    .filter(|&i| m.state[i] == JobState::Pending)
                    .map(|i| ids[i])
                    .collect();
                let mut seen: Vec<JobId> = got.iter().map(|j| j.id).collect();
                want.sort();
                seen.sort();
                prop_assert_eq!(&seen, &want, "step {}: {:?} claimed", step, op);
                for j in got {
                    let i = ids.iter().position(|x| *x == j.id).expect("a node");
                    m.state[i] = JobState::Running;
                    held[i] = Some(j);
                }
            }
            Op::Complete(i) | Op::Stale(i) => {
                let i = i % n;
                let Some(j) = held[i].clone() else { continue };
                if m.state[i] != JobState::Running {
                    continue;
                }
                let stale = matches!(op, Op::Stale(_));
                let mut l = lease(&j);
                if stale {
                    l.attempt -= 1;
                }
                let out = s
                    .complete_nodes(
                        "w",
                        &[NodeDone {
                            lease: l,
                            output: None,
                        }],
                    )
                    .await
                    .map_err(|e| TestCaseError::fail(format!("complete: {e}")))?;
                prop_assert_eq!(out.applied.len(), usize::from(!stale), "step {}", step);
                if !stale {
                    m.state[i] = JobState::Succeeded;
                    m.resolve(i, JobState::Succeeded);
                    held[i] = None;
                }
            }
            Op::Fail(i) => {
                let i = i % n;
                let Some(j) = held[i].clone() else { continue };
                if m.state[i] != JobState::Running {
                    continue;
                }
                let f = Failure {
                    lease: lease(&j),
                    class: FailureClass::Discard,
                    message: "no".into(),
                    retry_in: None,
                };
                s.fail_many("w", &[f])
                    .await
                    .map_err(|e| TestCaseError::fail(format!("fail: {e}")))?;
                m.state[i] = JobState::Dead;
                m.resolve(i, JobState::Dead);
                held[i] = None;
            }
            Op::Cancel(i) => {
                let i = i % n;
                if !matches!(m.state[i], JobState::Waiting | JobState::Pending) {
                    continue;
                }
                s.cancel(ids[i])
                    .await
                    .map_err(|e| TestCaseError::fail(format!("cancel: {e}")))?;
                m.state[i] = JobState::Cancelled;
                m.resolve(i, JobState::Cancelled);
            }
            Op::Retry(i) => {
                let i = i % n;
                if !matches!(m.state[i], JobState::Dead | JobState::Cancelled) {
                    continue;
                }
                s.retry(ids[i], 1)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("retry: {e}")))?;
                m.retry(i);
            }
        }
        for (i, id) in ids.iter().enumerate() {
            let got = s
                .get(*id)
                .await
                .map_err(|e| TestCaseError::fail(format!("get: {e}")))?
                .state;
            prop_assert_eq!(
                got,
                m.state[i],
                "step {} ({:?}): node n{} of {:?}",
                step,
                op,
                i,
                parents
            );
        }
    }
    Ok(())
}

/// Runs the model test over harness `H`: 64 cases of a random graph and up to 30 steps
/// (`DOCKET_WORKFLOW_MODEL_CASES` to change), each compared after every step.
pub fn run<H: Harness>() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let h = rt.block_on(H::fresh());
    let cases = std::env::var("DOCKET_WORKFLOW_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: if docket_core::mutants::current().is_some() {
            0
        } else {
            Config::default().max_shrink_iters
        },
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (dag(), proptest::collection::vec(op(), 1..30));
    if let Err(e) = runner.run(&strategy, |(parents, ops)| {
        rt.block_on(run_case(&h, &parents, &ops))
    }) {
        panic!("{e}");
    }
}
