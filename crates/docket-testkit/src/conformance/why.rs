//! "Why is this job not running?" (`Store::why`): every gate the claim applies is named, and
//! the answer agrees with what a claim then does.

use std::time::Duration;

use docket_core::*;

use super::*;

fn gates_of(r: &WhyReport) -> Vec<&'static str> {
    r.gates
        .iter()
        .map(|g| match g {
            Gate::NotPending { .. } => "not_pending",
            Gate::ScheduledLater { .. } => "scheduled_later",
            Gate::Sleeping { .. } => "sleeping",
            Gate::WaitingForSignal { .. } => "waiting_for_signal",
            Gate::WaitingForParents { .. } => "waiting_for_parents",
            Gate::QueuePaused { .. } => "queue_paused",
            Gate::QueueFull { .. } => "queue_full",
            Gate::QueueRateEmpty { .. } => "queue_rate_empty",
            Gate::KeyFull { .. } => "key_full",
            Gate::KeyRateEmpty { .. } => "key_rate_empty",
            Gate::OrderingBehind { .. } => "ordering_behind",
            Gate::AwaitingSweep => "awaiting_sweep",
            Gate::NoLiveWorker => "no_live_worker",
            Gate::BehindInQueue { .. } => "behind_in_queue",
        })
        .collect()
}

