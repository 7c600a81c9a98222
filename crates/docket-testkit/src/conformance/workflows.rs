//! Workflows: a graph enqueued all at once or not at all; a node claimable only once every
//! parent has succeeded (or ended on an `ignore` edge); each edge consumed once, by the
//! write that ended its parent under that parent's claim — so a stale attempt unblocks
//! nothing; the failure policies (`cancel` transitively, `ignore`, `hold`) applied on every
//! path that ends a parent (a failure, the reaper, an operator's cancel); parents' outputs
//! readable by their children.

use std::time::Duration;

use docket_core::workflow::{Dep, Graph, OnFailure, Workflow, WorkflowError};
use docket_core::*;
use serde_json::json;

use super::*;

fn node(name: &str) -> NewJob {
    NewJob::new("q", "node", json!({ "node": name }))
}

fn edge(parent: &str, on_failure: OnFailure) -> Dep {
    Dep::Edge {
        node: parent.into(),
        on_failure,
    }
}

fn graph(w: Workflow) -> Graph {
    w.graph(&Limits::default()).expect("a valid graph").clone()
}

async fn state<S: Store>(s: &S, id: JobId) -> JobState {
    get(s, id).await.state
}

/// Claims what `q` hands out now, as ids sorted.
async fn ready<S: Store>(s: &S, owner: &str) -> Vec<ClaimedJob> {
    let mut v = claim(s, "q", 50, owner, LONG).await;
    v.sort_by_key(|c| c.id);
    v
}

fn done(c: &ClaimedJob, output: Option<serde_json::Value>) -> NodeDone {
    NodeDone {
        lease: lease(c),
        output,
    }
}

fn discard(c: &ClaimedJob) -> Failure {
    Failure {
        lease: lease(c),
        class: FailureClass::Discard,
        message: "broken".into(),
        retry_in: None,
    }
}

/// A diamond (a → b, a → c, b and c → d): only the root is claimable; each completion
/// makes claimable exactly the children whose last parent it was; a child reads its
/// parents' outputs by name; every node carries the workflow's marker.
pub async fn a_graph_runs_each_node_after_its_parents<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("diamond")
            .add("a", node("a"))
            .add_after("b", node("b"), ["a"])
            .add_after("c", node("c"), ["a"])
            .add_after("d", node("d"), ["b", "c"]),
    );
    let wf = s.enqueue_workflow(&g).await.expect("enqueue_workflow");
    let id = |n: &str| wf.job(n).expect("node");
    assert_eq!(wf.jobs.len(), 4);
    for n in ["b", "c", "d"] {
        assert_eq!(state(s, id(n)).await, JobState::Waiting, "{n}");
    }
    let first = ready(s, "w").await;
    assert_eq!(
        first.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![id("a")]
    );
    assert_eq!(
        workflow::marker(&first[0].metadata),
        Some((wf.id, "a")),
        "the claimed job carries its workflow and name"
    );
    let out = s
        .complete_nodes("w", &[done(&first[0], Some(json!({"charged": 5})))])
        .await
        .unwrap();
    assert_eq!(out.applied, vec![lease(&first[0])]);
    assert_eq!(state(s, id("d")).await, JobState::Waiting);
    let second = ready(s, "w").await;
    assert_eq!(
        second.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![id("b"), id("c")]
    );
    let deps = s.dep_outputs(id("b")).await.unwrap();
    assert_eq!(deps.len(), 1);
    assert_eq!(
        (deps[0].node.as_str(), deps[0].id, deps[0].state),
        ("a", id("a"), JobState::Succeeded)
    );
    assert_eq!(deps[0].output, Some(json!({"charged": 5})));
    s.complete_nodes("w", &[done(&second[0], None)])
        .await
        .unwrap();
    assert_eq!(
        state(s, id("d")).await,
        JobState::Waiting,
        "one parent of two"
    );
    let why = s.why(id("d")).await.unwrap();
    assert_eq!(
        why.gates,
        vec![Gate::WaitingForParents {
            unfinished: vec![("c".into(), JobState::Running)],
            total: 2
        }]
    );
    assert_eq!(
        why.gates[0].describe("q"),
        "waiting for 1 of 2 parents: c (running)"
    );
    assert!(ready(s, "w").await.is_empty());
    s.complete_nodes("w", &[done(&second[1], Some(json!("c")))])
        .await
        .unwrap();
    let last = ready(s, "w").await;
    assert_eq!(last.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id("d")]);
    let deps = s.dep_outputs(id("d")).await.unwrap();
    let seen: Vec<(String, Option<serde_json::Value>)> =
        deps.into_iter().map(|d| (d.node, d.output)).collect();
    assert_eq!(
        seen,
        vec![("b".into(), None), ("c".into(), Some(json!("c")))]
    );
    s.complete_nodes("w", &[done(&last[0], None)])
        .await
        .unwrap();
    for n in ["a", "b", "c", "d"] {
        assert_eq!(state(s, id(n)).await, JobState::Succeeded, "{n}");
    }
    assert!(s.dep_outputs(id("a")).await.unwrap().is_empty(), "a root");
}

