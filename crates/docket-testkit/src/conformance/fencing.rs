//! The fencing matrix: every write that follows a claim (complete, complete with an output,
//! progress, a step, a park, complete by delete, fail, snooze, release, heartbeat) made by a holder that no longer holds — superseded by another worker after a
//! reap, superseded by its *own* reclaim (so the attempt alone must fence), past its lease
//! before any reap, or under another owner's name — is refused, reported lost with its
//! reason, and leaves the current holder's job exactly as it was.

use std::time::Duration;

use docket_core::*;

use super::*;

/// The ten fenced writes, by `owner` with `stale`; returns what each reported lost.
async fn every_write<S: Store>(s: &S, owner: &str, stale: Lease) -> Vec<(&'static str, usize)> {
    let mut lost = Vec::new();
    let out = s.complete_many(owner, &[stale]).await.unwrap();
    assert!(out.applied.is_empty(), "complete applied: {out:?}");
    lost.push(("complete", out.lost.len()));
    let out = s
        .complete_outputs(
            owner,
            &[Output {
                lease: stale,
                value: serde_json::json!({"stale": true}),
            }],
        )
        .await
        .unwrap();
    assert!(
        out.applied.is_empty(),
        "complete with output applied: {out:?}"
    );
    lost.push(("complete with output", out.lost.len()));
    let now = s.job_output(stale.id).await.unwrap();
    assert_eq!(now.output, None, "a stale attempt recorded an output");
    let out = s
        .progress_many(
            owner,
            &[Progress {
                lease: stale,
                percent: 50.0,
                message: "stale".into(),
            }],
        )
        .await
        .unwrap();
    assert!(out.applied.is_empty(), "progress applied: {out:?}");
    lost.push(("progress", out.lost.len()));
    let step = s
        .record_step(owner, stale, "stale step", &serde_json::json!(1))
        .await;
    assert!(
        matches!(step, Err(StoreError::LeaseLost(_))),
        "step recorded: {step:?}"
    );
    lost.push(("step", 1));
    assert!(
        s.job_steps(stale.id)
            .await
            .unwrap()
            .iter()
            .all(|r| r.name != "stale step"),
        "a stale attempt recorded a step"
    );
    let out = s
        .park_many(
            owner,
            &[Park {
                lease: stale,
                delay: Duration::from_secs(5),
                signal: "go".into(),
            }],
        )
        .await
        .unwrap();
    assert!(out.applied.is_empty(), "park applied: {out:?}");
    lost.push(("park", out.lost.len()));
    let out = s.complete_delete_many(owner, &[stale]).await.unwrap();
    assert!(
        out.applied.is_empty(),
        "complete by delete applied: {out:?}"
    );
    lost.push(("complete by delete", out.lost.len()));
    let out = s
        .fail_many(
            owner,
            &[Failure {
                lease: stale,
                class: FailureClass::Retry,
                message: "stale".into(),
                retry_in: None,
            }],
        )
        .await
        .unwrap();
    assert!(out.applied.is_empty(), "fail applied: {out:?}");
    lost.push(("fail", out.lost.len()));
    let out = s
        .snooze_many(
            owner,
            &[Snooze {
                lease: stale,
                delay: Duration::from_secs(5),
            }],
        )
        .await
        .unwrap();
    assert!(out.applied.is_empty(), "snooze applied: {out:?}");
    lost.push(("snooze", out.lost.len()));
    let out = s.release_many(owner, &[stale]).await.unwrap();
    assert!(out.applied.is_empty(), "release applied: {out:?}");
    lost.push(("release", out.lost.len()));
    let out = s.heartbeat(owner, &[stale], LONG).await.unwrap();
    assert!(out.extended.is_empty(), "heartbeat extended: {out:?}");
    lost.push(("heartbeat", out.lost.len()));
    lost
}

fn all_lost(lost: &[(&str, usize)]) {
    for (what, n) in lost {
        assert_eq!(*n, 1, "{what} must report the stale lease lost");
    }
}

/// Claims one job with a short lease, lets it expire, reaps it and waits out the reaper's
/// backoff, so that it is ready again.
async fn claimed_then_reaped<H: Harness>(h: &H, owner: &str) -> (JobId, Lease) {
    let s = h.store();
    let second = Duration::from_secs(1);
    let id = put(
        s,
        job("q").backoff(Backoff {
            base: second,
            cap: second,
        }),
    )
    .await;
    let c = claim(s, "q", 1, owner, Duration::from_secs(5)).await;
    h.advance(Duration::from_secs(6)).await;
    let reaped = s.reap(100).await.unwrap();
    assert_eq!(reaped.jobs.len(), 1);
    assert_eq!(reaped.jobs[0].state, JobState::Pending);
    h.advance(Duration::from_secs(2)).await;
    (id, lease(&c[0]))
}

/// Worker A's job is reaped and claimed by B; every write by A is refused and B's job is
/// untouched; B then completes.
pub async fn stale_writes_by_a_superseded_worker_are_refused<H: Harness>(h: &H) {
    let s = h.store();
    let (id, stale) = claimed_then_reaped(h, "a").await;
    let b = h.second().await;
    let fresh = claim(&b, "q", 1, "b", LONG).await;
    assert_eq!((fresh[0].id, fresh[0].attempt), (id, 2));
    let before = get(s, id).await;
    let lost = every_write(s, "a", stale).await;
    all_lost(&lost);
    let out = s.complete_many("a", &[stale]).await.unwrap();
    assert!(
        matches!(out.lost[0].reason, LostReason::Superseded(2)),
        "{:?}",
        out.lost[0].reason
    );
    assert_eq!(get(s, id).await, before, "the successor's job is unchanged");
    let done = b.complete_many("b", &[lease(&fresh[0])]).await.unwrap();
    assert_eq!(done.applied.len(), 1);
    assert_eq!(get(s, id).await.state, JobState::Succeeded);
}

