//! The job lifecycle through the seam: enqueue, claim, and every way a claim ends.

use std::time::Duration;

use docket_core::*;

use super::*;

fn fail(lease: Lease, class: FailureClass, retry_in: Option<Duration>) -> Failure {
    Failure {
        lease,
        class,
        message: format!("conformance {class:?}"),
        retry_in,
    }
}

/// Enqueue, claim (attempt 1, leased to the owner), complete (succeeded, lease cleared);
/// nothing is left to claim.
pub async fn enqueue_claim_complete<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q").metadata(serde_json::json!({"trace": "t"}))).await;
    let rec = get(s, id).await;
    assert_eq!((rec.state, rec.attempt), (JobState::Pending, 0));
    assert_eq!(s.active_count(&["q".into()]).await.unwrap(), 1);
    let got = claim(s, "q", 10, "w1", LONG).await;
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].id, got[0].attempt), (id, 1));
    assert_eq!(got[0].metadata["trace"], "t");
    let rec = get(s, id).await;
    assert_eq!(rec.state, JobState::Running);
    assert_eq!(rec.lease_owner.as_deref(), Some("w1"));
    assert!(rec.lease_expires_at.is_some());
    assert!(
        claim(s, "q", 10, "w2", LONG).await.is_empty(),
        "one holder at a time"
    );
    let out = s.complete_many("w1", &[lease(&got[0])]).await.unwrap();
    assert_eq!((out.applied.len(), out.lost.len()), (1, 0));
    let rec = get(s, id).await;
    assert_eq!(rec.state, JobState::Succeeded);
    assert!(rec.finished_at.is_some());
    assert!(claim(s, "q", 10, "w1", LONG).await.is_empty());
    assert_eq!(s.active_count(&["q".into()]).await.unwrap(), 0);
    assert!(!s.any_active(&["q".into()]).await.unwrap());
}

/// `enqueue_many` returns ids in input order; a unique key held by an unfinished job
/// returns its holder instead of a new job, and is free again once the holder finished.
pub async fn enqueue_many_keeps_order_and_unique_keys_dedupe<H: Harness>(h: &H) {
    let s = h.store();
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| NewJob::new("q", "conformance", serde_json::json!({ "i": i })))
        .collect();
    let got = s.enqueue_many(&jobs).await.unwrap();
    assert_eq!(got.len(), 5);
    for (i, e) in got.iter().enumerate() {
        assert_eq!(get(s, e.id).await.args["i"], i);
    }
    let a = s.enqueue(&job("u").unique_key("k")).await.unwrap();
    let b = s.enqueue(&job("u").unique_key("k")).await.unwrap();
    assert!(!a.duplicate && b.duplicate && a.id == b.id);
    let c = claim(s, "u", 1, "w", LONG).await;
    s.complete_many("w", &[lease(&c[0])]).await.unwrap();
    let d = s.enqueue(&job("u").unique_key("k")).await.unwrap();
    assert!(
        !d.duplicate && d.id != a.id,
        "the key is free after its holder finished"
    );
}

/// A retried failure goes back to pending after its backoff (not before), with its error
/// kept; the claim after the last attempt's failure makes it dead.
pub async fn retry_backs_off_then_dies_when_attempts_run_out<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q").max_attempts(2)).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    let out = s
        .fail_many(
            "w",
            &[fail(
                lease(&c[0]),
                FailureClass::Retry,
                Some(Duration::from_secs(60)),
            )],
        )
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    let rec = get(s, id).await;
    assert_eq!((rec.state, rec.attempt), (JobState::Pending, 1));
    assert_eq!(rec.errors.len(), 1);
    assert_eq!(rec.errors[0].attempt, 1);
    assert!(
        claim(s, "q", 1, "w", LONG).await.is_empty(),
        "not before its backoff"
    );
    h.advance(Duration::from_secs(61)).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].attempt, 2);
    s.fail_many("w", &[fail(lease(&c[0]), FailureClass::Retry, None)])
        .await
        .unwrap();
    let rec = get(s, id).await;
    assert_eq!(rec.state, JobState::Dead, "attempts exhausted");
    assert_eq!(rec.errors.len(), 2);
    assert!(rec.finished_at.is_some());
}