/// Every malformed graph is refused naming what is wrong, and writes nothing.
pub async fn a_refused_graph_writes_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let n = |name: &str, after: &[&str]| workflow::Node {
        name: name.into(),
        queue: "q".into(),
        kind: "k".into(),
        args: json!({}),
        metadata: json!({}),
        priority: 0,
        max_attempts: 3,
        backoff_base_ms: None,
        backoff_cap_ms: None,
        after: after.iter().map(|&a| Dep::from(a)).collect(),
    };
    let g = |nodes| Graph {
        name: "bad".into(),
        nodes,
    };
    let mut bad_queue = n("x", &[]);
    bad_queue.queue = "not a queue".into();
    let cases: Vec<(Graph, &str)> = vec![
        (
            g(vec![n("a", &["c"]), n("b", &["a"]), n("c", &["b"])]),
            "cycle",
        ),
        (g(vec![n("a", &["nope"])]), "nope"),
        (g(vec![n("a", &[]), n("a", &[])]), "twice"),
        (g(vec![n("a", &["a"])]), "itself"),
        (g(vec![n("a", &[]), n("b", &["a", "a"])]), "twice"),
        (g(vec![]), "at least one node"),
        (g(vec![n("ok", &[]), bad_queue]), "\"x\""),
        (
            g((0..=workflow::MAX_NODES)
                .map(|i| n(&format!("n{i}"), &[]))
                .collect()),
            "over the limit",
        ),
    ];
    for (graph, says) in cases {
        let e = s.enqueue_workflow(&graph).await.expect_err("refused");
        assert!(
            matches!(e, StoreError::Invalid(_)),
            "{says}: a validation error, got {e:?}"
        );
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    assert!(all(s).await.is_empty(), "nothing was written");
    assert!(matches!(
        Workflow::new("w")
            .add("a", node("a").concurrency_key("k"))
            .graph(&Limits::default()),
        Err(WorkflowError::Unsupported { .. })
    ));
}

/// A parent whose claim was superseded (reaped, claimed again) completes nothing and
/// unblocks nothing; its successor's completion does. A stale failure ends nothing either.
pub async fn a_stale_parent_unblocks_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("stale")
            .add("p", node("p"))
            .add_after("c", node("c"), ["p"]),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let (p, c) = (wf.job("p").unwrap(), wf.job("c").unwrap());
    let old = claim(s, "q", 1, "w1", Duration::from_secs(5)).await;
    assert_eq!(old[0].id, p);
    h.advance(Duration::from_secs(6)).await;
    assert_eq!(s.reap(10).await.unwrap().jobs.len(), 1);
    // Past the reaper's backoff.
    h.advance(Duration::from_secs(3600)).await;
    let new = claim(s, "q", 1, "w2", LONG).await;
    assert_eq!(new[0].id, p);

    let out = s
        .complete_nodes("w1", &[done(&old[0], None)])
        .await
        .unwrap();
    assert!(out.applied.is_empty());
    assert_eq!(out.lost.len(), 1);
    let out = s.fail_many("w1", &[discard(&old[0])]).await.unwrap();
    assert!(out.applied.is_empty());
    assert_eq!(
        state(s, c).await,
        JobState::Waiting,
        "a stale attempt unblocks nothing"
    );
    assert_eq!(state(s, p).await, JobState::Running);
    assert!(claim(s, "q", 5, "w3", LONG).await.is_empty());

    s.complete_nodes("w2", &[done(&new[0], None)])
        .await
        .unwrap();
    let next = claim(s, "q", 5, "w2", LONG).await;
    assert_eq!(next.iter().map(|j| j.id).collect::<Vec<_>>(), vec![c]);
}