/// The same worker reclaims its own reaped job: the owner matches, so only the attempt
/// fences the writes of the first claim.
pub async fn stale_writes_after_the_same_worker_reclaimed_are_refused<H: Harness>(h: &H) {
    let s = h.store();
    let (id, stale) = claimed_then_reaped(h, "a").await;
    let fresh = claim(s, "q", 1, "a", LONG).await;
    assert_eq!(fresh[0].attempt, 2);
    let before = get(s, id).await;
    all_lost(&every_write(s, "a", stale).await);
    assert_eq!(get(s, id).await, before);
    let done = s.complete_many("a", &[lease(&fresh[0])]).await.unwrap();
    assert_eq!(done.applied.len(), 1);
}

/// A lease past its expiry is lost by the database's clock, before any reaper ran: no
/// success, no heartbeat reviving it.
pub async fn writes_past_the_lease_are_refused_before_any_reap<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let c = claim(s, "q", 1, "a", Duration::from_secs(5)).await;
    h.advance(Duration::from_secs(6)).await;
    let before = get(s, id).await;
    all_lost(&every_write(s, "a", lease(&c[0])).await);
    let out = s.complete_many("a", &[lease(&c[0])]).await.unwrap();
    assert!(matches!(out.lost[0].reason, LostReason::Expired));
    assert_eq!(get(s, id).await, before);
    assert_eq!(before.state, JobState::Running, "left for the reaper");
    assert_eq!(s.reap(100).await.unwrap().jobs.len(), 1);
}

/// The right token under another owner's name writes nothing; a batch mixing a live lease
/// and a stale one applies exactly the live one.
pub async fn a_wrong_owner_cannot_write<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let other = put(s, job("q")).await;
    let c = claim(s, "q", 2, "a", LONG).await;
    let mine = lease(c.iter().find(|j| j.id == id).unwrap());
    let before = get(s, id).await;
    all_lost(&every_write(s, "impostor", mine).await);
    assert_eq!(get(s, id).await, before);
    let second = lease(c.iter().find(|j| j.id == other).unwrap());
    let wrong = Lease {
        id: second.id,
        attempt: second.attempt + 1,
    };
    let out = s.complete_many("a", &[mine, wrong]).await.unwrap();
    assert_eq!(out.applied, vec![mine]);
    assert_eq!(out.lost.len(), 1);
    assert_eq!(out.lost[0].lease, wrong);
    assert_eq!(get(s, other).await.state, JobState::Running);
}

/// Completing by delete removes exactly the rows whose leases hold: in a batch mixing a live
/// lease, a stale attempt and a lease under another owner's name, only the live one's row goes
/// (read back as not found), the others are reported lost and left running; a batch where
/// every lease holds goes whole. Keyed jobs release their keys as a success does: the next job
/// of an ordering key, and the next of a concurrency key at its limit, become claimable.
pub async fn completing_by_delete_removes_only_held_rows<H: Harness>(h: &H) {
    let s = h.store();
    let ids = [put(s, job("q")).await, put(s, job("q")).await];
    let c = claim(s, "q", 2, "a", LONG).await;
    assert_eq!(c.len(), 2);
    let held = |id: JobId| lease(c.iter().find(|j| j.id == id).unwrap());
    let (mine, other) = (held(ids[0]), held(ids[1]));
    let wrong = Lease {
        id: other.id,
        attempt: other.attempt + 1,
    };
    let before = get(s, other.id).await;
    let out = s.complete_delete_many("a", &[mine, wrong]).await.unwrap();
    assert_eq!(out.applied, vec![mine]);
    assert_eq!(out.lost.len(), 1);
    assert_eq!(out.lost[0].lease, wrong);
    assert!(
        matches!(s.get(mine.id).await, Err(StoreError::NotFound(_))),
        "the completed job's row is gone"
    );
    assert_eq!(
        get(s, other.id).await,
        before,
        "the refused one is untouched"
    );
    let out = s.complete_delete_many("b", &[other]).await.unwrap();
    assert!(out.applied.is_empty() && out.lost.len() == 1, "{out:?}");
    assert_eq!(get(s, other.id).await, before);
    let out = s.complete_delete_many("a", &[other]).await.unwrap();
    assert_eq!(out.applied, vec![other]);
    assert!(matches!(
        s.get(other.id).await,
        Err(StoreError::NotFound(_))
    ));

    // Keys: an ordering key's next job, and a concurrency key's next job at its limit of one.
    let first = put(s, job("o").ordering_key("acct")).await;
    let second = put(s, job("o").ordering_key("acct")).await;
    let got = claim(s, "o", 10, "a", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![first]);
    let out = s
        .complete_delete_many("a", &[lease(&got[0])])
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    let got = claim(s, "o", 10, "a", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![second]);

    s.set_key_limit(&KeyLimit {
        key: "tenant".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    let k1 = put(s, job("k").concurrency_key("tenant")).await;
    let k2 = put(s, job("k").concurrency_key("tenant")).await;
    let got = claim(s, "k", 10, "a", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![k1]);
    assert!(
        claim(s, "k", 10, "a", LONG).await.is_empty(),
        "the key is full"
    );
    let out = s
        .complete_delete_many("a", &[lease(&got[0])])
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    let got = claim(s, "k", 10, "a", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![k2]);
}
