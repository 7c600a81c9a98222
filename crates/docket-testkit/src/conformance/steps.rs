//! Memoized steps: recorded once per job and only under the claim that holds it — not by a
//! stale attempt, another owner or a lease past its expiry, also after the job was reaped
//! and claimed again — read back in order, and pruned once their job is gone.

use std::time::Duration;

use docket_core::*;
use serde_json::json;

use super::*;

fn lost(r: Result<StepRecorded>) -> bool {
    matches!(r, Err(StoreError::LeaseLost(_)))
}

/// The whole life of a job's steps.
pub async fn steps_are_recorded_once_under_the_claim<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let c = claim(s, "q", 1, "a", Duration::from_secs(5)).await;
    let l1 = lease(&c[0]);
    let r = s
        .record_step("a", l1, "charge", &json!({"charge": "ch_1"}))
        .await
        .unwrap();
    assert!(r.written);
    // The same name again: the first record wins and comes back.
    let r = s
        .record_step("a", l1, "charge", &json!({"charge": "ch_2"}))
        .await
        .unwrap();
    assert_eq!((r.written, r.output), (false, json!({"charge": "ch_1"})));
    assert!(
        s.record_step("a", l1, "email", &json!(null))
            .await
            .unwrap()
            .written
    );

    // Refused, writing nothing: a stale attempt, another owner, a bad name or output.
    let stale = Lease {
        id: l1.id,
        attempt: l1.attempt + 1,
    };
    assert!(lost(s.record_step("a", stale, "x", &json!(1)).await));
    assert!(lost(s.record_step("b", l1, "x", &json!(1)).await));
    for (name, out) in [("", json!(1)), ("a\nb", json!(1)), ("ok", json!("a\u{0}b"))] {
        let r = s.record_step("a", l1, name, &out).await;
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{name:?}: {r:?}");
    }
    let steps = s.job_steps(id).await.unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["charge", "email"]);
    assert!(steps.iter().all(|s| s.attempt == l1.attempt));
    assert_eq!(steps[0].output, json!({"charge": "ch_1"}));

    // Past its lease (before any reap) the claim records nothing; reaped and claimed again,
    // the old claim still records nothing and the new one goes on.
    h.advance(Duration::from_secs(6)).await;
    assert!(lost(s.record_step("a", l1, "late", &json!(1)).await));
    assert_eq!(s.reap(100).await.unwrap().jobs.len(), 1);
    h.advance(Duration::from_secs(3600)).await;
    let c = claim(s, "q", 1, "b", LONG).await;
    let l2 = lease(&c[0]);
    assert_eq!(l2.id, id);
    assert!(lost(s.record_step("a", l1, "late", &json!(1)).await));
    let r = s
        .record_step("b", l2, "charge", &json!("again"))
        .await
        .unwrap();
    assert_eq!((r.written, r.output), (false, json!({"charge": "ch_1"})));
    assert!(
        s.record_step("b", l2, "ship", &json!(3))
            .await
            .unwrap()
            .written
    );
    let steps = s.job_steps(id).await.unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(
        (steps[2].name.as_str(), steps[2].attempt),
        ("ship", l2.attempt)
    );

    // Gone with their job: completed by delete, the next prune takes its steps.
    let other = put(s, job("p")).await;
    let oc = claim(s, "p", 1, "b", LONG).await;
    assert!(
        s.record_step("b", lease(&oc[0]), "keep", &json!(1))
            .await
            .unwrap()
            .written
    );
    assert_eq!(
        s.complete_delete_many("b", &[l2])
            .await
            .unwrap()
            .applied
            .len(),
        1
    );
    let r = s.prune(&Retention::default()).await.unwrap();
    assert_eq!(r.steps, 3);
    assert!(s.job_steps(id).await.unwrap().is_empty());
    assert_eq!(
        s.job_steps(other).await.unwrap().len(),
        1,
        "a live job keeps its steps"
    );
}