/// Discard: dead at once. Cancel: cancelled. Snooze: pending later, attempt not consumed.
/// Release: pending now, attempt not consumed.
pub async fn discard_cancel_snooze_and_release<H: Harness>(h: &H) {
    let s = h.store();
    let ids: Vec<JobId> = put_many(s, 4).await;
    let c = claim(s, "q", 4, "w", LONG).await;
    assert_eq!(c.len(), 4);
    let by_id = |id: JobId| lease(c.iter().find(|j| j.id == id).unwrap());
    s.fail_many("w", &[fail(by_id(ids[0]), FailureClass::Discard, None)])
        .await
        .unwrap();
    s.fail_many("w", &[fail(by_id(ids[1]), FailureClass::Cancel, None)])
        .await
        .unwrap();
    let snoozed = s
        .snooze_many(
            "w",
            &[Snooze {
                lease: by_id(ids[2]),
                delay: Duration::from_secs(30),
            }],
        )
        .await
        .unwrap();
    assert_eq!(snoozed.applied.len(), 1);
    let released = s.release_many("w", &[by_id(ids[3])]).await.unwrap();
    assert_eq!(released.applied.len(), 1);
    assert_eq!(get(s, ids[0]).await.state, JobState::Dead);
    assert_eq!(get(s, ids[1]).await.state, JobState::Cancelled);
    // Released: claimable now, and its next claim is still its first counted attempt.
    let again = claim(s, "q", 4, "w", LONG).await;
    assert_eq!(again.len(), 1, "only the released job is ready");
    assert_eq!(again[0].id, ids[3]);
    let rec = get(s, ids[3]).await;
    assert_eq!(
        rec.max_attempts - rec.attempt,
        24,
        "release does not spend an attempt"
    );
    // Snoozed: after its delay, and without having spent an attempt either.
    h.advance(Duration::from_secs(31)).await;
    let later = claim(s, "q", 4, "w", LONG).await;
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].id, ids[2]);
    let rec = get(s, ids[2]).await;
    assert_eq!(
        rec.max_attempts - rec.attempt,
        24,
        "snooze does not spend an attempt"
    );
}

/// `n` jobs of queue `q` with 25 attempts each, in order.
async fn put_many<S: Store>(s: &S, n: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(put(s, job("q").max_attempts(25)).await);
    }
    ids
}

