//! Scheduling controls, enforced inside the claim across all workers.

use std::time::Duration;

use docket_core::*;

use super::*;

/// A paused queue hands out nothing (other queues are unaffected) until resumed.
pub async fn paused_queues_hand_out_nothing<H: Harness>(h: &H) {
    let s = h.store();
    put(s, job("q")).await;
    put(s, job("other")).await;
    let c = s.pause_queue("q").await.unwrap();
    assert!(c.paused_at.is_some());
    assert!(claim(s, "q", 10, "w", LONG).await.is_empty());
    assert_eq!(claim(s, "other", 10, "w", LONG).await.len(), 1);
    assert!(s
        .queue_controls()
        .await
        .unwrap()
        .iter()
        .any(|c| c.queue == "q" && c.paused_at.is_some()));
    s.resume_queue("q").await.unwrap();
    assert_eq!(claim(s, "q", 10, "w", LONG).await.len(), 1);
}

/// A queue's stored controls are forgotten only when no job of it waits or runs; removing
/// what is not there changes nothing.
pub async fn a_queue_row_is_removed_only_when_no_work_remains<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("r")).await;
    s.pause_queue("r").await.unwrap();
    assert!(
        !s.remove_queue("r").await.unwrap(),
        "a pending job keeps it"
    );
    let got = claim(s, "r", 1, "w", LONG).await;
    assert!(got.is_empty(), "paused still");
    s.resume_queue("r").await.unwrap();
    let got = claim(s, "r", 1, "w", LONG).await;
    assert_eq!(got[0].id, id);
    assert!(
        !s.remove_queue("r").await.unwrap(),
        "a running job keeps it"
    );
    assert!(s
        .queue_controls()
        .await
        .unwrap()
        .iter()
        .any(|c| c.queue == "r"));
    s.complete_many("w", &[got[0].lease()]).await.unwrap();
    assert!(s.remove_queue("r").await.unwrap());
    assert!(!s
        .queue_controls()
        .await
        .unwrap()
        .iter()
        .any(|c| c.queue == "r"));
    assert!(
        !s.remove_queue("r").await.unwrap(),
        "nothing left to remove"
    );
    assert!(
        s.remove_queue("bad queue!").await.is_err(),
        "names are checked"
    );
}

