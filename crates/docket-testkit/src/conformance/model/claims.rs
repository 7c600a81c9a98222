//! The claim against the model: pause, the queue's concurrency limit, ordering and
//! concurrency keys (the controlled path), the starvation bound (the two-branch path), and
//! strict priority order (the fast path). Also the sweep's promise: after `unblock_keys`, no
//! job that may run is left flagged `blocked`.
//!
//! The `blocked` flag is an index hint the database keeps for speed (see migration 0005): a
//! claim skips flagged jobs, flags are cleared when a key frees up, and the sweep clears any
//! left behind (after a prune deleted a dead head, say). So a claim is checked against the
//! flags as the database has them just before it, and the flags themselves are checked
//! after every sweep.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::conformance::Harness;
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::state::*;
use super::*;

/// Ids of the jobs flagged `blocked`.
pub async fn blocked_ids<H: Harness>(h: &H) -> Result<BTreeSet<i64>, TestCaseError> {
    Ok(records(h)
        .await?
        .iter()
        .filter(|r| r.blocked)
        .map(|r| r.id.0)
        .collect())
}

/// Worker `w` claims up to `limit` jobs of queue `queue`.
pub async fn claim<H: Harness>(
    h: &H,
    m: &mut Model,
    w: usize,
    queue: usize,
    limit: i32,
    starve: bool,
) -> Result<(), TestCaseError> {
    let blocked = blocked_ids(h).await?;
    let ready = m.ready_ids(queue)?;
    let got = ok(
        h.store()
            .claim(&ClaimRequest {
                queue: QUEUES[queue].into(),
                limit,
                owner: WORKERS[w].into(),
                lease: Duration::from_secs(LEASE_S as u64),
                starvation: starve.then(|| Duration::from_secs(STARVE_S as u64)),
                controlled: None,
            })
            .await,
        "claim",
    )?;
    m.saw(if starve {
        "claim: starving bound"
    } else {
        "claim: strict order"
    });

    // What may be handed out: ready, not flagged, and allowed by its keys.
    let candidates: BTreeSet<i64> = ready
        .iter()
        .copied()
        .filter(|id| !blocked.contains(id) && m.keys_allow(*id))
        .collect();
    // How many of them one claim can take: each concurrency key only up to its free slots.
    let mut per_ckey: BTreeMap<usize, i32> = BTreeMap::new();
    let mut feasible = 0i32;
    for id in &candidates {
        match m.jobs[id].concurrency_key {
            Some(k) => *per_ckey.entry(k).or_default() += 1,
            None => feasible += 1,
        }
    }
    for (&k, &n) in &per_ckey {
        feasible += m.ckey_quota(k).map_or(n, |q| q.min(n));
    }
    let running_q = m
        .jobs
        .values()
        .filter(|j| j.queue == queue && j.state == JobState::Running)
        .count() as i32;
    let mut budget = limit;
    if let Some(max) = m.max_running[queue] {
        budget = budget.min((max - running_q).max(0));
    }
    let want = if m.paused[queue] {
        0
    } else {
        budget.min(feasible).max(0) as usize
    };
    prop_assert_eq!(
        got.len(),
        want,
        "claim: got {} jobs, model expects {} (ready {:?}, candidates {:?}, blocked {:?}, limit {}, \
         budget {}, paused {})",
        got.len(),
        want,
        ready,
        candidates,
        blocked,
        limit,
        budget,
        m.paused[queue]
    );
    if m.paused[queue] && !ready.is_empty() {
        m.saw("claim: paused queue held its ready jobs");
    }
    if m.max_running[queue].is_some() && budget < limit && budget < feasible {
        m.saw("claim: queue limit bound");
    }
    let claimed: BTreeSet<i64> = got.iter().map(|c| c.id.0).collect();
    prop_assert_eq!(claimed.len(), got.len(), "claim: a job twice");
    let mut taken_ckey: BTreeMap<usize, i32> = BTreeMap::new();
    for c in &got {
        prop_assert!(
            candidates.contains(&c.id.0),
            "claim: job {} may not run now (ready {:?}, blocked {:?}, keys {:?}/{:?})",
            c.id,
            ready,
            blocked,
            m.job(c.id).ordering_key,
            m.job(c.id).concurrency_key
        );
        let j = m.job(c.id);
        prop_assert_eq!(c.attempt, j.attempt + 1, "claim: token of job {}", c.id);
        prop_assert_eq!(&c.queue, QUEUES[queue], "claim: queue of job {}", c.id);
        prop_assert_eq!(c.priority, j.priority, "claim: priority of job {}", c.id);
        prop_assert_eq!(c.max_attempts, j.max_attempts, "claim: budget of {}", c.id);
        prop_assert!(c.attempt <= c.max_attempts, "claim over budget: {:?}", c);
        if let Some(k) = j.concurrency_key {
            *taken_ckey.entry(k).or_default() += 1;
        }
        if j.ordering_key.is_some() {
            m.saw("claim: ordering head");
        }
    }
    for (&k, &n) in &taken_ckey {
        if let Some(q) = m.ckey_quota(k) {
            prop_assert!(n <= q, "claim: {} jobs of c{} with {} free slots", n, k, q);
        }
    }
    let stored = super::writes::lease_expiries(h).await?;
    for c in &got {
        prop_assert_eq!(
            Some(&c.lease_expires_at),
            stored.get(&c.id.0),
            "claim: returned expiry of job {} is not the stored one",
            c.id
        );
    }
    // Order: no candidate left behind comes definitely before a claimed job — unless its
    // concurrency key's free slots went to jobs of this claim.
    for &u in candidates.difference(&claimed) {
        let excused = m.jobs[&u].concurrency_key.is_some_and(|k| {
            m.ckey_quota(k)
                .is_some_and(|q| taken_ckey.get(&k).copied().unwrap_or(0) >= q)
        });
        if excused {
            m.saw("claim: key limit held a job back");
            continue;
        }
        for &c in &claimed {
            prop_assert!(
                !m.definitely_before_in(u, c, starve)?,
                "claim order: job {} (left) runs before claimed job {} (starvation bound: {})",
                u,
                c,
                starve
            );
        }
    }
    if starve {
        for c in &got {
            let overtook = m.starving(m.job(c.id))?
                && candidates
                    .iter()
                    .any(|u| !claimed.contains(u) && m.jobs[u].priority < m.job(c.id).priority);
            if overtook {
                m.saw("claim: a starving job overtook higher priorities");
            }
        }
    }
    if !got.is_empty() {
        m.saw("claim: handed out jobs");
    }
    let (now, step) = (m.now, m.step);
    for c in &got {
        let j = m.job_mut(c.id);
        j.state = JobState::Running;
        j.attempt = c.attempt;
        j.owner = Some(w);
        j.lease_exp = now + LEASE_S;
        j.lease_step = step;
        m.held[w].push(c.lease());
        m.history.push(c.lease());
    }
    Ok(())
}

