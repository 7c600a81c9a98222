//! The fenced writes, on the store and on the model.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::conformance::Harness;
use chrono::{DateTime, Utc};
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::ops::*;
use super::state::*;
use super::*;

/// Worker `w` writes `write` for `lease`.
pub async fn one_write<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    lease: Lease,
    write: Write,
) -> Result<(), TestCaseError> {
    match write {
        Write::Complete => complete(h, m, w, &[lease], false).await,
        Write::CompleteDelete => complete(h, m, w, &[lease], true).await,
        Write::Fail(kind) => fail_many(h, m, w, &[(lease, kind)]).await,
        Write::Snooze { delay_s } => snooze(h, m, w, &[lease], Some(delay_s)).await,
        Write::Release => snooze(h, m, w, &[lease], None).await,
        Write::Heartbeat => heartbeat(h, m, w, &[lease], true).await,
        Write::CompleteOutput => complete_output(h, m, w, lease).await,
        Write::Step(k) => {
            let value = serde_json::json!([WORKERS[w], lease.attempt]);
            record_step(h, m, w, lease, &format!("s{k}"), value).await
        }
        Write::Answer(k) => {
            let name = docket_core::signals::answer_step(&format!("g{k}"));
            let value = serde_json::json!({ "answered_by": WORKERS[w], "token": lease.attempt });
            record_step(h, m, w, lease, &name, value).await
        }
    }
}

/// Worker `w` completes `lease` with an output (its token, so a stale write would show),
/// then forgets it; the row is kept with the output.
pub async fn complete_output<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    lease: Lease,
) -> Result<(), TestCaseError> {
    let want = m.split(w, &[lease])?;
    m.saw_split(&want);
    let value = serde_json::json!({ "by": WORKERS[w], "token": lease.attempt });
    let got = ok(
        h.store()
            .complete_outputs(
                WORKERS[w],
                &[Output {
                    lease,
                    value: value.clone(),
                }],
            )
            .await,
        "complete with output",
    )?;
    check_batch("complete with output", &got, &want)?;
    if !want.applied.is_empty() {
        let j = m.job_mut(lease.id);
        j.state = JobState::Succeeded;
        j.output = Some(value);
        Model::end_lease(j);
        m.saw("complete with output");
    }
    m.forget(w, &[lease]);
    Ok(())
}

/// Worker `w` records step `name` with `value` under `lease` (the lease stays held):
/// written when the lease holds and the job has no such step, the first record back when it
/// has one, `LeaseLost` when the lease no longer holds.
pub async fn record_step<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    lease: Lease,
    name: &str,
    value: serde_json::Value,
) -> Result<(), TestCaseError> {
    let name = name.to_owned();
    let live = m.live(w, lease)?;
    let got = h
        .store()
        .record_step(WORKERS[w], lease, &name, &value)
        .await;
    match got {
        Ok(r) => {
            prop_assert!(
                live,
                "step {name} of {lease:?} by {} recorded on a lease that does not hold",
                WORKERS[w]
            );
            let j = m.job_mut(lease.id);
            match j.steps.get(&name) {
                Some((_, first)) => {
                    prop_assert!(!r.written, "step {name} written twice");
                    prop_assert_eq!(&r.output, first, "step {} gave back another record", name);
                    m.saw("step: the first record wins");
                }
                None => {
                    prop_assert!(r.written, "step {name} not written on a held lease");
                    j.steps.insert(name, (lease.attempt, value));
                    m.saw("step recorded");
                }
            }
        }
        Err(StoreError::LeaseLost(_)) => {
            prop_assert!(
                !live,
                "step {name} of {lease:?} refused on a lease that holds"
            );
            m.saw("step refused: lease lost");
        }
        Err(e) => return Err(TestCaseError::fail(format!("record_step: {e}"))),
    }
    Ok(())
}

