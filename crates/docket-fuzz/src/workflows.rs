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
