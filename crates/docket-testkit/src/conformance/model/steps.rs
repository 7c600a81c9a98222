//! One step: the operation on the store and on the model, and the checks of its result.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::conformance::Harness;
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;

use super::claims::*;
use super::ops::*;
use super::state::*;
use super::writes::*;
use super::*;

pub async fn step<H: Harness>(h: &H, m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let store = &h.store();
    m.step += 1;
    match *op {
        Op::Enqueue {
            n,
            max_attempts,
            queue,
            priority,
            delay_s,
            key,
        } => {
            let jobs: Vec<NewJob> = (0..n)
                .map(|i| {
                    let job = NewJob::new(QUEUES[queue], "model", json!(i))
                        .max_attempts(max_attempts)
                        .priority(priority)
                        .backoff(BACKOFF);
                    let job = match key {
                        Key::None => job,
                        Key::Ordering(k) => job.ordering_key(format!("o{k}")),
                        Key::Concurrency(k) => job.concurrency_key(format!("c{k}")),
                        Key::Unique(k) => job.unique_key(format!("u{k}")),
                    };
                    if delay_s == 0 {
                        job
                    } else {
                        job.delay(Duration::from_secs(delay_s as u64))
                    }
                })
                .collect();
            let got = ok(store.enqueue_many(&jobs).await, "enqueue_many")?;
            prop_assert_eq!(got.len(), n);
            m.saw("enqueue");
            for e in got {
                // Jobs of one batch share the key: the first takes it unless a job holds it.
                let holder = match key {
                    Key::Unique(k) => m.unique_holder(k),
                    _ => None,
                };
                if let Some(h) = holder {
                    prop_assert!(
                        e.duplicate,
                        "enqueue: unique key held by {} but inserted {}",
                        h,
                        e.id
                    );
                    prop_assert_eq!(e.id.0, h, "enqueue: duplicate names the holder");
                    m.saw("enqueue: unique duplicate");
                    continue;
                }
                prop_assert!(!e.duplicate, "enqueue: duplicate {} without a holder", e.id);
                prop_assert!(!m.jobs.contains_key(&e.id.0), "enqueue: id {} reused", e.id);
                m.jobs.insert(
                    e.id.0,
                    MJob {
                        queue,
                        priority,
                        state: JobState::Pending,
                        attempt: 0,
                        max_attempts,
                        released: 0,
                        owner: None,
                        lease_exp: 0,
                        lease_step: 0,
                        run_at: RunAt::At(m.now + delay_s),
                        run_at_step: m.step,
                        errors: 0,
                        last_error: None,
                        cancel_requested: false,
                        ordering_key: match key {
                            Key::Ordering(k) => Some(k),
                            _ => None,
                        },
                        concurrency_key: match key {
                            Key::Concurrency(k) => Some(k),
                            _ => None,
                        },
                        unique_key: match key {
                            Key::Unique(k) => Some(k),
                            _ => None,
                        },
                        finished_at: None,
                        output: None,
                        steps: Default::default(),
                    },
                );
            }
        }

        Op::Claim {
            w,
            queue,
            limit,
            starve,
        } => claim(h, m, w, queue, limit, starve).await?,

        Op::Pause { queue } => {
            ok(store.pause_queue(QUEUES[queue]).await, "pause")?;
            m.paused[queue] = true;
            m.saw("pause");
        }

        Op::Resume { queue } => {
            ok(store.resume_queue(QUEUES[queue]).await, "resume")?;
            m.paused[queue] = false;
            m.saw("resume");
        }

        Op::Limit { queue, max } => {
            let limits = QueueLimits {
                max_running: max,
                ..QueueLimits::default()
            };
            ok(
                store.set_queue_limits(QUEUES[queue], &limits).await,
                "set_queue_limits",
            )?;
            m.max_running[queue] = max;
            m.saw(if max.is_some() {
                "limit: set"
            } else {
                "limit: removed"
            });
        }

        Op::Prune { keep_long } => {
            let keep = if keep_long { KEEP_LONG_S } else { 0 };
            let retention = Retention {
                finished: Duration::from_secs(keep as u64),
                dead: Duration::from_secs(keep as u64),
                outputs: Duration::from_secs(keep as u64),
                batch: 2,
            };
            // Every engine prunes strictly older rows (`finished_at < now - keep`) on a
            // millisecond clock, while the model counts whole seconds (`now - f >= keep`): a
            // job finished in the same database millisecond as this prune (a fast step, or
            // keep = 0 right after a completion) would be due in the model and kept by the
            // store. Moving the database's clock one millisecond makes every due row strictly
            // older, as real time between two steps almost always already has (seen failing
            // once under a loaded full suite: 1 deleted where the model expected 2).
            h.advance(Duration::from_millis(1)).await;
            let got = ok(store.prune(&retention).await, "prune")?;
            let now = m.now;
            let due: Vec<(i64, JobState)> = m
                .jobs
                .iter()
                .filter(|(_, j)| j.finished_at.is_some_and(|f| now - f >= keep))
                .map(|(&id, j)| (id, j.state))
                .collect();
            let dead = due.iter().filter(|(_, s)| *s == JobState::Dead).count() as u64;
            prop_assert_eq!(
                (got.finished, got.dead),
                (due.len() as u64 - dead, dead),
                "prune (keep {} s): (finished, dead) deleted",
                keep
            );
            for (id, _) in &due {
                m.jobs.remove(id);
            }
            m.saw("prune");
            if !due.is_empty() {
                m.saw("prune: deleted");
            }
        }

        Op::Sweep => {
            let n = ok(store.unblock_keys(100).await, "unblock_keys")?;
            m.saw("sweep");
            if n > 0 {
                m.saw("sweep: unflagged");
            }
            check_no_stale_flags(h, m).await?;
        }

        Op::Complete {
            w,
            ref picks,
            delete,
        } => {
            let leases = m.pick(w, picks);
            complete(h, m, w, &leases, delete).await?;
        }

        Op::Fail { w, ref items } => {
            let held = &m.held[w];
            let mut failures: Vec<(Lease, FailKind)> = Vec::new();
            if !held.is_empty() {
                for &(p, kind) in items {
                    let l = held[p % held.len()];
                    if !failures.iter().any(|(f, _)| *f == l) {
                        failures.push((l, kind));
                    }
                }
            }
            fail_many(h, m, w, &failures).await?;
        }

        Op::Snooze {
            w,
            ref picks,
            delay_s,
        } => {
            let leases = m.pick(w, picks);
            snooze(h, m, w, &leases, Some(delay_s)).await?;
        }

        Op::Release { w, ref picks } => {
            let leases = m.pick(w, picks);
            snooze(h, m, w, &leases, None).await?;
        }

        Op::Own { w, pick, write } => {
            let held = &m.held[w];
            if !held.is_empty() {
                let l = held[pick % held.len()];
                one_write(h, m, w, l, write).await?;
            }
        }

        Op::Heartbeat { w, forget_lost } => {
            let leases = m.held[w].clone();
            heartbeat(h, m, w, &leases, forget_lost).await?;
        }

        Op::Crash { w } => m.held[w].clear(),

        Op::Impostor {
            w,
            victim,
            pick,
            write,
        } => {
            let held = &m.held[victim];
            if held.is_empty() {
                return Ok(());
            }
            let lease = held[pick % held.len()];
            prop_assert!(
                !m.live(w, lease)?,
                "model: {} holds {:?} of {}",
                w,
                lease,
                victim
            );
            one_write(h, m, w, lease, write).await?;
        }

        Op::Replay { w, pick, write } => {
            if m.history.is_empty() {
                return Ok(());
            }
            let lease = m.history[pick % m.history.len()];
            one_write(h, m, w, lease, write).await?;
        }

        Op::StepBatch {
            w,
            ref picks,
            replay,
            k,
            again,
        } => {
            let mut leases = m.pick(w, picks);
            if let Some(r) = replay.filter(|_| !m.history.is_empty()) {
                let l = m.history[r % m.history.len()];
                if !leases.contains(&l) {
                    leases.push(l);
                }
            }
            if !leases.is_empty() {
                record_steps(h, m, w, &leases, k).await?;
                if again {
                    record_steps(h, m, w, &leases, k).await?;
                }
            }
        }

        Op::Park {
            w,
            ref picks,
            delay_s,
            sig,
            wait,
            also,
        } => {
            let leases = m.pick(w, picks);
            super::signals::park(h, m, w, &leases, delay_s, sig, wait, also).await?;
        }

        Op::Signal { to, sig } => super::signals::signal(h, m, to, sig).await?,

        Op::Advance { big } => {
            let s = if big { BIG_STEP_S } else { SMALL_STEP_S };
            h.advance(Duration::from_secs(s as u64)).await;
            m.now += s;
        }

        Op::Reap { batch } => {
            // Every expired lease, with what the reaper must make of it.
            let mut expired: BTreeMap<i64, Reaped> = BTreeMap::new();
            for (&id, j) in &m.jobs {
                if j.state == JobState::Running && !m.unexpired(j)? {
                    expired.insert(
                        id,
                        Reaped {
                            id: JobId(id),
                            attempt: j.attempt,
                            owner: WORKERS[j.owner.expect("running has an owner")].into(),
                            queue: QUEUES[j.queue].into(),
                            state: if j.cancel_requested {
                                JobState::Cancelled
                            } else if j.attempt >= j.max_attempts {
                                JobState::Dead
                            } else {
                                JobState::Pending
                            },
                        },
                    );
                }
            }
            let mut got = ok(store.reap(batch).await, "reap")?.jobs;
            if !got.is_empty() {
                m.saw("reap: took leases");
            }
            got.sort_by_key(|r| r.id);
            prop_assert_eq!(
                got.len(),
                expired.len().min(batch as usize),
                "reap: {:?} of {} expired (batch {})",
                got,
                expired.len(),
                batch
            );
            for r in &got {
                prop_assert_eq!(Some(r), expired.get(&r.id.0), "reap: job {}", r.id);
            }
            // Expiry order: no expired lease left behind expires definitely before a taken one.
            let taken: BTreeSet<i64> = got.iter().map(|r| r.id.0).collect();
            for &u in expired.keys().filter(|id| !taken.contains(id)) {
                for &t in &taken {
                    let (ju, jt) = (&m.jobs[&u], &m.jobs[&t]);
                    prop_assert!(
                        (ju.lease_exp, ju.lease_step) >= (jt.lease_exp, jt.lease_step),
                        "reap order: job {} (left) expired before job {} (taken)",
                        u,
                        t
                    );
                }
            }
            let (step, window) = (m.step, m.backoff_window());
            for r in &got {
                let j = m.job_mut(r.id);
                j.state = r.state;
                j.record_error("lease_expired", j.owner.expect("running has an owner"));
                Model::end_lease(j);
                if r.state == JobState::Pending {
                    j.run_at = window;
                    j.run_at_step = step;
                }
            }
        }

        Op::Cancel { job, running } => {
            let Some(id) = m.pick_job(job, |s| !running || s == JobState::Running) else {
                return Ok(());
            };
            let got = store.cancel(id).await;
            m.saw("cancel");
            let st = m.job(id).state;
            // The first request of a job is audited in its history, naming who asked.
            let role = h.actor().await;
            match (st, got) {
                (JobState::Pending, Ok(CancelOutcome::Cancelled)) => {
                    let j = m.job_mut(id);
                    j.state = JobState::Cancelled;
                    if !j.cancel_requested {
                        j.record_entry("cancel_requested", role);
                    }
                    j.cancel_requested = true;
                }
                (JobState::Running, Ok(CancelOutcome::Requested)) => {
                    let j = m.job_mut(id);
                    if !j.cancel_requested {
                        j.record_entry("cancel_requested", role);
                    }
                    j.cancel_requested = true;
                }
                (s, Err(StoreError::WrongState { id: eid, state, .. }))
                    if s.is_terminal() && eid == id && state == s => {}
                (s, other) => {
                    return Err(fail(format!(
                        "cancel of {s} job {id}: unexpected result {other:?}"
                    )))
                }
            }
        }

        Op::Retry {
            job,
            finished,
            extra,
        } => {
            let Some(id) = m.pick_job(job, |s| {
                !finished || matches!(s, JobState::Dead | JobState::Cancelled)
            }) else {
                return Ok(());
            };
            let got = store.retry(id, extra).await;
            m.saw("retry");
            let st = m.job(id).state;
            let (now, step) = (m.now, m.step);
            // Replaying a job whose unique key another job took meanwhile is refused.
            let taken = m
                .job(id)
                .unique_key
                .and_then(|k| m.unique_holder(k))
                .filter(|h| *h != id.0);
            match (st, got) {
                (
                    JobState::Dead | JobState::Cancelled,
                    Err(StoreError::UniqueConflict { key, holder }),
                ) if taken == Some(holder.0) => {
                    prop_assert_eq!(key, format!("u{}", m.job(id).unique_key.unwrap_or(9)));
                    m.saw("retry: unique key taken");
                }
                (JobState::Dead | JobState::Cancelled, Ok(_)) if taken.is_some() => {
                    return Err(fail(format!(
                        "retry of {id} succeeded although {taken:?} holds its key"
                    )));
                }
                (JobState::Dead | JobState::Cancelled, Ok(rec)) => {
                    let j = m.job_mut(id);
                    j.state = JobState::Pending;
                    j.max_attempts = j.attempt + extra;
                    j.run_at = RunAt::At(now);
                    j.run_at_step = step;
                    j.cancel_requested = false;
                    prop_assert_eq!(rec.id, id);
                    prop_assert_eq!(rec.state, JobState::Pending, "retry: record state");
                    prop_assert_eq!(rec.attempt, j.attempt, "retry: record attempt");
                    prop_assert_eq!(rec.max_attempts, j.max_attempts, "retry: budget");
                    prop_assert_eq!(
                        rec.errors.len() as i32,
                        j.errors.min(MAX_HISTORY),
                        "retry: history"
                    );
                }
                (s, Err(StoreError::WrongState { id: eid, state, .. }))
                    if !matches!(s, JobState::Dead | JobState::Cancelled)
                        && eid == id
                        && state == s => {}
                (s, other) => {
                    return Err(fail(format!(
                        "retry of {s} job {id}: unexpected result {other:?}"
                    )))
                }
            }
        }
    }
    Ok(())
}