/// A parent that ends dead: its `cancel` children are cancelled with the reason, and theirs
/// after them; an `ignore` child runs; a `hold` child waits until the parent is retried and
/// succeeds. The reaper's dead end applies the same rule.
pub async fn failure_policies_apply_on_every_end<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("policies")
            .add("p", node("p"))
            .add_after("cancelled", node("x"), [edge("p", OnFailure::Cancel)])
            .add_after("grandchild", node("g"), ["cancelled"])
            .add_after("ignored", node("i"), [edge("p", OnFailure::Ignore)])
            .add_after("held", node("h"), [edge("p", OnFailure::Hold)]),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let p = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(p.len(), 1);
    s.fail_many("w", &[discard(&p[0])]).await.unwrap();
    assert_eq!(state(s, id("p")).await, JobState::Dead);
    let cancelled = get(s, id("cancelled")).await;
    assert_eq!(cancelled.state, JobState::Cancelled);
    let last = cancelled.errors.last().expect("a reason is recorded");
    assert_eq!(last.class, "dependency");
    assert!(
        last.message.contains("parent p ended dead"),
        "the reason names the parent: {last:?}"
    );
    assert_eq!(state(s, id("grandchild")).await, JobState::Cancelled);
    assert_eq!(state(s, id("ignored")).await, JobState::Pending);
    assert_eq!(state(s, id("held")).await, JobState::Waiting);

    let ignored = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(
        ignored.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![id("ignored")]
    );
    let deps = s.dep_outputs(id("ignored")).await.unwrap();
    assert_eq!(
        (deps[0].state, deps[0].output.clone()),
        (JobState::Dead, None)
    );
    s.complete_nodes(
        "w",
        &ignored.iter().map(|j| done(j, None)).collect::<Vec<_>>(),
    )
    .await
    .unwrap();

    s.retry(id("p"), 1).await.unwrap();
    let again = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(
        again.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![id("p")]
    );
    s.complete_nodes("w", &[done(&again[0], None)])
        .await
        .unwrap();
    assert_eq!(state(s, id("held")).await, JobState::Pending);
    assert_eq!(
        state(s, id("cancelled")).await,
        JobState::Cancelled,
        "a consumed edge is not consumed again"
    );

    // The reaper: a parent out of attempts ends dead, and its child with it.
    let g = graph(
        Workflow::new("reaped")
            .add("r", node("r").max_attempts(1))
            .add_after("after", node("a"), ["r"]),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let held = claim(s, "q", 5, "w", LONG).await;
    assert!(held.iter().any(|j| Some(j.id) == wf.job("r")), "r claimed");
    // Everything else this claim took is completed; only r is left to expire.
    let others: Vec<NodeDone> = held
        .iter()
        .filter(|j| Some(j.id) != wf.job("r"))
        .map(|j| done(j, None))
        .collect();
    s.complete_nodes("w", &others).await.unwrap();
    h.advance(LONG + Duration::from_secs(1)).await;
    let reaped = s.reap(10).await.unwrap();
    assert_eq!(reaped.jobs.len(), 1);
    assert_eq!(reaped.jobs[0].state, JobState::Dead);
    assert_eq!(
        state(s, wf.job("after").unwrap()).await,
        JobState::Cancelled
    );
}