/// A job parked by a durable sleep (its sleep recorded as a step, then snoozed for the
/// sleep's length) is named as sleeping by `why`; a plain snooze stays "scheduled for later".
pub async fn why_names_a_durable_sleep<H: Harness>(h: &H) {
    let s = h.store();
    let sleeper = put(s, job("q")).await;
    let snoozer = put(s, job("q")).await;
    let c = claim(s, "q", 2, "w", LONG).await;
    for j in &c {
        if j.id == sleeper {
            let step = docket_core::steps::sleep_step("cool-off");
            let r = s
                .record_step("w", lease(j), &step, &json!({"sleep_ms": 90_000}))
                .await
                .unwrap();
            assert!(r.written);
        }
        let out = s
            .snooze_many(
                "w",
                &[Snooze {
                    lease: lease(j),
                    delay: Duration::from_secs(90),
                }],
            )
            .await
            .unwrap();
        assert_eq!(out.applied.len(), 1);
    }
    let w = s.why(sleeper).await.unwrap();
    match w.gates.as_slice() {
        [Gate::Sleeping { name, in_s, .. }, ..] => {
            assert_eq!(name, "cool-off");
            assert!((60.0..=90.0).contains(in_s), "{in_s}");
        }
        other => panic!("{other:?}"),
    }
    assert!(w.gates[0].describe("q").starts_with("sleeping until"));
    let w = s.why(snoozer).await.unwrap();
    assert!(
        matches!(w.gates.first(), Some(Gate::ScheduledLater { .. })),
        "{w:?}"
    );
}

/// Many steps in one call: each judged by its own claim, answered in input order — the
/// fenced ones recorded (or the earlier record returned), a stale claim's step refused with
/// its reason and nothing written for it — and one bad step refuses the whole call.
pub async fn a_batch_of_steps_is_fenced_step_by_step<H: Harness>(h: &H) {
    let s = h.store();
    let a = put(s, job("q")).await;
    let b = put(s, job("q")).await;
    let c = claim(s, "q", 2, "w", LONG).await;
    let (la, lb) = if c[0].id == a {
        (lease(&c[0]), lease(&c[1]))
    } else {
        (lease(&c[1]), lease(&c[0]))
    };
    assert_eq!((la.id, lb.id), (a, b));
    let first = s
        .record_step("w", la, "charge", &json!("ch_1"))
        .await
        .unwrap();
    assert!(first.written);
    let stale = Lease {
        id: b,
        attempt: lb.attempt + 1,
    };
    let write = |lease, name: &str, output| StepWrite {
        lease,
        name: name.into(),
        output,
    };
    let batch = [
        write(lb, "ship", json!(2)),
        write(stale, "stale", json!(3)),
        write(la, "charge", json!("ch_2")),
        write(la, "email", json!({"to": "ann"})),
    ];
    let r = s.record_steps("w", &batch).await.unwrap();
    assert_eq!(r.len(), 4);
    assert_eq!(
        r[0],
        Ok(StepRecorded {
            output: json!(2),
            written: true
        })
    );
    match &r[1] {
        Err(lost) => assert_eq!(lost.lease, stale, "{lost}"),
        other => panic!("a stale claim's step was not refused: {other:?}"),
    }
    assert_eq!(
        r[2],
        Ok(StepRecorded {
            output: json!("ch_1"),
            written: false
        }),
        "the first record wins"
    );
    assert_eq!(
        r[3],
        Ok(StepRecorded {
            output: json!({"to": "ann"}),
            written: true
        })
    );
    let names = |id| async move {
        s.job_steps(id)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.name, r.attempt))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(b).await, [("ship".to_string(), lb.attempt)]);
    assert_eq!(
        names(a).await,
        [
            ("charge".to_string(), la.attempt),
            ("email".to_string(), la.attempt)
        ]
    );

    // Another owner's steps are all refused; one bad step refuses the call, writing nothing.
    let r = s
        .record_steps(
            "other",
            &[write(la, "x", json!(1)), write(lb, "y", json!(1))],
        )
        .await
        .unwrap();
    assert!(r.iter().all(|r| r.is_err()), "{r:?}");
    let r = s
        .record_steps("w", &[write(la, "fine", json!(1)), write(lb, "", json!(1))])
        .await;
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    assert_eq!(names(a).await.len(), 2);
    assert_eq!(names(b).await.len(), 1);
    assert!(s.record_steps("w", &[]).await.unwrap().is_empty());
}
