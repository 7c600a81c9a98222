//! Claims under a held horizon (migration 0036, `src/scan_hint.rs`): once an unhinted claim
//! was slow while an old snapshot is open, claims start their scan at the least position the
//! previous one took — so they do not walk what was consumed since the snapshot — and a probe
//! behind the hint runs every interval, so a job that became ready before that position (here
//! a higher priority) is claimed within it. Without a held horizon nothing changes.
//! The thresholds are the test's (a slow claim needs tens of thousands of dead entries).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket_core::*;
use docket_postgres::HintRules;
use docket_testkit::{eventually, TestDb};
use serde_json::json;
use sqlx::Connection;

fn req(limit: i32) -> ClaimRequest {
    ClaimRequest {
        queue: "q".into(),
        limit,
        owner: "w".into(),
        lease: Duration::from_secs(60),
        starvation: Some(Duration::from_secs(60)),
        controlled: None,
    }
}

/// Every claim counts as slow; `held_xids` decides whether the horizon is held.
fn rules(held_xids: i64, probe_every: Duration) -> HintRules {
    HintRules {
        slow: Duration::ZERO,
        held_xids,
        probe_every,
    }
}

/// A REPEATABLE READ snapshot held open on a connection of its own.
async fn pin(db: &TestDb) -> sqlx::PgConnection {
    let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
        .execute(&mut c)
        .await
        .unwrap();
    c
}

async fn enqueue(db: &TestDb, n: usize, priority: i16) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new("q", "k", json!({ "n": i })).priority(priority))
        .collect();
    db.store
        .enqueue_many(&jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

#[tokio::test]
async fn under_a_held_snapshot_claims_start_past_what_they_took_and_a_probe_finds_what_lies_behind()
{
    let db = TestDb::new().await;
    let store = db
        .store
        .clone()
        .with_scan_hints(rules(1, Duration::from_millis(300)));
    let mut snapshot = pin(&db).await;
    // One enqueue_many: the twenty share their run_at, the hint's position — a hinted claim
    // must still take the ones at it (`>=`, not `>`).
    let batch: HashSet<JobId> = enqueue(&db, 20, 5).await.into_iter().collect();
    let first = store.claim(&req(4)).await.unwrap();
    assert_eq!(first.len(), 4);
    // Before the position the claims took: a more urgent job, enqueued after the snapshot.
    let urgent = enqueue(&db, 1, 0).await[0];
    let mut seen: HashSet<JobId> = first.iter().map(|j| j.id).collect();
    let second = store.claim(&req(4)).await.unwrap();
    assert_eq!(
        second.len(),
        4,
        "a hinted claim takes jobs at the hint's position"
    );
    assert!(
        second.iter().all(|j| batch.contains(&j.id)),
        "the hinted claim started past the urgent job: {second:?}"
    );
    seen.extend(second.iter().map(|j| j.id));
    // The probe of the next interval finds the urgent job behind the hint, and the claims
    // after it take it; every job once.
    let state = Arc::new(Mutex::new((seen, false)));
    eventually(Duration::from_secs(20), "every job claimed", || {
        let (store, state) = (store.clone(), state.clone());
        async move {
            let got = store.claim(&req(1)).await.unwrap();
            let mut s = state.lock().unwrap();
            for j in got {
                assert!(s.0.insert(j.id), "{} claimed twice", j.id);
                s.1 |= j.id == urgent;
            }
            s.1 && s.0.len() == 21
        }
    })
    .await;
    let seen = state.lock().unwrap().0.clone();
    assert!(seen.is_superset(&batch));
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut snapshot)
        .await
        .unwrap();
}

#[tokio::test]
async fn without_a_held_horizon_a_slow_claim_changes_nothing() {
    let db = TestDb::new().await;
    // No horizon is ever this old: the claims stay unhinted, in strict priority order.
    let store = db
        .store
        .clone()
        .with_scan_hints(rules(i64::MAX, Duration::from_secs(3600)));
    let _snapshot = pin(&db).await;
    enqueue(&db, 10, 5).await;
    assert_eq!(store.claim(&req(4)).await.unwrap().len(), 4);
    let urgent = enqueue(&db, 1, 0).await[0];
    let next = store.claim(&req(1)).await.unwrap();
    assert_eq!(next.iter().map(|j| j.id).collect::<Vec<_>>(), vec![urgent]);
}

#[tokio::test]
async fn the_sql_claim_takes_a_position_and_its_seven_argument_form_is_unchanged() {
    let db = TestDb::new().await;
    enqueue(&db, 3, 5).await;
    let urgent = enqueue(&db, 1, 0).await[0];
    // From (5, -infinity): the priority-0 job lies before the position.
    let hinted = db
        .scalar(
            "SELECT count(*) FROM {schema}.claim('q', 10, 'w', 60000, NULL, false, NULL,
                                                 5::smallint, '-infinity')
             WHERE priority = 5",
        )
        .await;
    assert_eq!(hinted, 3);
    let plain = db
        .scalar("SELECT id FROM {schema}.claim('q', 10, 'w', 60000, NULL)")
        .await;
    assert_eq!(plain, urgent.0);
}
