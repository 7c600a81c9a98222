//! Rows written around validation (by hand, by another program) on SQLite: a claim hands out
//! the good jobs and fails the ones it cannot decode at once — dead, with the reason — so a
//! bad row neither stalls the worker nor comes back after its lease.

use std::time::Duration;

use docket_core::{ClaimRequest, JobState, NewJob, Store};
use docket_sqlite::SqliteStore;
use serde_json::json;

async fn claim(store: &SqliteStore) -> docket_core::Result<Vec<docket_core::ClaimedJob>> {
    let req = ClaimRequest {
        queue: "q".into(),
        limit: 10,
        owner: "w".into(),
        lease: Duration::from_secs(30),
        starvation: None,
        controlled: None,
    };
    store.claim(&req).await
}

#[tokio::test]
async fn a_claim_fails_the_rows_it_cannot_decode_and_hands_out_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
    let store = SqliteStore::connect(&url, 4).await.unwrap();
    store.migrate().await.unwrap();
    let enqueue = |n: i64| {
        let store = store.clone();
        async move {
            store
                .enqueue(&NewJob::new("q", "k", json!({ "n": n })))
                .await
                .unwrap()
                .id
        }
    };
    let bad = enqueue(1).await;
    let good = enqueue(2).await;
    let worse = enqueue(3).await;
    // Both pass the table's CHECKs but fit no job a handler can be given: an attempt budget
    // beyond a 32-bit integer, and arguments nested deeper than a handler's decoder goes.
    sqlx::query("UPDATE jobs SET max_attempts = 5000000000 WHERE id = ?1")
        .bind(bad.0)
        .execute(store.pool())
        .await
        .unwrap();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    sqlx::query("UPDATE jobs SET args = ?2 WHERE id = ?1")
        .bind(worse.0)
        .bind(&deep)
        .execute(store.pool())
        .await
        .unwrap();

    let claimed = claim(&store)
        .await
        .expect("the claim succeeds despite the bad rows");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![good]);
    assert_eq!(claimed[0].args, json!({"n": 2}));
    for id in [bad, worse] {
        let r = store.get(id).await.unwrap();
        assert_eq!(r.state, JobState::Dead, "{id}");
        let last = &r.errors.last().expect("the reason is kept").message;
        assert!(last.contains("cannot be decoded"), "{last}");
    }
    // Nothing of the bad rows comes back.
    let again = claim(&store).await.unwrap();
    assert!(again.is_empty());
}
