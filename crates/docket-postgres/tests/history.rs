//! Kept successes (migration 0035): `complete_many` moves a plain job out of `jobs` into the
//! packed, append-only `jobs_succeeded`, fenced as before, and every read an operator makes
//! (get, list, search, stats, why, output, retry and signal refusals, a late completion's
//! explanation) still finds it; the retention prunes whole history rows; a workflow node
//! keeps its row.

use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

fn req(limit: i32, owner: &str) -> ClaimRequest {
    ClaimRequest {
        queue: "q".into(),
        limit,
        owner: owner.into(),
        lease: Duration::from_secs(60),
        starvation: None,
        controlled: None,
    }
}

async fn kept(db: &TestDb) -> i64 {
    db.scalar("SELECT coalesce(sum(n), 0)::bigint FROM {schema}.jobs_succeeded")
        .await
}

#[tokio::test]
async fn a_kept_success_moves_to_the_packed_history_and_every_read_finds_it() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..3)
        .map(|i| {
            NewJob::new(
                "q",
                "mail",
                json!({"n": i, "to": format!("u{i}@example.com")}),
            )
        })
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let got = db.store.claim(&req(3, "w")).await.unwrap();
    assert_eq!(got.len(), 3);
    let leases: Vec<Lease> = got.iter().map(ClaimedJob::lease).collect();
    let out = db.store.complete_many("w", &leases).await.unwrap();
    assert_eq!(out.applied.len(), 3);

    // Moved: nothing left in `jobs`, one history row (one statement, one queue) of three.
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.jobs").await, 0);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs_succeeded")
            .await,
        1
    );
    assert_eq!(kept(&db).await, 3);

    let id = got[1].id;
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
    assert_eq!(rec.kind, "mail");
    assert_eq!(rec.args, got[1].args);
    assert_eq!(rec.attempt, 1);
    assert!(rec.finished_at.is_some() && rec.attempted_at.is_some());
    assert!(rec.lease_owner.is_none() && rec.lease_expires_at.is_none());
    assert!(matches!(
        db.store.get(JobId(id.0 + 1_000)).await,
        Err(StoreError::NotFound(_))
    ));

    let listed = db
        .store
        .list(&JobFilter {
            queue: Some("q".into()),
            state: None,
            limit: 10,
        })
        .await
        .unwrap();
    let ids: Vec<JobId> = listed.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![got[2].id, got[1].id, got[0].id]);
    assert!(listed.iter().all(|j| j.state == JobState::Succeeded));
    let pending_only = db
        .store
        .list(&JobFilter {
            queue: None,
            state: Some(JobState::Pending),
            limit: 10,
        })
        .await
        .unwrap();
    assert!(pending_only.is_empty());

    // Search by state, with a filter into args (read over the history, not an id window).
    let page = db
        .store
        .search(&JobQuery {
            state: Some(JobState::Succeeded),
            field: Some(FieldEq::parse("args.to = u1@example.com").unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id]);
    // Paging newest finished first, one a page, visits each once.
    let mut seen = Vec::new();
    let mut q = JobQuery {
        state: Some(JobState::Succeeded),
        limit: 1,
        ..Default::default()
    };
    loop {
        let page = db.store.search(&q).await.unwrap();
        seen.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(next) => {
                q.before = Some(next);
                q.before_finished_at = page.next_finished_at;
            }
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, vec![got[0].id, got[1].id, got[2].id]);

    let stats = db.store.stats().await.unwrap();
    let q = stats.queues.iter().find(|s| s.queue == "q").unwrap();
    assert_eq!((q.succeeded, q.pending, q.running), (3, 0, 0));

    let why = db.store.why(id).await.unwrap();
    assert_eq!(why.state, JobState::Succeeded);
    let output = db.store.job_output(id).await.unwrap();
    assert_eq!((output.state, output.output), (JobState::Succeeded, None));
    assert!(matches!(
        db.store.retry(id, 1).await,
        Err(StoreError::WrongState {
            state: JobState::Succeeded,
            ..
        })
    ));
    assert!(matches!(
        db.store.signal(id, "go", &json!(1)).await,
        Err(StoreError::WrongState {
            state: JobState::Succeeded,
            ..
        })
    ));
    // A second completion is refused and explained from the history.
    let again = db.store.complete_many("w", &[leases[1]]).await.unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(
        again.lost[0].reason,
        LostReason::NotRunning(JobState::Succeeded)
    );
    assert_eq!(kept(&db).await, 3);
}

#[tokio::test]
async fn a_stale_completion_moves_nothing_into_the_history() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap();
    let first = db.store.claim(&req(1, "w")).await.unwrap().remove(0);
    // The lease expires and the reaper hands the job to a successor.
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    db.store.reap(10).await.unwrap();
    db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
    let second = db.store.claim(&req(1, "w")).await.unwrap().remove(0);
    assert_eq!(second.attempt, first.attempt + 1);
    let out = db.store.complete_many("w", &[first.lease()]).await.unwrap();
    assert!(out.applied.is_empty());
    assert_eq!(kept(&db).await, 0);
    assert_eq!(
        db.store.get(first.id).await.unwrap().state,
        JobState::Running
    );
    // The holder's completion moves it.
    let out = db
        .store
        .complete_many("w", &[second.lease()])
        .await
        .unwrap();
    assert_eq!(out.applied, vec![second.lease()]);
    assert_eq!(kept(&db).await, 1);
    assert_eq!(
        db.store.get(first.id).await.unwrap().attempt,
        second.attempt
    );
}

#[tokio::test]
async fn the_retention_prunes_whole_history_rows_past_it_and_keeps_the_rest() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..6).map(|i| NewJob::new("q", "k", json!(i))).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let got = db.store.claim(&req(6, "w")).await.unwrap();
    let leases: Vec<Lease> = got.iter().map(ClaimedJob::lease).collect();
    // Two completions: two history rows of three.
    db.store.complete_many("w", &leases[..3]).await.unwrap();
    db.store.complete_many("w", &leases[3..]).await.unwrap();
    db.exec(&format!(
        "UPDATE {{schema}}.jobs_succeeded SET finished_at = now() - interval '2 days' WHERE lo = {}",
        got[0].id.0
    ))
    .await;
    let r = db
        .store
        .prune(&Retention {
            finished: Duration::from_secs(24 * 3600),
            batch: 2,
            ..Retention::default()
        })
        .await
        .unwrap();
    assert_eq!(r.finished, 3);
    assert_eq!(kept(&db).await, 3);
    assert!(matches!(
        db.store.get(got[0].id).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        db.store.get(got[5].id).await.unwrap().state,
        JobState::Succeeded
    );
}

#[tokio::test]
async fn a_workflow_node_completed_by_complete_many_keeps_its_row() {
    let db = TestDb::new().await;
    db.exec(
        r#"SELECT {schema}.enqueue_workflow('{"name": "w", "nodes": [{"name": "a", "queue": "q", "kind": "k", "args": {}}]}')"#,
    )
    .await;
    let node = db.store.claim(&req(1, "w")).await.unwrap().remove(0);
    let out = db.store.complete_many("w", &[node.lease()]).await.unwrap();
    assert_eq!(out.applied, vec![node.lease()]);
    assert_eq!(kept(&db).await, 0);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'succeeded' AND node = 'a'")
            .await,
        1
    );
}
