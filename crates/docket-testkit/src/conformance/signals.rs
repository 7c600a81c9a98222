//! Signals and parks: a signal wakes the job parked waiting for it, once; one sent before
//! the park makes the park due at once; a repeat changes nothing; a signal to a missing or
//! finished job, or an invalid one, is refused and writes nothing; a park is fenced.

use std::time::Duration;

use docket_core::signals::wait_step;
use docket_core::*;
use serde_json::json;

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

async fn park<S: Store>(s: &S, owner: &str, l: Lease, signal: &str) -> BatchOutcome {
    s.park_many(
        owner,
        &[Park {
            lease: l,
            delay: HOUR,
            signal: signal.into(),
        }],
    )
    .await
    .unwrap()
}

/// The whole life of a signal, sent after the wait and before it.
pub async fn signals_wake_parked_jobs_once<H: Harness>(h: &H) {
    let s = h.store();
    // Sent after the wait: the job is parked for its timeout, and the signal wakes it.
    let a = put(s, job("q")).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    let la = lease(&c[0]);
    let step = wait_step("approved");
    let r = s
        .record_step("w", la, &step, &json!({"timeout_ms": 3_600_000}))
        .await
        .unwrap();
    assert!(r.written);
    let stale = Lease {
        id: la.id,
        attempt: la.attempt + 1,
    };
    assert_eq!(
        park(s, "w", stale, "approved").await.lost.len(),
        1,
        "a park is fenced"
    );
    assert_eq!(park(s, "w", la, "approved").await.applied, vec![la]);
    let rec = get(s, a).await;
    assert_eq!(
        (rec.state, rec.runs()),
        (JobState::Pending, 0),
        "no attempt spent"
    );
    match s.why(a).await.unwrap().gates.first() {
        Some(Gate::WaitingForSignal { name, .. }) => assert_eq!(name, "approved"),
        other => panic!("{other:?}"),
    }
    assert!(
        claim(s, "q", 1, "w", LONG).await.is_empty(),
        "parked for its timeout"
    );
    // Another signal than the one it waits for is kept, and wakes nothing.
    let other = s.signal(a, "other", &json!(null)).await.unwrap();
    assert_eq!((other.new, other.woke), (true, false));
    assert!(claim(s, "q", 1, "w", LONG).await.is_empty(), "still parked");
    let sent = s
        .signal(a, "approved", &json!({"by": "ann"}))
        .await
        .unwrap();
    assert_eq!((sent.new, sent.woke), (true, true));
    let again = s
        .signal(a, "approved", &json!({"by": "bob"}))
        .await
        .unwrap();
    assert_eq!(
        (again.new, again.woke),
        (false, false),
        "a repeat changes nothing"
    );
    assert_eq!(
        s.job_signal(a, "approved").await.unwrap(),
        Some(json!({"by": "ann"}))
    );
    let c = claim(s, "q", 1, "w", LONG).await;
    assert_eq!(c.len(), 1, "woken: claimable now");
    assert_eq!(c[0].id, a);

    // Sent before the wait: kept; the park finds it and is due at once.
    let b = put(s, job("p")).await;
    let sent = s.signal(b, "go", &json!(7)).await.unwrap();
    assert_eq!((sent.new, sent.woke), (true, false));
    let cb = claim(s, "p", 1, "w", LONG).await;
    assert_eq!(park(s, "w", lease(&cb[0]), "go").await.applied.len(), 1);
    let cb = claim(s, "p", 1, "w", LONG).await;
    assert_eq!(cb.len(), 1, "the park of an arrived signal is due at once");

    // Refused, writing nothing: missing and finished jobs, bad names and payloads.
    assert!(matches!(
        s.signal(JobId(987_654_321), "go", &json!(1)).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        s.complete_many("w", &[lease(&cb[0])])
            .await
            .unwrap()
            .applied
            .len(),
        1
    );
    assert!(matches!(
        s.signal(b, "late", &json!(1)).await,
        Err(StoreError::WrongState {
            state: JobState::Succeeded,
            ..
        })
    ));
    assert_eq!(s.job_signal(b, "late").await.unwrap(), None);
    for (name, payload) in [
        ("", json!(1)),
        ("docket:wait:x", json!(1)),
        ("ok", json!("a\u{0}b")),
    ] {
        let r = s.signal(a, name, &payload).await;
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{name:?}: {r:?}");
    }
    assert_eq!(s.job_signal(a, "ok").await.unwrap(), None);

    // Gone with their job.
    let done = s.complete_delete_many("w", &[lease(&c[0])]).await.unwrap();
    assert_eq!(done.applied.len(), 1);
    let pruned = s
        .prune(&Retention {
            finished: Duration::ZERO,
            ..Retention::default()
        })
        .await
        .unwrap();
    // a: its wait step and two signals; b (pruned as succeeded at once): its signal.
    h.advance(Duration::from_secs(1)).await;
    let later = s
        .prune(&Retention {
            finished: Duration::ZERO,
            ..Retention::default()
        })
        .await
        .unwrap();
    assert_eq!(pruned.steps + later.steps, 4, "{pruned:?} {later:?}");
    assert_eq!(s.job_signal(a, "approved").await.unwrap(), None);
}