/// A queue's `max_running` and a key's limit bound what all claims together hold running.
pub async fn queue_and_key_limits_bound_claims<H: Harness>(h: &H) {
    let s = h.store();
    for _ in 0..5 {
        put(s, job("q")).await;
    }
    s.set_queue_limits(
        "q",
        &QueueLimits {
            max_running: Some(2),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let a = claim(s, "q", 10, "a", LONG).await;
    assert_eq!(a.len(), 2);
    let b = h.second().await;
    assert!(
        claim(&b, "q", 10, "b", LONG).await.is_empty(),
        "the limit holds across workers"
    );
    s.complete_many("a", &[lease(&a[0])]).await.unwrap();
    assert_eq!(
        claim(&b, "q", 10, "b", LONG).await.len(),
        1,
        "a finished job frees a place"
    );

    for _ in 0..4 {
        put(s, job("k").concurrency_key("tenant-1")).await;
    }
    put(s, job("k").concurrency_key("tenant-2")).await;
    s.set_key_limit(&KeyLimit {
        key: "tenant-1".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    let got = claim(s, "k", 10, "a", LONG).await;
    let mut by_key = std::collections::HashMap::new();
    for j in &got {
        let k = get(s, j.id).await.concurrency_key.unwrap();
        *by_key.entry(k).or_insert(0) += 1;
    }
    assert_eq!(by_key.get("tenant-1"), Some(&1), "{by_key:?}");
    assert_eq!(by_key.get("tenant-2"), Some(&1), "{by_key:?}");
    assert!(s
        .key_limits()
        .await
        .unwrap()
        .iter()
        .any(|l| l.key == "tenant-1"));
}

/// Jobs sharing an ordering key run one at a time, in enqueue order; a dead head holds the
/// key until it is skipped.
pub async fn ordering_keys_run_one_at_a_time_in_order<H: Harness>(h: &H) {
    let s = h.store();
    let ids: Vec<JobId> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(put(s, job("o").ordering_key("acct-7").max_attempts(1)).await);
        }
        v
    };
    let free = put(s, job("o")).await;
    let first = claim(s, "o", 10, "w", LONG).await;
    let mut got: Vec<JobId> = first.iter().map(|j| j.id).collect();
    got.sort();
    assert_eq!(
        got,
        vec![ids[0], free],
        "the key's head and the unkeyed job"
    );
    let head = first.iter().find(|j| j.id == ids[0]).unwrap();
    // The key's release hands it on at once, without the sweeper's safety net.
    s.complete_many("w", &[lease(head)]).await.unwrap();
    let next = claim(s, "o", 10, "w", LONG).await;
    assert_eq!(next.iter().map(|j| j.id).collect::<Vec<_>>(), vec![ids[1]]);
    // The second dies: the third waits behind it until an operator skips it.
    s.fail_many(
        "w",
        &[Failure {
            lease: lease(&next[0]),
            class: FailureClass::Discard,
            message: "bad".into(),
            retry_in: None,
        }],
    )
    .await
    .unwrap();
    s.unblock_keys(100).await.unwrap();
    assert!(
        claim(s, "o", 10, "w", LONG).await.is_empty(),
        "held by a dead head"
    );
    let blocked = s.blocked_keys(10).await.unwrap();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    let skipped = s.skip(ids[1]).await.unwrap();
    assert_eq!(skipped.state, JobState::Cancelled);
    let last = claim(s, "o", 10, "w", LONG).await;
    assert_eq!(last.iter().map(|j| j.id).collect::<Vec<_>>(), vec![ids[2]]);
}

/// Claims take the lowest priority number first, then the oldest; under a starvation bound
/// a job ready for longer than the bound goes first whatever its priority.
pub async fn priority_then_age_with_a_starvation_bound<H: Harness>(h: &H) {
    let s = h.store();
    let low = put(s, job("p").priority(5)).await;
    let urgent_old = put(s, job("p").priority(-5)).await;
    let urgent_new = put(s, job("p").priority(-5)).await;
    let got = claim(s, "p", 2, "w", LONG).await;
    assert_eq!(
        got.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![urgent_old, urgent_new]
    );
    // A fresh urgent job and the old low one: with a bound the starving one goes first.
    h.advance(Duration::from_secs(120)).await;
    let urgent = put(s, job("p").priority(-5)).await;
    let got = s
        .claim(&ClaimRequest {
            queue: "p".into(),
            limit: 1,
            owner: "w".into(),
            lease: LONG,
            starvation: Some(Duration::from_secs(60)),
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![low]);
    let got = claim(s, "p", 1, "w", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![urgent]);
}

/// A delayed job is not claimable before its time; it is after.
pub async fn delayed_jobs_wait_for_their_time<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("d").delay(Duration::from_secs(300))).await;
    assert!(claim(s, "d", 1, "w", LONG).await.is_empty());
    assert!(
        !s.any_active(&["d".into()]).await.unwrap(),
        "scheduled is not active"
    );
    h.advance(Duration::from_secs(301)).await;
    let got = claim(s, "d", 1, "w", LONG).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id]);
}