/// Worker `w` records step `s{k}` for each of `leases` (distinct) in one `record_steps`
/// call: each answer judged as [`record_step`] judges one, in input order.
pub async fn record_steps<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    k: u8,
) -> Result<(), TestCaseError> {
    let name = format!("s{k}");
    let writes: Vec<StepWrite> = leases
        .iter()
        .map(|&lease| StepWrite {
            lease,
            name: name.clone(),
            output: serde_json::json!([WORKERS[w], lease.attempt, "batch"]),
        })
        .collect();
    let got = h
        .store()
        .record_steps(WORKERS[w], &writes)
        .await
        .map_err(|e| TestCaseError::fail(format!("record_steps: {e}")))?;
    prop_assert_eq!(got.len(), writes.len(), "one answer per step");
    for (wr, r) in writes.into_iter().zip(got) {
        let lease = wr.lease;
        let live = m.live(w, lease)?;
        match r {
            Ok(r) => {
                prop_assert!(
                    live,
                    "batched step {name} of {lease:?} by {} recorded on a lease that does not hold",
                    WORKERS[w]
                );
                let j = m.job_mut(lease.id);
                match j.steps.get(&name) {
                    Some((_, first)) => {
                        prop_assert!(!r.written, "batched step {name} written twice");
                        prop_assert_eq!(&r.output, first, "batched step gave back another record");
                        m.saw("step batch: the first record wins");
                    }
                    None => {
                        prop_assert!(r.written, "batched step {name} not written on a held lease");
                        j.steps.insert(name.clone(), (lease.attempt, wr.output));
                        m.saw("step batch: recorded");
                    }
                }
            }
            Err(lost) => {
                prop_assert!(
                    !live,
                    "batched step {name} of {lease:?} refused on a lease that holds"
                );
                prop_assert_eq!(lost.lease, lease);
                m.saw("step batch: lease lost");
            }
        }
    }
    Ok(())
}

/// Worker `w` completes `leases` (distinct) in one batch, then forgets them; with `delete`
/// the completed jobs' rows go (the model forgets them, as after a prune).
pub async fn complete<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    delete: bool,
) -> Result<(), TestCaseError> {
    let want = m.split(w, leases)?;
    m.saw_split(&want);
    let got = if delete {
        ok(
            h.store().complete_delete_many(WORKERS[w], leases).await,
            "complete by delete",
        )?
    } else {
        ok(
            h.store().complete_many(WORKERS[w], leases).await,
            "complete",
        )?
    };
    check_batch("complete", &got, &want)?;
    for l in &want.applied {
        if delete {
            m.jobs.remove(&l.id.0);
            continue;
        }
        let j = m.job_mut(l.id);
        j.state = JobState::Succeeded;
        Model::end_lease(j);
    }
    m.forget(w, leases);
    Ok(())
}

/// Worker `w` reports `failures` (distinct leases) in one batch, then forgets them.
pub async fn fail_many<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    failures: &[(Lease, FailKind)],
) -> Result<(), TestCaseError> {
    let leases: Vec<Lease> = failures.iter().map(|f| f.0).collect();
    let want = m.split(w, &leases)?;
    m.saw_split(&want);
    let batch: Vec<Failure> = failures
        .iter()
        .map(|&(lease, kind)| Failure {
            lease,
            class: match kind {
                FailKind::Backoff | FailKind::RetryIn => FailureClass::Retry,
                FailKind::Discard => FailureClass::Discard,
                FailKind::Cancel => FailureClass::Cancel,
            },
            message: format!("{kind:?}"),
            retry_in: (kind == FailKind::RetryIn).then(|| Duration::from_secs(RETRY_IN_S as u64)),
        })
        .collect();
    let got = ok(h.store().fail_many(WORKERS[w], &batch).await, "fail")?;
    check_batch("fail", &got, &want)?;
    let (now, step, window) = (m.now, m.step, m.backoff_window());
    for &(l, kind) in failures {
        if !want.applied.contains(&l) {
            continue;
        }
        let j = m.job_mut(l.id);
        j.record_error(
            match kind {
                FailKind::Backoff | FailKind::RetryIn => "retry",
                FailKind::Discard => "discard",
                FailKind::Cancel => "cancel",
            },
            w,
        );
        Model::end_lease(j);
        j.state = if kind == FailKind::Cancel || j.cancel_requested {
            JobState::Cancelled
        } else if kind == FailKind::Discard || j.attempt >= j.max_attempts {
            JobState::Dead
        } else {
            j.run_at = if kind == FailKind::RetryIn {
                RunAt::At(now + RETRY_IN_S)
            } else {
                window
            };
            j.run_at_step = step;
            JobState::Pending
        };
    }
    m.forget(w, &leases);
    Ok(())
}

