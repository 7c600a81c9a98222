//! Calls dropped part way. The runtime bounds some store calls with a timeout (a heartbeat
//! must not hang past the lease; a leadership bid past its term) and races others against
//! shutdown, so a store sees its futures dropped at any await: while waiting for a
//! connection, after BEGIN, between statements, during COMMIT. None of that may leave a
//! transaction open behind it — on SQLite that is the file's write lock held for ever (every
//! other process's writes end "database is locked"), on a server it is row locks nobody
//! releases; either way workers stay alive and nothing moves.

use std::time::Duration;

use docket_core::*;
use rand::Rng;

use super::*;

/// Thousands of heartbeats, enqueues and claims cut short at random points between "not started"
/// and "done"; after each tenth the same store writes at once, and at the end a second
/// store with connections of its own writes the same rows within seconds.
pub async fn a_call_dropped_at_any_await_leaves_no_transaction_open<H: Harness>(h: &H) {
    let s = h.store();
    let jobs: Vec<NewJob> = (0..20).map(|_| job("cut")).collect();
    s.enqueue_many(&jobs).await.expect("enqueue");
    let leases: Vec<Lease> = claim(s, "cut", 20, "w", LONG)
        .await
        .iter()
        .map(lease)
        .collect();
    assert_eq!(leases.len(), 20);
    let mut rng = rand::thread_rng();
    for i in 0..4_000 {
        let cut = Duration::from_micros(rng.gen_range(0..600));
        match i % 4 {
            0 | 1 => {
                let _ = tokio::time::timeout(cut, s.heartbeat("w", &leases, LONG)).await;
            }
            2 => {
                let _ = tokio::time::timeout(cut, s.enqueue(&job("other"))).await;
            }
            _ => {
                // Claims of the jobs the enqueues made (what a cut claim leased just runs
                // out: nobody was told of it).
                let req = ClaimRequest {
                    queue: "other".into(),
                    limit: 5,
                    owner: "v".into(),
                    lease: LONG,
                    starvation: None,
                    controlled: None,
                };
                let _ = tokio::time::timeout(cut, s.claim(&req)).await;
            }
        }
        if i % 10 == 0 {
            let beat =
                tokio::time::timeout(Duration::from_secs(10), s.heartbeat("w", &leases, LONG))
                    .await
                    .unwrap_or_else(|_| panic!("a write after cut {i} ({cut:?}) hung"))
                    .unwrap_or_else(|e| panic!("a write after cut {i} ({cut:?}) failed: {e}"));
            assert_eq!(beat.extended.len(), 20, "after cut {i}: {beat:?}");
        }
    }
    let other = h.second().await;
    let beat = tokio::time::timeout(Duration::from_secs(10), other.heartbeat("w", &leases, LONG))
        .await
        .expect("another store's write waits on nothing the cut calls left behind")
        .expect("another store writes");
    assert_eq!(beat.extended.len(), 20);
    let done = other.complete_many("w", &leases).await.expect("complete");
    assert_eq!(done.applied.len(), 20);
}