/// An operator's cancel of a waiting node is applied once: it and its `cancel` children
/// end; its parent's later success does not revive it; a retry makes it wait again for
/// what is still unfinished, and run once that succeeds.
pub async fn an_operator_cancel_of_a_waiting_node_is_applied_once<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("cancel")
            .add("p", node("p"))
            .add_after("x", node("x"), ["p"])
            .add_after("y", node("y"), ["x"]),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    assert_eq!(s.cancel(id("x")).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(state(s, id("x")).await, JobState::Cancelled);
    assert_eq!(state(s, id("y")).await, JobState::Cancelled);
    assert!(matches!(
        s.cancel(id("x")).await,
        Err(StoreError::WrongState { .. })
    ));
    // Retried while its parent is unfinished: it waits again (and y stays cancelled).
    s.retry(id("x"), 1).await.unwrap();
    assert_eq!(state(s, id("x")).await, JobState::Waiting);
    let p = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(p.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id("p")]);
    s.complete_nodes("w", &[done(&p[0], None)]).await.unwrap();
    let x = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(x.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id("x")]);
    s.complete_nodes("w", &[done(&x[0], None)]).await.unwrap();
    assert_eq!(state(s, id("y")).await, JobState::Cancelled);
    assert!(claim(s, "q", 5, "w", LONG).await.is_empty());
}

/// Each edge is consumed once: a parent that ended dead on an `ignore` edge, then was
/// retried and succeeded, does not count twice toward its child, which still waits for its
/// other parent.
pub async fn an_edge_is_consumed_once<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("once")
            .add("p", node("p"))
            .add("q", node("q"))
            .add_after(
                "c",
                node("c"),
                [edge("p", OnFailure::Ignore), edge("q", OnFailure::Cancel)],
            ),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let roots = ready(s, "w").await;
    assert_eq!(roots.len(), 2);
    let (p, q) = (&roots[0], &roots[1]);
    assert_eq!((p.id, q.id), (id("p"), id("q")));
    s.fail_many("w", &[discard(p)]).await.unwrap();
    assert_eq!(state(s, id("c")).await, JobState::Waiting);
    s.retry(id("p"), 1).await.unwrap();
    let p2 = ready(s, "w").await;
    assert_eq!(p2.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id("p")]);
    s.complete_nodes("w", &[done(&p2[0], None)]).await.unwrap();
    assert_eq!(
        state(s, id("c")).await,
        JobState::Waiting,
        "p's edge was consumed when p died; q has not finished"
    );
    assert!(ready(s, "w").await.is_empty());
    s.complete_nodes("w", &[done(q, None)]).await.unwrap();
    let c = ready(s, "w").await;
    assert_eq!(c.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id("c")]);
}

/// Pruning a finished workflow's nodes takes their edges and then the workflow's row with
/// them; an unfinished workflow keeps both.
pub async fn finished_workflows_are_pruned<H: Harness>(h: &H) {
    let s = h.store();
    let two = |name: &str| {
        graph(
            Workflow::new(name)
                .add("a", node("a"))
                .add_after("b", node("b"), ["a"]),
        )
    };
    let done_wf = s.enqueue_workflow(&two("done")).await.unwrap();
    let open_wf = s.enqueue_workflow(&two("open")).await.unwrap();
    let roots = ready(s, "w").await;
    assert_eq!(roots.len(), 2);
    let a = roots
        .iter()
        .find(|j| Some(j.id) == done_wf.job("a"))
        .unwrap();
    s.complete_nodes("w", &[done(a, None)]).await.unwrap();
    let b = ready(s, "w").await;
    assert_eq!(
        b.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![done_wf.job("b").unwrap()]
    );
    s.complete_nodes("w", &[done(&b[0], None)]).await.unwrap();
    h.advance(Duration::from_secs(120)).await;
    let report = s
        .prune(&Retention {
            finished: Duration::ZERO,
            dead: Duration::ZERO,
            outputs: Duration::ZERO,
            batch: 100,
        })
        .await
        .unwrap();
    assert_eq!(report.finished, 2, "the finished workflow's two nodes");
    assert_eq!(report.workflow_rows, 2, "its edge, then its workflow row");
    assert_eq!(
        state(s, open_wf.job("b").unwrap()).await,
        JobState::Waiting,
        "the unfinished workflow is untouched"
    );
    let again = s
        .prune(&Retention {
            finished: Duration::ZERO,
            dead: Duration::ZERO,
            outputs: Duration::ZERO,
            batch: 100,
        })
        .await
        .unwrap();
    assert_eq!(again.workflow_rows, 0);
}