/// A claim's bound on controlled work (`ClaimRequest::controlled`, a worker's free run
/// slots): keyed jobs, and every job of a queue with a limit or rate, count against it;
/// unkeyed jobs of an unlimited queue do not. A job passed over is left exactly as it was
/// (pending, not flagged blocked), and a released claim counts as no run.
pub async fn claims_bound_controlled_work_to_free_slots<H: Harness>(h: &H) {
    let s = h.store();
    let claim_with = |queue: &'static str, limit: i32, controlled: Option<i32>| async move {
        s.claim(&ClaimRequest {
            queue: queue.into(),
            limit,
            owner: "w".into(),
            lease: LONG,
            starvation: None,
            controlled,
        })
        .await
        .unwrap()
    };
    // Mixed: three keyed (an ordering key and two concurrency keys), three plain.
    let keyed = [
        put(s, job("m").ordering_key("o1")).await,
        put(s, job("m").concurrency_key("c1")).await,
        put(s, job("m").concurrency_key("c2")).await,
    ];
    let plain = [
        put(s, job("m")).await,
        put(s, job("m")).await,
        put(s, job("m")).await,
    ];
    let got = claim_with("m", 10, Some(1)).await;
    let ids: Vec<JobId> = got.iter().map(|j| j.id).collect();
    assert_eq!(ids.len(), 4, "one keyed job and every plain one: {ids:?}");
    assert_eq!(ids.iter().filter(|i| keyed.contains(i)).count(), 1);
    assert!(plain.iter().all(|p| ids.contains(p)));
    for k in keyed.iter().filter(|k| !ids.contains(k)) {
        let r = get(s, *k).await;
        assert_eq!(
            (r.state, r.blocked, r.attempt),
            (JobState::Pending, false, 0)
        );
    }
    // No free slot: no keyed job at all; unbounded: the rest.
    assert!(claim_with("m", 10, Some(0)).await.is_empty());
    assert_eq!(claim_with("m", 10, None).await.len(), 2);

    // A limited queue: every job counts, keyed or not.
    s.set_queue_limits(
        "l",
        &QueueLimits {
            max_running: Some(100),
            key_max_running: None,
            rate: None,
        },
    )
    .await
    .unwrap();
    for _ in 0..5 {
        put(s, job("l")).await;
    }
    assert_eq!(claim_with("l", 10, Some(2)).await.len(), 2);
    assert!(claim_with("l", 10, Some(0)).await.is_empty());
    let rest = claim_with("l", 10, Some(3)).await;
    assert_eq!(rest.len(), 3);

    // A release gives the claim back uncounted: the next claim is still the first run.
    let first = &rest[0];
    s.release_many("w", &[first.lease()]).await.unwrap();
    let r = get(s, first.id).await;
    assert_eq!(
        (r.attempt, r.released, r.runs(), r.max_runs()),
        (1, 1, 0, 25)
    );
    let again = claim_with("l", 1, None).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].attempt, again[0].run(), again[0].max_runs()),
        (2, 1, 25)
    );
}

/// A key out of tokens, or at its running limit, never holds back the rest of its queue,
/// however deep its backlog: 400 ready jobs of a tenant metered at 1 a day (its one token
/// spent) and 400 of a tenant at its limit of 1 (one running), ahead of other jobs in claim
/// order, deeper than a claim's walk (4 × limit + 200): a claim still takes the others.
pub async fn a_deep_backlog_of_a_held_key_holds_back_no_one<H: Harness>(h: &H) {
    let s = h.store();
    s.set_key_limit(&KeyLimit {
        key: "slow".into(),
        max_running: None,
        rate: Some(RateLimit {
            limit: 1,
            period: Duration::from_secs(86_400),
        }),
    })
    .await
    .unwrap();
    s.set_key_limit(&KeyLimit {
        key: "busy".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    // Spend each key's one allowance: the first job of each runs.
    put(s, job("t").concurrency_key("slow").priority(-10)).await;
    put(s, job("t").concurrency_key("busy").priority(-10)).await;
    assert_eq!(claim(s, "t", 10, "w", LONG).await.len(), 2);
    let many: Vec<NewJob> = (0..800)
        .map(|i| {
            job("t")
                .concurrency_key(if i % 2 == 0 { "slow" } else { "busy" })
                .priority(-5)
        })
        .collect();
    s.enqueue_many(&many).await.unwrap();
    let others = [
        put(s, job("t")).await,
        put(s, job("t").concurrency_key("free")).await,
        put(s, job("t").ordering_key("o")).await,
    ];
    // "Why is it not running?" counts what goes first: the limit-full tenant's 400 (a claim
    // has not walked past them yet), not the 400 of the tenant out of tokens.
    let why = s.why(others[0]).await.unwrap();
    let ahead = why.gates.iter().find_map(|g| match g {
        Gate::BehindInQueue { ahead } => Some(*ahead),
        _ => None,
    });
    assert_eq!(ahead, Some(400), "{:?}", why.gates);
    // Claims as a worker makes them; a few may go to walking past the held keys' jobs.
    let mut got = Vec::new();
    for _ in 0..5 {
        got.extend(claim(s, "t", 10, "w", LONG).await.into_iter().map(|j| j.id));
        if others.iter().all(|o| got.contains(o)) {
            break;
        }
    }
    let mut want = others.to_vec();
    want.sort();
    got.sort();
    assert_eq!(got, want, "only the three others, and all of them");
}
