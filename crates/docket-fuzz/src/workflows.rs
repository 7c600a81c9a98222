//! Workflow graphs as users and SQL callers send them (JSON): a graph the check accepts has
//! unique node names, every reference resolved, no node after itself, sizes within the caps,
//! and the order it returns puts every parent before its children — so it has no cycle; a
//! refused one is refused with an error, never a panic.

use std::collections::HashMap;

use docket_core::workflow::{Graph, MAX_EDGES, MAX_NODES};

/// The body of the `workflow_graph` target.
pub fn workflow_graph(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = Graph::from_json(text) else {
        return;
    };
    let Ok(order) = graph.validate(&Default::default()) else {
        return;
    };
    let n = graph.nodes.len();
    assert!((1..=MAX_NODES).contains(&n), "{n} nodes accepted");
    let edges: usize = graph.nodes.iter().map(|x| x.after.len()).sum();
    assert!(edges <= MAX_EDGES, "{edges} edges accepted");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..n).collect::<Vec<_>>(),
        "the order is a permutation"
    );
    let pos: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(at, &i)| (graph.nodes[i].name.as_str(), at))
        .collect();
    assert_eq!(pos.len(), n, "node names are unique");
    for node in &graph.nodes {
        for dep in &node.after {
            let parent = pos.get(dep.node()).expect("every reference resolves");
            assert!(
                parent < &pos[node.name.as_str()],
                "{} is sorted before its parent {}",
                node.name,
                dep.node()
            );
        }
    }
}

/// The body of the `batch_spec` target: a batch file as `docket batches open` reads it. An
/// accepted batch is within the member cap, every member and callback passes the job
/// check (and carries none of Docket's metadata keys), and its stored callbacks read back
/// as the same jobs; anything else is an error, never a panic.
pub fn batch_spec(data: &[u8]) {
    use docket_core::batches::{BatchSpec, JobSpec, MAX_MEMBERS, RESULT_KEY};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = BatchSpec::from_json(text) else {
        return;
    };
    if spec.validate(&Default::default()).is_err() {
        return;
    }
    assert!(
        spec.jobs.len() <= MAX_MEMBERS,
        "{} members accepted",
        spec.jobs.len()
    );
    // Stored as text (SQLite, MariaDB; PostgreSQL's jsonb keeps numbers exactly too) and
    // read straight back into jobs.
    let stored = spec.callbacks_json().to_string();
    let back: std::collections::HashMap<String, JobSpec> =
        serde_json::from_str(&stored).expect("stored callbacks read back");
    for (c, job) in spec.callbacks() {
        let back = &back[c.as_str()];
        assert_eq!(back, job, "{c} changed on its way to storage");
    }
    for job in spec
        .jobs
        .iter()
        .chain(spec.callbacks().into_iter().map(|(_, j)| j))
    {
        assert!(docket_core::validate::new_job(&job.job(), &Default::default()).is_ok());
        for key in [docket_core::workflow::MARKER, RESULT_KEY] {
            assert!(
                job.metadata.get(key).is_none(),
                "{key} accepted in metadata"
            );
        }
    }
}