/// A workflow reads back whole — its state, its nodes by state, its edges, each node's
/// depth — and an operator cancels it and retries it whole, parents first: the retried
/// nodes wait again for their parents and the workflow runs to success.
pub async fn a_workflow_is_read_cancelled_and_retried_whole<H: Harness>(h: &H) {
    use docket_core::workflow::WorkflowState;
    let s = h.store();
    let g = graph(
        Workflow::new("ops")
            .add("a", node("a"))
            .add_after("b", node("b"), ["a"])
            .add_after("c", node("c"), ["b"])
            .add("d", node("d")),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let list = s.workflows(10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].id, list[0].name.as_str(), list[0].nodes),
        (wf.id, "ops", 4)
    );
    assert_eq!(list[0].state, WorkflowState::Running);
    assert_eq!(
        list[0].counts,
        vec![(JobState::Waiting, 2), (JobState::Pending, 2)]
    );
    let w = s.workflow(wf.id).await.unwrap();
    assert_eq!(w.summary, list[0]);
    assert_eq!(
        w.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        vec!["a", "b", "c", "d"]
    );
    assert_eq!(w.edges.len(), 2);
    assert_eq!(w.depths(), vec![0, 1, 2, 0]);
    assert!(matches!(
        s.workflow(wf.id + 1000).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(s.workflows(0).await, Err(StoreError::Invalid(_))));

    assert!(s.cancel_workflow(wf.id).await.unwrap() >= 2);
    for n in ["a", "b", "c", "d"] {
        assert_eq!(state(s, id(n)).await, JobState::Cancelled, "{n}");
    }
    assert_eq!(
        s.workflow(wf.id).await.unwrap().summary.state,
        WorkflowState::Cancelled
    );
    assert_eq!(s.retry_workflow(wf.id).await.unwrap(), 4);
    assert_eq!(state(s, id("a")).await, JobState::Pending);
    assert_eq!(state(s, id("b")).await, JobState::Waiting);
    assert_eq!(state(s, id("c")).await, JobState::Waiting);
    assert_eq!(state(s, id("d")).await, JobState::Pending);
    for _ in 0..3 {
        let batch = ready(s, "w").await;
        assert!(!batch.is_empty(), "a node is ready at each level");
        s.complete_nodes(
            "w",
            &batch.iter().map(|j| done(j, None)).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    }
    assert_eq!(
        s.workflow(wf.id).await.unwrap().summary.state,
        WorkflowState::Succeeded
    );
}

/// A running node spawns children and a node after them into its workflow: under its claim
/// only (a stale attempt spawns nothing and writes nothing), once per name (a second call
/// returns the same jobs), its own dependents then wait for the spawned join too, and the
/// whole runs in order: the node, its children, the join, then its old dependent.
pub async fn a_running_node_spawns_once_under_its_claim<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(Workflow::new("spawn").add("s", node("s")).add_after(
        "after",
        node("after"),
        ["s"],
    ));
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let fan = graph(
        Workflow::new("fan")
            .add("x1", node("x1"))
            .add("x2", node("x2"))
            .add_after("join", node("join"), ["x1", "x2"]),
    );
    // A stale claim first: claimed, expired, reaped, claimed again by another worker.
    let old = claim(s, "q", 1, "w1", Duration::from_secs(5)).await;
    assert_eq!(old[0].id, id("s"));
    h.advance(Duration::from_secs(6)).await;
    s.reap(10).await.unwrap();
    h.advance(Duration::from_secs(3600)).await;
    let new = claim(s, "q", 1, "w2", LONG).await;
    assert_eq!(new[0].id, id("s"));
    let before = all(s).await.len();
    let e = s
        .spawn_nodes("w1", lease(&old[0]), "fan", &fan)
        .await
        .expect_err("a stale attempt spawns nothing");
    assert!(matches!(e, StoreError::LeaseLost(_)), "{e:?}");
    assert_eq!(all(s).await.len(), before, "nothing was written");

    let spawned = s
        .spawn_nodes("w2", lease(&new[0]), "fan", &fan)
        .await
        .unwrap();
    assert_eq!(spawned.id, wf.id);
    assert_eq!(
        spawned
            .jobs
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        vec!["x1", "x2", "join"]
    );
    let again = s
        .spawn_nodes("w2", lease(&new[0]), "fan", &fan)
        .await
        .unwrap();
    assert_eq!(again, spawned, "once per name");
    assert_eq!(all(s).await.len(), before + 3);
    let clash = graph(Workflow::new("clash").add("after", node("dup")));
    assert!(matches!(
        s.spawn_nodes("w2", lease(&new[0]), "clash", &clash).await,
        Err(StoreError::Invalid(_))
    ));
    let sid = |n: &str| spawned.job(n).unwrap();
    for n in ["x1", "x2", "join"] {
        assert_eq!(state(s, sid(n)).await, JobState::Waiting, "{n}");
    }
    assert!(
        claim(s, "q", 10, "w3", LONG).await.is_empty(),
        "all wait for s"
    );

    s.complete_nodes("w2", &[done(&new[0], None)])
        .await
        .unwrap();
    let xs = ready(s, "w2").await;
    assert_eq!(
        xs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![sid("x1"), sid("x2")]
    );
    assert_eq!(
        state(s, id("after")).await,
        JobState::Waiting,
        "after waits for the join"
    );
    s.complete_nodes("w2", &xs.iter().map(|j| done(j, None)).collect::<Vec<_>>())
        .await
        .unwrap();
    let join = ready(s, "w2").await;
    assert_eq!(
        join.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![sid("join")]
    );
    s.complete_nodes("w2", &[done(&join[0], None)])
        .await
        .unwrap();
    let last = ready(s, "w2").await;
    assert_eq!(
        last.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![id("after")]
    );
    let w = s.workflow(wf.id).await.unwrap();
    assert_eq!(w.summary.nodes, 5, "the workflow counts its spawned nodes");
}

