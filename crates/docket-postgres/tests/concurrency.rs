//! Concurrency: many claimers on separate connections. (The design's naive claim next to
//! Docket's is `docket lab`, tested in the CLI's tests.)

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_claimers_complete_ten_thousand_jobs_exactly_once() {
    let db = TestDb::with_pool_size(4).await;
    let jobs: Vec<NewJob> = (0..10_000)
        .map(|i| NewJob::new("q", "k", json!(i)))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();

    let mut tasks = Vec::new();
    for w in 0..16 {
        // Separate pools: separate connections, like separate worker processes.
        let store = db.second_store(1).await;
        tasks.push(tokio::spawn(async move {
            let owner = format!("w{w}");
            let mut claimed = Vec::new();
            let mut completed = Vec::new();
            let mut empty = 0;
            while empty < 3 {
                let got = store
                    .claim(&ClaimRequest {
                        queue: "q".into(),
                        limit: 25,
                        owner: owner.clone(),
                        lease: Duration::from_secs(300),
                        starvation: None,
                        controlled: None,
                    })
                    .await
                    .unwrap();
                if got.is_empty() {
                    empty += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                empty = 0;
                let leases: Vec<Lease> = got.iter().map(ClaimedJob::lease).collect();
                claimed.extend(leases.iter().copied());
                let out = store.complete_many(&owner, &leases).await.unwrap();
                assert!(out.lost.is_empty(), "{:?}", out.lost);
                completed.extend(out.applied);
            }
            (claimed, completed)
        }));
    }
    let mut tokens = HashSet::new();
    let mut completions: HashMap<JobId, usize> = HashMap::new();
    for t in tasks {
        let (claimed, completed) = t.await.unwrap();
        for l in claimed {
            assert!(tokens.insert(l), "token {l:?} handed out twice");
        }
        for l in completed {
            *completions.entry(l.id).or_default() += 1;
        }
    }
    assert_eq!(completions.len(), 10_000);
    assert!(completions.values().all(|&n| n == 1));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state <> 'succeeded'")
            .await,
        0
    );
    // Kept, each once, in the packed history (migration 0035).
    assert_eq!(
        db.scalar("SELECT count(DISTINCT r.id) FROM {schema}.jobs_succeeded h, unnest(h.jobs) r")
            .await,
        10_000
    );
    assert_eq!(
        db.scalar("SELECT max(r.attempt)::bigint FROM {schema}.jobs_succeeded h, unnest(h.jobs) r")
            .await,
        1
    );
}

/// SKIP LOCKED: a job row locked by another transaction (a claimer mid-statement, an
/// operator's open transaction) is passed over, not waited for: the claim returns the other
/// jobs at once, and the locked one is claimable once its lock is gone.
#[tokio::test]
async fn a_claim_skips_a_locked_row_instead_of_waiting_for_it() {
    let db = TestDb::new().await;
    let first = db
        .store
        .enqueue(&NewJob::new("q", "k", json!("locked")).priority(-5))
        .await
        .unwrap()
        .id;
    db.store
        .enqueue_many(
            &(0..5)
                .map(|i| NewJob::new("q", "k", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let mut locker = db.pool.begin().await.unwrap();
    sqlx::query(&format!(
        "SELECT 1 FROM {}.jobs WHERE id = $1 FOR UPDATE",
        db.schema
    ))
    .bind(first.0)
    .execute(&mut *locker)
    .await
    .unwrap();
    let req = ClaimRequest {
        queue: "q".into(),
        limit: 10,
        owner: "w".into(),
        lease: Duration::from_secs(60),
        starvation: None,
        controlled: None,
    };
    let got = tokio::time::timeout(Duration::from_secs(10), db.store.claim(&req))
        .await
        .expect("the claim waited for the locked row")
        .unwrap();
    let ids: HashSet<JobId> = got.iter().map(|j| j.id).collect();
    assert_eq!(ids.len(), 5);
    assert!(!ids.contains(&first), "the locked row was claimed");
    locker.commit().await.unwrap();
    let got = db.store.claim(&req).await.unwrap();
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![first]);
}

/// The starving branch under concurrent claimers, each claiming several slots at once: a
/// low-priority job that has waited past the bound (its run_at moved back, as if the clock
/// had moved on) is handed out in the first round of claims, to exactly one claimer, while
/// urgent work is ready; strict order would have left it last.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_starving_job_goes_to_exactly_one_of_many_concurrent_multi_slot_claims() {
    let db = TestDb::with_pool_size(8).await;
    let low = db
        .store
        .enqueue(&NewJob::new("q", "k", json!("low")).priority(50))
        .await
        .unwrap()
        .id;
    db.store
        .enqueue_many(
            &(0..400)
                .map(|i| NewJob::new("q", "k", json!(i)).priority(-50))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET run_at = now() - interval '2 seconds' WHERE id = {low}"
    ))
    .await;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = db.second_store(1).await;
        tasks.push(tokio::spawn(async move {
            store
                .claim(&ClaimRequest {
                    queue: "q".into(),
                    limit: 5,
                    owner: format!("w{w}"),
                    lease: Duration::from_secs(60),
                    starvation: Some(Duration::from_secs(1)),
                    controlled: None,
                })
                .await
                .unwrap()
        }));
    }
    let mut holders = Vec::new();
    let mut total = 0;
    for t in tasks {
        let got = t.await.unwrap();
        total += got.len();
        if got.iter().any(|j| j.id == low) {
            holders.push(got.len());
        }
    }
    assert_eq!(total, 40, "every claim got its five");
    assert_eq!(
        holders.len(),
        1,
        "the starving job went to exactly one claim"
    );
}