/// After a sweep: every ordering key's head that may run is unflagged, and every
/// concurrency key has at least as many unflagged pending jobs as it has free slots (all of
/// them without a limit).
pub async fn check_no_stale_flags<H: Harness>(h: &H, m: &mut Model) -> Result<(), TestCaseError> {
    let blocked = blocked_ids(h).await?;
    for (&id, j) in &m.jobs {
        if j.state == JobState::Pending && j.ordering_key.is_some() && m.keys_allow(id) {
            prop_assert!(
                !blocked.contains(&id),
                "sweep left the runnable head {} of o{:?} flagged",
                id,
                j.ordering_key
            );
        }
    }
    for k in 0..2 {
        let pending: Vec<i64> = m
            .jobs
            .iter()
            .filter(|(_, j)| j.state == JobState::Pending && j.concurrency_key == Some(k))
            .map(|(&id, _)| id)
            .collect();
        let free = pending.iter().filter(|id| !blocked.contains(id)).count() as i32;
        let need = m
            .ckey_quota(k)
            .map_or(pending.len() as i32, |q| q.min(pending.len() as i32));
        prop_assert!(
            free >= need,
            "sweep: c{} has {} unflagged pending jobs, needs {}",
            k,
            free,
            need
        );
    }
    if !blocked.is_empty() {
        m.saw("sweep: flags checked with jobs still held");
    }
    Ok(())
}
