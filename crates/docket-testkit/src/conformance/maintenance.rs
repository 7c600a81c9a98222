//! What the leader runs: the reaper, the pruner, leader election itself, periodic ticks.

use std::time::Duration;

use docket_core::*;

use super::*;

/// Only expired leases are reaped; a reaped job with attempts left is pending again with its
/// attempt counted, one without is dead; the history names the owner that lost it.
pub async fn reaper_takes_only_expired_leases<H: Harness>(h: &H) {
    let s = h.store();
    let live = put(s, job("live")).await;
    let again = put(s, job("q").max_attempts(3)).await;
    let last = put(s, job("last").max_attempts(1)).await;
    let l = claim(s, "live", 1, "w", LONG).await;
    claim(s, "q", 1, "w", Duration::from_secs(5)).await;
    claim(s, "last", 1, "w", Duration::from_secs(5)).await;
    assert!(
        s.reap(100).await.unwrap().jobs.is_empty(),
        "nothing expired yet"
    );
    h.advance(Duration::from_secs(6)).await;
    let r = s.reap(100).await.unwrap();
    let mut got: Vec<(JobId, JobState)> = r.jobs.iter().map(|j| (j.id, j.state)).collect();
    got.sort_by_key(|(id, _)| *id);
    assert_eq!(
        got,
        vec![(again, JobState::Pending), (last, JobState::Dead)]
    );
    assert!(r.jobs.iter().all(|j| j.owner == "w" && j.attempt == 1));
    assert_eq!(get(s, live).await.state, JobState::Running);
    let rec = get(s, again).await;
    assert_eq!(rec.attempt, 1, "the reaped attempt counts");
    assert_eq!(
        rec.errors.last().and_then(|e| e.owner.as_deref()),
        Some("w")
    );
    assert!(
        s.reap(100).await.unwrap().jobs.is_empty(),
        "a sweep is not repeated"
    );
    // A live lease is renewed by its heartbeat past the advance.
    let beat = s.heartbeat("w", &[lease(&l[0])], LONG).await.unwrap();
    assert_eq!(beat.extended.len(), 1);
    // The batch bounds a sweep.
    for _ in 0..3 {
        put(s, job("b")).await;
    }
    claim(s, "b", 3, "w", Duration::from_secs(5)).await;
    h.advance(Duration::from_secs(6)).await;
    assert_eq!(s.reap(2).await.unwrap().jobs.len(), 2);
    assert_eq!(s.reap(2).await.unwrap().jobs.len(), 1);
}

/// Finished jobs past their retention are deleted; younger ones, and unfinished ones of any
/// age, are kept.
pub async fn prune_deletes_only_past_retention<H: Harness>(h: &H) {
    let s = h.store();
    let old = put(s, job("q")).await;
    let pending = put(s, job("p")).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    s.complete_many("w", &[lease(&c[0])]).await.unwrap();
    let retention = Retention {
        finished: Duration::from_secs(3600),
        dead: Duration::from_secs(3600),
        batch: 100,
        ..Retention::default()
    };
    assert_eq!(s.prune(&retention).await.unwrap().finished, 0);
    h.advance(Duration::from_secs(3601)).await;
    let young = put(s, job("q")).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    s.complete_many("w", &[lease(&c[0])]).await.unwrap();
    let r = s.prune(&retention).await.unwrap();
    assert_eq!(r.finished, 1);
    assert!(matches!(s.get(old).await, Err(StoreError::NotFound(_))));
    assert_eq!(get(s, young).await.state, JobState::Succeeded);
    assert_eq!(get(s, pending).await.state, JobState::Pending);
}

/// One leader at a time; its term ends at its TTL (another takes over) or when it resigns.
pub async fn one_leader_at_a_time<H: Harness>(h: &H) {
    let s = h.store();
    let ttl = Duration::from_secs(15);
    assert!(s.leader_try("a", ttl).await.unwrap());
    assert!(!s.leader_try("b", ttl).await.unwrap());
    assert!(s.leader_try("a", ttl).await.unwrap(), "renewal");
    h.advance(Duration::from_secs(16)).await;
    assert!(s.leader_try("b", ttl).await.unwrap(), "a's term ran out");
    assert!(!s.leader_try("a", ttl).await.unwrap());
    s.leader_resign("b").await.unwrap();
    assert!(s.leader_try("a", ttl).await.unwrap(), "b resigned");
    s.leader_resign("nobody").await.unwrap();
    assert!(
        !s.leader_try("b", ttl).await.unwrap(),
        "resigning for another does nothing"
    );
}

/// A due tick is enqueued once however often the scheduler runs; a redefinition with the
/// same schedule keeps it; removal stops it.
pub async fn periodic_ticks_are_enqueued_once<H: Harness>(h: &H) {
    let s = h.store();
    let def = Periodic::new(
        "every-minute",
        "* * * * *",
        "cron",
        "tick",
        serde_json::json!({}),
    );
    s.upsert_periodic(&def).await.unwrap();
    assert!(
        s.enqueue_due_periodic(10).await.unwrap().is_empty(),
        "not due yet"
    );
    h.advance(Duration::from_secs(61)).await;
    let first = s.enqueue_due_periodic(10).await.unwrap();
    assert!(!first.is_empty(), "due after a minute");
    assert!(first.iter().all(|t| t.name == "every-minute"));
    assert!(
        s.enqueue_due_periodic(10).await.unwrap().is_empty(),
        "once per tick"
    );
    let jobs = all(s).await;
    assert_eq!(jobs.len(), first.iter().filter(|t| !t.duplicate).count());
    assert!(jobs.iter().all(|j| j.queue == "cron" && j.kind == "tick"));
    let listed = s.list_periodic().await.unwrap();
    assert_eq!(listed.len(), 1);
    s.upsert_periodic(&def).await.unwrap();
    assert!(
        s.enqueue_due_periodic(10).await.unwrap().is_empty(),
        "a redeploy is no tick"
    );
    assert!(s.remove_periodic("every-minute").await.unwrap());
    assert!(!s.remove_periodic("every-minute").await.unwrap());
    h.advance(Duration::from_secs(61)).await;
    assert!(s.enqueue_due_periodic(10).await.unwrap().is_empty());
}