/// The race a key's release loses: a claim holds the key's lock while it flags the next job
/// blocked behind the one now finishing (it saw that one still running), so the finishing
/// transaction cannot unflag it (it does not wait for a lock anyone can hold). The release
/// is recorded with the finishing transaction and handed on by `hand_over_keys` under the
/// same lock once the claim has committed — not left for the full sweep, a minute later.
/// Ordering keys and concurrency keys alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_meets_a_claim_holding_the_key_is_handed_over_not_lost() {
    for kind in ["o", "c"] {
        let db = TestDb::new().await;
        let keyed = |j: NewJob| match kind {
            "o" => j.ordering_key("k"),
            _ => j.concurrency_key("k"),
        };
        if kind == "c" {
            db.store
                .set_key_limit(&KeyLimit {
                    key: "k".into(),
                    max_running: Some(1),
                    rate: None,
                })
                .await
                .unwrap();
        }
        let first = db
            .store
            .enqueue(&keyed(NewJob::new("q", "k", json!(1))))
            .await
            .unwrap()
            .id;
        let next = db
            .store
            .enqueue(&keyed(NewJob::new("q", "k", json!(2))))
            .await
            .unwrap()
            .id;
        let req = ClaimRequest {
            queue: "q".into(),
            limit: 10,
            owner: "w".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        };
        let got = db.store.claim(&req).await.unwrap();
        assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![first]);
        // The claim in the way: the key's lock, and the flag it writes under it.
        let claim = db.claim_holding_key(&format!("{kind}:k"), next).await;
        // The first job finishes meanwhile, without waiting for the claim.
        let done = tokio::time::timeout(
            Duration::from_secs(5),
            db.store.complete_many("w", &[got[0].lease()]),
        )
        .await
        .expect("a completion waited for the key's lock")
        .unwrap();
        assert_eq!(done.applied.len(), 1);
        claim.commit().await.unwrap();
        // Nothing of the key runs, and its next job is flagged: only the hand-over frees it.
        assert!(db.store.claim(&req).await.unwrap().is_empty(), "{kind}");
        assert_eq!(
            db.scalar("SELECT count(*) FROM {schema}.key_handovers")
                .await,
            1,
            "{kind}: the release was not recorded"
        );
        assert_eq!(db.store.hand_over_keys(100).await.unwrap(), 1, "{kind}");
        assert_eq!(
            db.scalar("SELECT count(*) FROM {schema}.key_handovers")
                .await,
            0
        );
        let got = db.store.claim(&req).await.unwrap();
        assert_eq!(
            got.iter().map(|j| j.id).collect::<Vec<_>>(),
            vec![next],
            "{kind}"
        );
    }
}
