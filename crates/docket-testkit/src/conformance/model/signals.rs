//! Parks and signals, on the store and on the model.
//!
//! A park is a snooze (fenced the same way, the budget given back the same way) of a job
//! waiting for signal `g{k}`: due after its timeout, or at once when the signal is already
//! there. A signal is kept per (job, name), the first payload wins; it wakes (makes due now)
//! a pending job scheduled later that recorded a wait for it (`docket:wait:g{k}`) and has no
//! answer yet (`docket:signal:g{k}`); it is refused for a finished or missing job, with
//! nothing written.

use std::time::Duration;

use crate::conformance::Harness;
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::ops::*;
use super::state::*;
use super::writes::*;
use super::*;

/// A job id no case reaches (cases enqueue fewer than 400 jobs).
const MISSING: JobId = JobId(1 << 40);

fn signal_name(k: u8) -> String {
    format!("g{k}")
}

/// Worker `w` parks `leases` (distinct) waiting for `g{sig}` for `delay_s`, in one batch,
/// after recording each one's wait step when `wait`; then forgets them. `also` sends the
/// signal to the first job too: before its park (while its handler runs) or after it.
#[allow(clippy::too_many_arguments)] // one per field of `Op::Park`
pub async fn park<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    delay_s: i64,
    sig: u8,
    wait: bool,
    also: Also,
) -> Result<(), TestCaseError> {
    let name = signal_name(sig);
    let first = leases.first().map(|l| l.id);
    if let Some(id) = first.filter(|_| also == Also::Before) {
        send(h, m, id, sig).await?;
    }
    if wait {
        for &l in leases {
            let value = serde_json::json!({ "timeout_s": delay_s });
            record_step(h, m, w, l, &docket_core::signals::wait_step(&name), value).await?;
        }
    }
    let want = m.split(w, leases)?;
    m.saw_split(&want);
    let batch: Vec<Park> = leases
        .iter()
        .map(|&lease| Park {
            lease,
            delay: Duration::from_secs(delay_s as u64),
            signal: name.clone(),
        })
        .collect();
    let got = ok(h.store().park_many(WORKERS[w], &batch).await, "park")?;
    check_batch("park", &got, &want)?;
    let (now, step) = (m.now, m.step);
    for l in &want.applied {
        let sent = m.signals.contains_key(&(l.id.0, sig));
        // A park is not a run: given back as a snooze is.
        let at = now + if sent { 0 } else { delay_s };
        if Model::give_back(m.job_mut(l.id), at, step) {
            m.saw("park: cancelled instead (a cancel was requested)");
            continue;
        }
        m.saw(if sent {
            "park: the signal was already there"
        } else {
            "park: parked"
        });
    }
    m.forget(w, leases);
    match first.filter(|_| also == Also::After) {
        // A job completed by delete meanwhile is gone: nothing to send to.
        Some(id) if m.jobs.contains_key(&id.0) => send(h, m, id, sig).await,
        _ => Ok(()),
    }
}

/// Whether signal `g{sig}` wakes job `id` now: pending, scheduled later, its wait recorded
/// and not yet answered.
fn wakes(m: &Model, id: i64, sig: u8) -> Result<bool, TestCaseError> {
    let j = &m.jobs[&id];
    if j.state != JobState::Pending {
        return Ok(false);
    }
    let later = match j.run_at {
        RunAt::At(t) => t > m.now,
        RunAt::Window(lo, _) if lo > m.now => true,
        RunAt::Window(_, hi) if hi <= m.now => false,
        RunAt::Window(lo, hi) => {
            return Err(TestCaseError::fail(format!(
                "test design: a signal at {} inside a backoff window [{lo}, {hi}]",
                m.now
            )))
        }
    };
    let name = signal_name(sig);
    Ok(later
        && j.steps
            .contains_key(&docket_core::signals::wait_step(&name))
        && !j
            .steps
            .contains_key(&docket_core::signals::answer_step(&name)))
}

/// Sends `g{sig}` to `to`.
pub async fn signal<H: Harness>(
    h: &H,
    m: &mut Model,
    to: SigTarget,
    sig: u8,
) -> Result<(), TestCaseError> {
    let target = match to {
        SigTarget::Any(k) => m.pick_job(k, |_| true).map(|id| (id, sig)),
        SigTarget::Waiting(k) => {
            // A pending job with a wait recorded, and the signal it waits for (the one
            // given, when it waits for both).
            let waits = |j: &MJob, g: u8| {
                j.steps
                    .contains_key(&docket_core::signals::wait_step(&signal_name(g)))
            };
            let found: Vec<(JobId, u8)> = m
                .jobs
                .iter()
                .filter(|(_, j)| j.state == JobState::Pending)
                .filter_map(|(&id, j)| {
                    let g = if waits(j, sig) { sig } else { 1 - sig };
                    waits(j, g).then_some((JobId(id), g))
                })
                .collect();
            // Those it would wake first (parked until later, not answered), so a wake-up
            // is common enough to be seen in every run; the rest when there are none.
            let parked: Vec<(JobId, u8)> = found
                .iter()
                .copied()
                .filter(|&(id, g)| wakes(m, id.0, g).unwrap_or(false))
                .collect();
            let pool = if parked.is_empty() { found } else { parked };
            (!pool.is_empty()).then(|| pool[k % pool.len()])
        }
        SigTarget::Running(k) => m
            .pick_job(k, |s| s == JobState::Running)
            .map(|id| (id, sig)),
        SigTarget::Missing => Some((MISSING, sig)),
    };
    let Some((id, sig)) = target else {
        return Ok(());
    };
    send(h, m, id, sig).await
}

/// Sends `g{sig}` to job `id`, checks the answer and the stored signal against the model.
async fn send<H: Harness>(h: &H, m: &mut Model, id: JobId, sig: u8) -> Result<(), TestCaseError> {
    let name = signal_name(sig);
    let payload = serde_json::json!({ "signal": name, "step": m.step });
    let got = h.store().signal(id, &name, &payload).await;
    let state = m.jobs.get(&id.0).map(|j| j.state);
    match (state, got) {
        (None, Err(StoreError::NotFound(eid))) if eid == id => {
            m.saw("signal: refused for a missing job");
        }
        (Some(s), Err(StoreError::WrongState { id: eid, state, .. }))
            if s.is_terminal() && eid == id && state == s =>
        {
            m.saw("signal: refused for a finished job");
        }
        (Some(s), Ok(sent)) if !s.is_terminal() => {
            let new = !m.signals.contains_key(&(id.0, sig));
            let woke = wakes(m, id.0, sig)?;
            prop_assert_eq!(
                sent,
                SignalSent { new, woke },
                "signal {} to {} job {}",
                name,
                s,
                id
            );
            if new {
                m.signals.insert((id.0, sig), payload);
                m.saw("signal: sent");
            } else {
                m.saw("signal: a repeat changed nothing");
            }
            if woke {
                let (now, step) = (m.now, m.step);
                let j = m.job_mut(id);
                j.run_at = RunAt::At(now);
                j.run_at_step = step;
                m.saw("signal: woke a parked job");
            }
        }
        (s, other) => {
            return Err(fail(format!(
                "signal {name} to job {id} ({s:?}): unexpected result {other:?}"
            )))
        }
    }
    if state.is_some() {
        // What a wait reads: the first payload, kept whatever the job's state.
        let stored = ok(h.store().job_signal(id, &name).await, "job_signal")?;
        prop_assert_eq!(
            stored.as_ref(),
            m.signals.get(&(id.0, sig)),
            "stored signal {} of job {}",
            name,
            id
        );
    }
    Ok(())
}