/// A paused schedule enqueues nothing however long it stays paused; resumed, the ticks that
/// passed follow its `missed` policy (here the default, the latest one only); a redeploy of
/// the definition does not resume it; "run now" enqueues one job at once, paused or not,
/// without moving the schedule.
pub async fn a_paused_schedule_enqueues_nothing_until_resumed<H: Harness>(h: &H) {
    let s = h.store();
    let def = Periodic::new(
        "nightly",
        "* * * * *",
        "cron",
        "report",
        serde_json::json!({}),
    );
    s.upsert_periodic(&def).await.unwrap();
    assert!(s.pause_periodic("nightly", true).await.unwrap());
    assert!(
        !s.pause_periodic("nope", true).await.unwrap(),
        "no such schedule"
    );
    let paused = s.list_periodic().await.unwrap()[0].clone();
    assert!(paused.paused_at.is_some());
    h.advance(Duration::from_secs(5 * 60 + 1)).await;
    assert!(
        s.enqueue_due_periodic(10).await.unwrap().is_empty(),
        "paused: no tick"
    );
    s.upsert_periodic(&def).await.unwrap();
    assert!(
        s.list_periodic().await.unwrap()[0].paused_at.is_some(),
        "a redeploy keeps the pause"
    );
    // (The clock moved: the stored next tick moved with it.)
    let paused = s.list_periodic().await.unwrap()[0].clone();
    let ran = docket_core::periodic::run_now(s, "nightly", h.now().await)
        .await
        .unwrap()
        .expect("the schedule exists");
    let job = get(s, ran.id).await;
    assert_eq!((job.queue.as_str(), job.kind.as_str()), ("cron", "report"));
    assert_eq!(job.metadata["run_now"], true);
    assert_eq!(
        s.list_periodic().await.unwrap()[0].next_tick_at,
        paused.next_tick_at,
        "run now leaves the schedule"
    );
    assert!(docket_core::periodic::run_now(s, "nope", h.now().await)
        .await
        .unwrap()
        .is_none());
    assert!(s.pause_periodic("nightly", false).await.unwrap());
    let resumed = s.enqueue_due_periodic(10).await.unwrap();
    assert_eq!(
        resumed.len(),
        1,
        "missed = latest: one tick for five: {resumed:?}"
    );
    assert!(s.list_periodic().await.unwrap()[0].paused_at.is_none());
}

/// "Which worker is dead?": the registry tells a live worker, one that stopped (a late report
/// does not revive it) and one that vanished without a word apart, and shows the leadership's
/// lease although its holder is the one that vanished.
pub async fn the_registry_tells_live_stopped_and_vanished_workers_apart<H: Harness>(h: &H) {
    let s = h.store();
    let beat = |owner: &str| WorkerBeat {
        owner: owner.into(),
        host: "h".into(),
        pid: 1,
        queues: vec!["q".into()],
        concurrency: 2,
        in_flight: 1,
        buffered: 0,
        buffered_by_queue: vec![],
    };
    let ttl = Duration::from_secs(15);
    s.worker_beat(&beat("killed"), ttl).await.unwrap();
    assert!(s.leader_try("killed", ttl).await.unwrap());
    h.advance(Duration::from_secs(16)).await;
    s.worker_beat(&beat("live"), ttl).await.unwrap();
    s.worker_beat(&beat("stopping"), ttl).await.unwrap();
    s.worker_gone("stopping").await.unwrap();
    s.worker_beat(&beat("stopping"), ttl).await.unwrap();
    let live: Vec<String> = s
        .workers()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.beat.owner)
        .collect();
    assert_eq!(live, vec!["live".to_string()]);
    let reg = s.registry(Duration::from_secs(3600)).await.unwrap();
    let status = |o: &str| {
        reg.workers
            .iter()
            .find(|w| w.beat.owner == o)
            .map(|w| w.status(reg.now))
    };
    assert_eq!(status("live"), Some(WorkerStatus::Live));
    assert!(
        matches!(status("stopping"), Some(WorkerStatus::Stopped(_))),
        "{:?}",
        status("stopping")
    );
    assert!(
        matches!(status("killed"), Some(WorkerStatus::Expired(_))),
        "{:?}",
        status("killed")
    );
    let lease = reg.leader.expect("the lease, though its holder is gone");
    assert_eq!(lease.owner, "killed");
    assert!(lease.expires_at <= reg.now, "ran out");
    let short = s.registry(Duration::from_millis(500)).await.unwrap();
    assert!(
        !short.workers.iter().any(|w| w.beat.owner == "killed"),
        "gone longer than the window"
    );
}