/// Place in the queue, schedule, pause, queue limit and rate, key limit, ordering key, and
/// "not pending": each named with its numbers, and the claim that follows agrees.
pub async fn why_names_every_gate_that_holds_a_job<H: Harness>(h: &H) {
    let s = h.store();
    assert!(matches!(
        s.why(JobId(i64::MAX)).await,
        Err(StoreError::NotFound(_))
    ));
    // A live worker serves every queue below but `lonely`.
    let served: Vec<String> = (1..=7).map(|i| format!("w{i}")).collect();
    s.worker_beat(&beat("w", &served), Duration::from_secs(60))
        .await
        .unwrap();
    let lonely = put(s, job("lonely")).await;
    assert_eq!(s.why(lonely).await.unwrap().gates, vec![Gate::NoLiveWorker]);

    // Place: the urgent job is next; the others wait behind it, in claim order.
    let a = put(s, job("w1")).await;
    let b = put(s, job("w1")).await;
    let urgent = put(s, job("w1").priority(-1)).await;
    assert!(s.why(urgent).await.unwrap().next_up());
    assert_eq!(
        s.why(b).await.unwrap().gates,
        vec![Gate::BehindInQueue { ahead: 2 }]
    );
    assert_eq!(
        s.why(a).await.unwrap().gates,
        vec![Gate::BehindInQueue { ahead: 1 }]
    );
    let c = claim(s, "w1", 1, "w", LONG).await;
    assert_eq!(c[0].id, urgent, "the claim takes the job `why` called next");
    let r = s.why(urgent).await.unwrap();
    assert_eq!(
        r.gates,
        vec![Gate::NotPending {
            state: JobState::Running
        }]
    );

    // Scheduled later.
    let later = put(s, job("w2").delay(Duration::from_secs(300))).await;
    let r = s.why(later).await.unwrap();
    match r.gates.as_slice() {
        [Gate::ScheduledLater { in_s, .. }] => assert!((250.0..=300.0).contains(in_s), "{in_s}"),
        other => panic!("{other:?}"),
    }

    // Paused.
    let paused = put(s, job("w3")).await;
    s.pause_queue("w3").await.unwrap();
    assert_eq!(
        gates_of(&s.why(paused).await.unwrap()),
        vec!["queue_paused"]
    );
    assert!(claim(s, "w3", 1, "w", LONG).await.is_empty());

    // Queue limit full.
    put(s, job("w4")).await;
    let held = put(s, job("w4")).await;
    s.set_queue_limits(
        "w4",
        &QueueLimits {
            max_running: Some(1),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(claim(s, "w4", 5, "w", LONG).await.len(), 1);
    assert_eq!(
        s.why(held).await.unwrap().gates,
        vec![Gate::QueueFull {
            max_running: 1,
            running: 1
        }]
    );

    // Queue rate bucket empty.
    put(s, job("w5")).await;
    let rated = put(s, job("w5")).await;
    s.set_queue_limits(
        "w5",
        &QueueLimits {
            rate: Some(RateLimit {
                limit: 1,
                period: Duration::from_secs(3600),
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(claim(s, "w5", 5, "w", LONG).await.len(), 1);
    assert_eq!(
        gates_of(&s.why(rated).await.unwrap()),
        vec!["queue_rate_empty"]
    );

    // Key limit full.
    s.set_key_limit(&KeyLimit {
        key: "tenant".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    put(s, job("w6").concurrency_key("tenant")).await;
    let keyed = put(s, job("w6").concurrency_key("tenant")).await;
    assert_eq!(claim(s, "w6", 5, "w", LONG).await.len(), 1);
    assert_eq!(
        s.why(keyed).await.unwrap().gates,
        vec![Gate::KeyFull {
            key: "tenant".into(),
            max_running: 1,
            running: 1,
            by_queue: vec![("w6".into(), 1)],
        }]
    );
    // A key shared by queues: the answer says whose jobs fill it.
    s.set_key_limit(&KeyLimit {
        key: "shared".into(),
        max_running: Some(3),
        rate: None,
    })
    .await
    .unwrap();
    for q in ["w6b", "w6a", "w6a"] {
        put(s, job(q).concurrency_key("shared")).await;
    }
    assert_eq!(claim(s, "w6a", 5, "w", LONG).await.len(), 2);
    assert_eq!(claim(s, "w6b", 5, "w", LONG).await.len(), 1);
    let shared = put(s, job("w6b").concurrency_key("shared")).await;
    let w = s.why(shared).await.unwrap();
    // (No worker serves w6b: that gate follows.)
    assert_eq!(
        w.gates[0],
        Gate::KeyFull {
            key: "shared".into(),
            max_running: 3,
            running: 3,
            by_queue: vec![("w6a".into(), 2), ("w6b".into(), 1)],
        }
    );
    let said = w.gates[0].describe("w6b");
    assert!(
        said.contains("(2 of queue w6a, 1 of queue w6b; its limit is 3)"),
        "{said}"
    );

    // Ordering key: behind its running head, then behind the head once it is dead.
    let head = put(s, job("w7").ordering_key("acct").max_attempts(1)).await;
    let next = put(s, job("w7").ordering_key("acct")).await;
    let c = claim(s, "w7", 5, "w", LONG).await;
    assert_eq!(c.iter().map(|j| j.id).collect::<Vec<_>>(), vec![head]);
    assert_eq!(
        s.why(next).await.unwrap().gates,
        vec![Gate::OrderingBehind {
            key: "acct".into(),
            job: head,
            state: JobState::Running
        }]
    );
    s.fail_many(
        "w",
        &[Failure {
            lease: lease(&c[0]),
            class: FailureClass::Discard,
            message: "bad".into(),
            retry_in: None,
        }],
    )
    .await
    .unwrap();
    assert_eq!(
        s.why(next).await.unwrap().gates,
        vec![Gate::OrderingBehind {
            key: "acct".into(),
            job: head,
            state: JobState::Dead
        }]
    );
    assert!(claim(s, "w7", 5, "w", LONG).await.is_empty());
    s.skip(head).await.unwrap();
    assert!(
        s.why(next).await.unwrap().next_up(),
        "skipping the head frees the key"
    );
    let c = claim(s, "w7", 5, "w", LONG).await;
    assert_eq!(c.iter().map(|j| j.id).collect::<Vec<_>>(), vec![next]);

    // Several gates at once, in the order a claim meets them.
    let both = put(s, job("w3").delay(Duration::from_secs(60))).await;
    assert_eq!(
        gates_of(&s.why(both).await.unwrap()),
        vec!["scheduled_later", "queue_paused"]
    );

    // The worker's report expires: its queues have no live worker any more.
    let waiting = put(s, job("w1")).await;
    h.advance(Duration::from_secs(61)).await;
    assert!(gates_of(&s.why(waiting).await.unwrap()).contains(&"no_live_worker"));
}

/// A worker's report, as the runtime sends it.
pub fn beat(owner: &str, queues: &[String]) -> WorkerBeat {
    WorkerBeat {
        owner: owner.into(),
        host: "conformance-host".into(),
        pid: 4242,
        queues: queues.to_vec(),
        concurrency: 10,
        in_flight: 3,
        // 1 buffered of the first queue, 2 of the second, ...: each count filed under its queue.
        buffered: (1..=queues.len() as u32).sum(),
        buffered_by_queue: (1..=queues.len() as u32).collect(),
    }
}

/// The registry lists live workers only, with what they reported and who leads; a stopping
/// worker leaves at once, a silent one when its report expires; bad queue names are refused.
pub async fn the_worker_registry_lists_live_workers_only<H: Harness>(h: &H) {
    let s = h.store();
    let ttl = Duration::from_secs(15);
    let queues = vec!["mail".to_string(), "sms".to_string()];
    s.worker_beat(&beat("a", &queues), ttl).await.unwrap();
    s.worker_beat(&beat("b", &queues[..1]), ttl).await.unwrap();
    assert!(s.leader_try("a", ttl).await.unwrap());
    let list = s.workers().await.unwrap();
    assert_eq!(list.len(), 2);
    let a = list.iter().find(|w| w.beat.owner == "a").unwrap();
    assert_eq!(a.beat, beat("a", &queues));
    assert_eq!(
        (a.beat.buffered_in("mail"), a.beat.buffered_in("sms")),
        (1, 2)
    );
    assert!(a.leader && a.expires_at > a.seen_at);
    assert!(!list.iter().find(|w| w.beat.owner == "b").unwrap().leader);
    // A second report updates the row (no duplicate) and keeps its start.
    let mut busier = beat("a", &queues);
    busier.in_flight = 9;
    s.worker_beat(&busier, ttl).await.unwrap();
    let again = s.workers().await.unwrap();
    assert_eq!(again.len(), 2);
    let a2 = again.iter().find(|w| w.beat.owner == "a").unwrap();
    assert_eq!((a2.beat.in_flight, a2.started_at), (9, a.started_at));
    s.worker_gone("b").await.unwrap();
    assert_eq!(s.workers().await.unwrap().len(), 1);
    h.advance(Duration::from_secs(16)).await;
    assert!(s.workers().await.unwrap().is_empty(), "a's report expired");
    assert!(matches!(
        s.worker_beat(&beat("c", &["".to_string()]), ttl).await,
        Err(StoreError::Invalid(_))
    ));
    let mut skewed = beat("d", &queues);
    skewed.buffered_by_queue = vec![5];
    assert!(matches!(
        s.worker_beat(&skewed, ttl).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(s.workers().await.unwrap().is_empty(), "nothing written");
}