/// An operator skips a held edge: only once its parent ended without success (a running
/// parent's edge is refused, naming its state), once (a second skip is refused), and the
/// child then runs when its other parents allow; a pair with no edge is refused. Nothing
/// refused writes.
pub async fn a_held_edge_is_skipped_once<H: Harness>(h: &H) {
    let s = h.store();
    let g = graph(
        Workflow::new("held")
            .add("p", node("p"))
            .add("q", node("q"))
            .add_after("c", node("c"), [edge("p", OnFailure::Hold), Dep::from("q")]),
    );
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let held = ready(s, "w").await;
    assert_eq!(held.len(), 2);
    let p = held.iter().find(|j| j.id == id("p")).unwrap();
    let q = held.iter().find(|j| j.id == id("q")).unwrap();
    assert!(matches!(
        s.skip_edge(id("p"), id("c")).await,
        Err(StoreError::WrongState {
            state: JobState::Running,
            ..
        })
    ));
    s.fail_many("w", &[discard(p)]).await.unwrap();
    assert_eq!(state(s, id("c")).await, JobState::Waiting, "held");
    assert!(matches!(
        s.skip_edge(id("q"), id("p")).await,
        Err(StoreError::Invalid(_))
    ));
    let c = s.skip_edge(id("p"), id("c")).await.unwrap();
    assert_eq!(c.state, JobState::Waiting, "still waiting for q");
    assert!(
        matches!(
            s.skip_edge(id("p"), id("c")).await,
            Err(StoreError::Invalid(_))
        ),
        "an edge is skipped once"
    );
    s.complete_nodes("w", &[done(q, None)]).await.unwrap();
    let next = ready(s, "w").await;
    assert_eq!(next.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id("c")]);
    let edges = s.workflow(wf.id).await.unwrap().edges;
    assert!(edges.iter().all(|e| e.state == "satisfied"), "{edges:?}");
}