/// Cancel of a pending job cancels it; of a running one records the request, which the
/// holder's heartbeat reports (its failure then ends it cancelled); a cancelled job is replayed with more attempts, keeping its id and
/// history; cancel of a finished job is refused and changes nothing.
pub async fn cancel_pending_and_running_then_replay<H: Harness>(h: &H) {
    let s = h.store();
    let pending = put(s, job("q")).await;
    assert_eq!(s.cancel(pending).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(get(s, pending).await.state, JobState::Cancelled);

    let running = put(s, job("q").max_attempts(1)).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    assert_eq!(s.cancel(running).await.unwrap(), CancelOutcome::Requested);
    let beat = s.heartbeat("w", &[lease(&c[0])], LONG).await.unwrap();
    assert_eq!(beat.cancel_requested, vec![lease(&c[0])]);
    // A failure after a cancel request is recorded as the cancellation it was.
    s.fail_many("w", &[fail(lease(&c[0]), FailureClass::Retry, None)])
        .await
        .unwrap();
    assert_eq!(get(s, running).await.state, JobState::Cancelled);

    let before = get(s, running).await;
    let replayed = s.retry(running, 1).await.unwrap();
    assert_eq!(replayed.id, running);
    assert_eq!(replayed.state, JobState::Pending);
    assert_eq!(replayed.errors.len(), before.errors.len(), "history kept");
    let c = claim(s, "q", 1, "w", LONG).await;
    assert_eq!(c.len(), 1, "the replay is claimable");
    s.complete_many("w", &[lease(&c[0])]).await.unwrap();
    let done = get(s, running).await;
    assert!(matches!(
        s.cancel(running).await,
        Err(StoreError::WrongState { .. })
    ));
    assert_eq!(
        get(s, running).await,
        done,
        "a refused cancel changes nothing"
    );
    assert!(matches!(
        s.get(JobId(i64::MAX)).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Input the seam must refuse, with nothing written.
pub async fn invalid_input_writes_nothing<H: Harness>(h: &H) {
    let s = h.store();
    for bad in [
        NewJob::new("", "k", serde_json::json!({})),
        NewJob::new("q", "", serde_json::json!({})),
        NewJob::new("q", "k", serde_json::json!({})).max_attempts(0),
        NewJob::new("q\u{0}", "k", serde_json::json!({})),
    ] {
        assert!(
            matches!(s.enqueue(&bad).await, Err(StoreError::Invalid(_))),
            "{bad:?}"
        );
    }
    // One bad job sinks its whole batch.
    let batch = vec![job("q"), NewJob::new("q", "", serde_json::json!({}))];
    assert!(matches!(
        s.enqueue_many(&batch).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(all(s).await.is_empty(), "nothing written");
}

/// Claims racing each other — four in flight on one store and four on a second one, in small
/// batches so that they are many, the starvation bound on (its probe is part of every claim;
/// in the last round every job is past it, so every claim takes the starving path too), three
/// rounds — never fail and never hand a job out twice: every job is claimed exactly once
/// and completed. On MariaDB the locking starvation probe made claims in flight deadlock
/// (1213; this case caught it in about one run of three with one round).
pub async fn racing_claims_never_fail_or_share_a_job<H: Harness>(h: &H) {
    let s = h.store();
    let second = h.second().await;
    let (rounds, per_round) = (3, 300);
    let mut seen = std::collections::HashSet::new();
    for round in 0..rounds {
        let queue = format!("race-{round}");
        let jobs: Vec<NewJob> = (0..per_round).map(|_| job(&queue)).collect();
        s.enqueue_many(&jobs).await.expect("enqueue_many");
        let mut tasks = Vec::new();
        for i in 0..8 {
            let st = if i % 2 == 0 {
                s.clone()
            } else {
                second.clone()
            };
            let queue = queue.clone();
            // The last round: a bound of 1 ms, so every job has waited past it.
            let bound = Duration::from_millis(if round == rounds - 1 { 1 } else { 60_000 });
            tasks.push(tokio::spawn(race(st, queue, format!("racer-{i}"), bound)));
        }
        for t in tasks {
            for id in t
                .await
                .expect("racer panicked")
                .unwrap_or_else(|e| panic!("{e}"))
            {
                assert!(seen.insert(id), "job {id:?} was handed out twice");
            }
        }
        assert_eq!(
            seen.len(),
            per_round * (round + 1),
            "every job claimed once"
        );
    }
    let done = all(s).await;
    assert_eq!(done.len(), rounds * per_round);
    assert!(done
        .iter()
        .all(|r| r.state == JobState::Succeeded && r.attempt == 1));
}

/// One racer: claims 2 at a time and completes them until a claim comes back empty.
async fn race<S: Store>(
    st: S,
    queue: String,
    owner: String,
    bound: Duration,
) -> Result<Vec<JobId>, String> {
    let mut ids = Vec::new();
    loop {
        let req = ClaimRequest {
            queue: queue.clone(),
            limit: 2,
            owner: owner.clone(),
            lease: LONG,
            starvation: Some(bound),
            controlled: None,
        };
        let got = st
            .claim(&req)
            .await
            .map_err(|e| format!("claim of {owner}: {e}"))?;
        if got.is_empty() {
            return Ok(ids);
        }
        let leases: Vec<Lease> = got.iter().map(lease).collect();
        let out = st
            .complete_many(&owner, &leases)
            .await
            .map_err(|e| format!("completion of {owner}: {e}"))?;
        if out.applied.len() != leases.len() {
            return Err(format!("{owner}: completions refused: {:?}", out.lost));
        }
        ids.extend(got.iter().map(|j| j.id));
    }
}