/// Worker `w` snoozes `leases` (distinct) by `delay_s`, or releases them (`None`:
/// `release_many`, delay 0), in one batch, then forgets them.
pub async fn snooze<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    delay_s: Option<i64>,
) -> Result<(), TestCaseError> {
    let want = m.split(w, leases)?;
    m.saw_split(&want);
    let got = match delay_s {
        Some(d) => {
            let batch: Vec<Snooze> = leases
                .iter()
                .map(|&lease| Snooze {
                    lease,
                    delay: Duration::from_secs(d as u64),
                })
                .collect();
            ok(h.store().snooze_many(WORKERS[w], &batch).await, "snooze")?
        }
        None => ok(h.store().release_many(WORKERS[w], leases).await, "release")?,
    };
    check_batch(
        if delay_s.is_some() {
            "snooze"
        } else {
            "release"
        },
        &got,
        &want,
    )?;
    let (now, step) = (m.now, m.step);
    for l in &want.applied {
        // The budget comes back even when the job is cancelled instead of requeued.
        Model::give_back(m.job_mut(l.id), now + delay_s.unwrap_or(0), step);
    }
    m.forget(w, leases);
    Ok(())
}

/// Worker `w` heartbeats `leases`; with `forget_lost` it then drops the lost ones.
pub async fn heartbeat<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    forget_lost: bool,
) -> Result<(), TestCaseError> {
    // The store de-duplicates; so does the model.
    let mut leases = leases_in_order(leases);
    leases.dedup();
    let want = m.split(w, &leases)?;
    m.saw_split(&want);
    let got = ok(
        h.store()
            .heartbeat(WORKERS[w], &leases, Duration::from_secs(LEASE_S as u64))
            .await,
        "heartbeat",
    )?;
    let stored = lease_expiries(h).await?;
    for (l, at) in &got.extended {
        prop_assert_eq!(
            Some(at),
            stored.get(&l.id.0),
            "heartbeat: returned expiry of job {} is not the stored one",
            l.id
        );
    }
    let extended: Vec<Lease> = got.extended.iter().map(|e| e.0).collect();
    prop_assert_eq!(
        leases_in_order(&extended),
        leases_in_order(&want.applied),
        "heartbeat: extended differs"
    );
    let cancel: Vec<Lease> = want
        .applied
        .iter()
        .copied()
        .filter(|l| m.job(l.id).cancel_requested)
        .collect();
    prop_assert_eq!(
        leases_in_order(&got.cancel_requested),
        leases_in_order(&cancel),
        "heartbeat: cancel_requested differs"
    );
    prop_assert_eq!(
        sorted_lost(&got.lost),
        sorted_lost(&want.lost),
        "heartbeat: lost differs"
    );
    let (now, step) = (m.now, m.step);
    for l in &want.applied {
        let j = m.job_mut(l.id);
        j.lease_exp = now + LEASE_S;
        j.lease_step = step;
    }
    if forget_lost {
        let lost: Vec<Lease> = want.lost.iter().map(|l| l.lease).collect();
        m.forget(w, &lost);
    }
    Ok(())
}

/// `lease_expires_at` of every running job.
pub async fn lease_expiries<H: Harness>(
    h: &H,
) -> Result<BTreeMap<i64, DateTime<Utc>>, TestCaseError> {
    let mut out = BTreeMap::new();
    for r in records(h).await? {
        if r.state == JobState::Running {
            let at = r
                .lease_expires_at
                .ok_or_else(|| fail(format!("job {} is running without a lease", r.id)))?;
            out.insert(r.id.0, at);
        }
    }
    Ok(out)
}
