//! Where a claim starts its scan while a long transaction holds the vacuum horizon back
//! (migration 0036).
//!
//! Every claimed job leaves its pending version's entry at the head of `jobs_claim_idx`: dead,
//! and removed by vacuum once no open snapshot is older than its death. While one is — a
//! report, `pg_dump`, a connection idle in a transaction, a standby's feedback — an unhinted
//! claim walks every entry consumed since, and its cost grows with the pin's length (issue 31:
//! pickup p99 76 s after ten minutes at 2,000 jobs/s). A hinted claim starts at the least
//! claim-order position (priority, run_at) this store's previous claim of the queue took:
//! every entry before it was consumed, or locked by another claim, when that claim scanned.
//!
//! A hint can miss a job that became ready before its position afterwards (a higher
//! priority, a run_at in the past, a claim rolled back), and only an unhinted claim judges
//! the starvation bound. So hints are used only while they pay: after an unhinted claim took
//! at least [`SLOW`] *and* the database's oldest snapshot is [`HELD_XIDS`] transactions old
//! (`sql/horizon_age.sql`). Then a probe (`sql/claim_probe.sql`, a read that locks nothing)
//! walks from the head to the hint at least every [`PROBE_EVERY`] — or twenty times its own
//! duration, so the walk stays a twentieth of one connection's time — beside the claims, not
//! in their way: a job it finds before the hint moves the hint back to it, a job waiting past
//! the starvation bound makes the next claim unhinted, and a probe as fast as an ordinary
//! claim (vacuum caught up) ends the mode. A walk inside a claim would hold the batch it
//! takes — the oldest jobs — for the walk's whole length. Ordinary operation (no held
//! horizon, or a small table) never hints: claims there are exactly the seven-argument
//! `claim()` they were.
//!
//! The state is per store (a worker's pool shares it), not per connection: one probe per
//! interval for the whole process, whichever connection the claim gets.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use docket_core::mutants::{self, Mutant};
use docket_core::{ClaimRequest, ClaimedJob};

/// An unhinted claim at least this slow (its statement, not the pool's wait) is a reason to
/// look at the horizon. A plain claim of a few hundred jobs takes 1–10 ms on this project's
/// 2-core machine; walking ~40,000 dead entries takes this long.
pub(crate) const SLOW: Duration = Duration::from_millis(25);
/// The oldest open snapshot of the database (or a replication slot, a prepared transaction)
/// at least this many transactions old counts as holding the horizon back: far more than a
/// short transaction sees. It is also why hinting starts late: a worker batches its claims
/// and completions, so at 2,000 jobs/s it spends ~30 transaction ids a second, and the pin
/// benchmark's hinting began about 70 s into the pin.
pub(crate) const HELD_XIDS: i64 = 2_000;
/// While hinting, the probe behind the hint runs at least this often.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);
/// The horizon is read at most this often a queue (after slow unhinted claims).
pub(crate) const HORIZON_EVERY: Duration = Duration::from_secs(1);

/// How the next claim of a queue runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    /// From the head of the index, as ever.
    Full,
    /// From this (priority, run_at).
    From(i16, DateTime<Utc>),
}

/// A look behind the hint that is due: is a job ready before this position, and has the
/// oldest ready job waited past the starvation bound (`sql/claim_probe.sql`)?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) priority: i16,
    pub(crate) run_at: DateTime<Utc>,
}

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// The first ready job before the hint, if any.
    pub(crate) before: Option<(i16, DateTime<Utc>)>,
    /// The oldest ready job waited past the starvation bound.
    pub(crate) starving: bool,
}

#[derive(Debug, Default)]
struct QueueHint {
    from: Option<(i16, DateTime<Utc>)>,
    hinting: bool,
    next_probe: Option<Instant>,
    probe_in_flight: bool,
    /// The probe saw a starving job: the next claim is unhinted (it decides starvation).
    full_next: bool,
    /// When the horizon was last read for this queue: at most once a [`HORIZON_EVERY`], so
    /// a busy worker whose claims are slow for other reasons does not read it at every claim.
    horizon_read: Option<Instant>,
}

/// What an unhinted claim's outcome asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    Nothing,
    /// Slow and not hinting yet: read the horizon's age, then [`ScanHints::horizon`].
    CheckHorizon,
}

/// When hints start and how often the probe runs: [`SLOW`], [`HELD_XIDS`], [`PROBE_EVERY`]
/// unless a test sets its own ([`crate::PgStore::with_scan_hints`]).
#[derive(Debug, Clone, Copy)]
pub struct HintRules {
    /// An unhinted claim at least this slow looks at the horizon.
    pub slow: Duration,
    /// A horizon at least this many transactions old is held back.
    pub held_xids: i64,
    /// While hinting, the probe runs at least this often.
    pub probe_every: Duration,
}

impl Default for HintRules {
    fn default() -> Self {
        HintRules {
            slow: SLOW,
            held_xids: HELD_XIDS,
            probe_every: PROBE_EVERY,
        }
    }
}

/// The per-queue hints of one store.
#[derive(Debug, Default)]
pub(crate) struct ScanHints {
    rules: HintRules,
    queues: Mutex<HashMap<String, QueueHint>>,
}

impl ScanHints {
    pub(crate) fn new(rules: HintRules) -> Self {
        ScanHints {
            rules,
            queues: Mutex::default(),
        }
    }

    /// How the next claim of `queue` scans, at `now`, and the probe to start first (at most
    /// one in flight a queue; it runs beside the claims, never in their way).
    pub(crate) fn plan(&self, queue: &str, now: Instant) -> (Scan, Option<Probe>) {
        let mut all = self.queues.lock().expect("poisoned");
        let Some(h) = all.get_mut(queue) else {
            return (Scan::Full, None);
        };
        let Some((p, t)) = h.from.filter(|_| h.hinting) else {
            return (Scan::Full, None);
        };
        if mutants::active(Mutant::ClaimHintIgnored) {
            return (Scan::Full, None);
        }
        let probe = if !h.probe_in_flight && h.next_probe.is_none_or(|n| now >= n) {
            h.probe_in_flight = true;
            Some(Probe {
                priority: p,
                run_at: t,
            })
        } else {
            None
        };
        if std::mem::take(&mut h.full_next) {
            return (Scan::Full, probe);
        }
        (Scan::From(p, t), probe)
    }

    /// Records the claim `req` that ran as `scan`, took `took` and returned `jobs` (an error:
    /// `None`). Its lease and starvation bound tell starving jobs (taken by age, whatever
    /// their priority) apart: they say nothing of what lies before them in claim order.
    pub(crate) fn observe(
        &self,
        req: &ClaimRequest,
        scan: Scan,
        took: Duration,
        jobs: Option<&[ClaimedJob]>,
        now: Instant,
    ) -> After {
        let mut all = self.queues.lock().expect("poisoned");
        let known = all.contains_key(&req.queue);
        // Ordinary operation — a fast unhinted claim of a queue never slow before — costs a
        // lookup, not a pass over the batch or an entry of its own.
        if !known && scan == Scan::Full && took < self.rules.slow {
            return After::Nothing;
        }
        let h = all.entry(req.queue.clone()).or_default();
        let Some(jobs) = jobs else {
            return After::Nothing;
        };
        if scan == Scan::Full && !h.hinting && took < self.rules.slow {
            return After::Nothing;
        }
        let least = jobs
            .iter()
            .filter(|j| !starving(j, req.lease, req.starvation))
            .map(|j| (j.priority, j.run_at))
            .min();
        if let Some(least) = least {
            h.from = Some(match (scan, h.from) {
                // A probe moved the hint back behind where this claim started (it ran
                // meanwhile): the job it found is not taken yet, keep the hint on it.
                (Scan::From(p, t), Some(cur)) if cur < (p, t) => cur,
                // A hinted claim starts at the hint: what it took is never before it.
                (Scan::From(..), Some(cur)) => cur.max(least),
                _ => least,
            });
        }
        match scan {
            Scan::From(..) => After::Nothing,
            Scan::Full if h.hinting => {
                if took < self.rules.slow / 2 {
                    h.hinting = false;
                }
                After::Nothing
            }
            Scan::Full if took >= self.rules.slow => {
                if h.horizon_read.is_some_and(|t| now < t + HORIZON_EVERY) {
                    return After::Nothing;
                }
                h.horizon_read = Some(now);
                After::CheckHorizon
            }
            Scan::Full => After::Nothing,
        }
    }

    /// The horizon's age in transactions, read after [`After::CheckHorizon`]: hinting
    /// starts when it is held back and the queue has a position to start from.
    pub(crate) fn horizon(&self, queue: &str, age: i64, took: Duration, now: Instant) {
        let mut all = self.queues.lock().expect("poisoned");
        let h = all.entry(queue.to_string()).or_default();
        let r = self.rules;
        if age >= r.held_xids && h.from.is_some() && !h.hinting {
            tracing::info!(
                queue,
                horizon_xids = age,
                claim_ms = took.as_millis() as u64,
                "claims are slow while an old snapshot holds back vacuum: claims start where the last one did, a probe looks behind them every second"
            );
            h.hinting = true;
            h.full_next = false;
            h.next_probe = Some(now + r.probe_every.max(took * 20));
        }
    }

    /// Records a probe's outcome (an error: `None`). A job found before the hint moves the
    /// hint back to it (the next claims take it); a starving job makes the next claim
    /// unhinted; a probe as fast as an ordinary claim means the walk is cheap again (vacuum
    /// caught up): hinting ends. The next probe is due after the interval, or twenty times
    /// this one's duration, so its walk stays a twentieth of one connection's time.
    pub(crate) fn probed(&self, queue: &str, found: Option<Found>, took: Duration, now: Instant) {
        let mut all = self.queues.lock().expect("poisoned");
        let h = all.entry(queue.to_string()).or_default();
        h.probe_in_flight = false;
        h.next_probe = Some(now + self.rules.probe_every.max(took * 20));
        let Some(mut found) = found else {
            return;
        };
        if mutants::active(Mutant::ClaimProbeBlind) {
            found.before = None;
        }
        if let Some(before) = found.before {
            h.from = Some(h.from.map_or(before, |f| f.min(before)));
        }
        h.full_next |= found.starving;
        if took < self.rules.slow / 2 && !found.starving {
            h.hinting = false;
        }
    }

    /// Whether `queue` is hinting (tests).
    #[cfg(test)]
    pub(crate) fn hinting(&self, queue: &str) -> bool {
        let all = self.queues.lock().expect("poisoned");
        all.get(queue).is_some_and(|h| h.hinting)
    }
}

/// A job the claim took for its age: ready since before the starvation bound, judged on the
/// database's clock (its lease was set to the claim's `now()` plus `lease`).
fn starving(j: &ClaimedJob, lease: Duration, starvation: Option<Duration>) -> bool {
    let Some(bound) = starvation else {
        return false;
    };
    let (Ok(lease), Ok(bound)) = (
        chrono::Duration::from_std(lease),
        chrono::Duration::from_std(bound),
    ) else {
        return true;
    };
    j.run_at <= j.lease_expires_at - lease - bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    fn job(priority: i16, run_at_s: i64, claimed_at_s: i64) -> ClaimedJob {
        ClaimedJob {
            id: docket_core::JobId(1),
            attempt: 1,
            max_attempts: 25,
            queue: "q".into(),
            kind: "k".into(),
            args: serde_json::json!({}),
            metadata: serde_json::json!({}),
            priority,
            run_at: at(run_at_s),
            created_at: at(run_at_s),
            lease_expires_at: at(claimed_at_s + 30),
            released: 0,
        }
    }

    fn req(starvation: Option<Duration>) -> ClaimRequest {
        ClaimRequest {
            queue: "q".into(),
            limit: 10,
            owner: "w".into(),
            lease: Duration::from_secs(30),
            starvation,
            controlled: None,
        }
    }

    const STARVE: Option<Duration> = Some(Duration::from_secs(60));
    const SLOW_CLAIM: Duration = Duration::from_millis(100);

    /// A store whose queue `q` hints from (0, 10), its first probe due at `t0` + 2 s.
    fn hinting(t0: Instant) -> ScanHints {
        let h = ScanHints::default();
        let after = h.observe(
            &req(STARVE),
            Scan::Full,
            SLOW_CLAIM,
            Some(&[job(0, 10, 11)]),
            t0,
        );
        assert_eq!(after, After::CheckHorizon);
        h.horizon("q", 10_000, SLOW_CLAIM, t0);
        assert!(h.hinting("q"));
        h
    }

    #[test]
    fn fast_claims_never_hint() {
        let (h, t0) = (ScanHints::default(), Instant::now());
        let fast = Duration::from_millis(3);
        let after = h.observe(&req(STARVE), Scan::Full, fast, Some(&[job(0, 10, 11)]), t0);
        assert_eq!(after, After::Nothing);
        assert_eq!(h.plan("q", Instant::now()), (Scan::Full, None));
    }

    #[test]
    fn a_slow_claim_hints_only_when_the_horizon_is_held() {
        let h = ScanHints::default();
        let now = Instant::now();
        let jobs = [job(2, 10, 11), job(1, 20, 21), job(1, 15, 21)];
        let after = h.observe(&req(STARVE), Scan::Full, SLOW_CLAIM, Some(&jobs), now);
        assert_eq!(after, After::CheckHorizon);
        h.horizon("q", HELD_XIDS - 1, SLOW_CLAIM, now);
        assert_eq!(
            h.plan("q", now),
            (Scan::Full, None),
            "a young horizon: no hint"
        );
        h.horizon("q", HELD_XIDS, SLOW_CLAIM, now);
        assert_eq!(
            h.plan("q", now),
            (Scan::From(1, at(15)), None),
            "the least position taken"
        );
    }

    #[test]
    fn the_horizon_is_read_at_most_once_a_second_a_queue() {
        let (h, t0) = (ScanHints::default(), Instant::now());
        let slow = |at| h.observe(&req(STARVE), Scan::Full, SLOW_CLAIM, Some(&[]), at);
        assert_eq!(slow(t0), After::CheckHorizon);
        h.horizon("q", 0, SLOW_CLAIM, t0);
        assert_eq!(slow(t0 + Duration::from_millis(999)), After::Nothing);
        assert_eq!(slow(t0 + HORIZON_EVERY), After::CheckHorizon);
    }

    #[test]
    fn one_probe_at_a_time_each_interval_and_what_it_finds_moves_the_hint_back() {
        let t0 = Instant::now();
        let h = hinting(t0);
        // Twenty times the slow claim (2 s), more than the one-second floor.
        assert_eq!(h.plan("q", t0 + Duration::from_millis(1900)).1, None);
        let due = t0 + Duration::from_secs(2);
        let (scan, probe) = h.plan("q", due);
        assert_eq!(scan, Scan::From(0, at(10)), "the claim itself stays hinted");
        assert_eq!(
            probe,
            Some(Probe {
                priority: 0,
                run_at: at(10)
            })
        );
        assert_eq!(h.plan("q", due).1, None, "one probe in flight at a time");
        let found = Found {
            before: Some((0, at(5))),
            starving: false,
        };
        h.probed("q", Some(found), Duration::from_millis(200), due);
        assert_eq!(h.plan("q", due), (Scan::From(0, at(5)), None));
        assert!(h.plan("q", due + Duration::from_millis(3999)).1.is_none());
        assert!(h.plan("q", due + Duration::from_secs(4)).1.is_some());
    }

    #[test]
    fn a_claim_that_ran_while_the_probe_moved_the_hint_back_leaves_it_back() {
        let t0 = Instant::now();
        let h = hinting(t0);
        let due = t0 + Duration::from_secs(2);
        let (scan, probe) = h.plan("q", due);
        assert_eq!((scan, probe.is_some()), (Scan::From(0, at(10)), true));
        let found = Found {
            before: Some((0, at(5))),
            starving: false,
        };
        h.probed("q", Some(found), SLOW_CLAIM, due);
        // The claim planned before the probe's answer comes back with later jobs.
        h.observe(&req(STARVE), scan, SLOW_CLAIM, Some(&[job(0, 12, 13)]), due);
        assert_eq!(
            h.plan("q", due).0,
            Scan::From(0, at(5)),
            "the found job is not skipped"
        );
        h.observe(
            &req(STARVE),
            Scan::From(0, at(5)),
            SLOW_CLAIM,
            Some(&[job(0, 5, 13)]),
            due,
        );
        assert_eq!(h.plan("q", due).0, Scan::From(0, at(5)));
        h.observe(
            &req(STARVE),
            Scan::From(0, at(5)),
            SLOW_CLAIM,
            Some(&[job(0, 13, 14)]),
            due,
        );
        assert_eq!(
            h.plan("q", due).0,
            Scan::From(0, at(13)),
            "then it moves on"
        );
    }

    #[test]
    fn a_starving_job_makes_the_next_claim_unhinted_and_a_fast_probe_ends_the_mode() {
        let t0 = Instant::now();
        let h = hinting(t0);
        let due = t0 + Duration::from_secs(2);
        assert!(h.plan("q", due).1.is_some());
        let found = Found {
            before: None,
            starving: true,
        };
        h.probed("q", Some(found), SLOW_CLAIM, due);
        assert_eq!(
            h.plan("q", due).0,
            Scan::Full,
            "the starvation bound is judged unhinted"
        );
        assert_eq!(h.plan("q", due).0, Scan::From(0, at(10)), "once");
        let later = due + Duration::from_secs(2);
        assert!(h.plan("q", later).1.is_some());
        let nothing = Found {
            before: None,
            starving: false,
        };
        h.probed("q", Some(nothing), Duration::from_millis(5), later);
        assert!(!h.hinting("q"));
        assert_eq!(h.plan("q", later), (Scan::Full, None));
    }

    #[test]
    fn a_failed_probe_is_retried_after_the_interval() {
        let t0 = Instant::now();
        let h = hinting(t0);
        let due = t0 + Duration::from_secs(2);
        assert!(h.plan("q", due).1.is_some());
        h.probed("q", None, Duration::from_millis(10), due);
        assert!(h.hinting("q"));
        assert!(h.plan("q", due).1.is_none());
        assert!(h.plan("q", due + PROBE_EVERY).1.is_some());
    }

    #[test]
    fn starving_jobs_and_hinted_claims_never_move_the_hint_back() {
        let t0 = Instant::now();
        let h = ScanHints::default();
        // Claimed at 100: the job of priority 5 ready since 10 was taken for its age.
        let jobs = [job(5, 10, 100), job(1, 95, 100)];
        h.observe(&req(STARVE), Scan::Full, SLOW_CLAIM, Some(&jobs), t0);
        h.horizon("q", 10_000, SLOW_CLAIM, t0);
        let (scan, _) = h.plan("q", t0);
        assert_eq!(scan, Scan::From(1, at(95)));
        h.observe(&req(STARVE), scan, SLOW_CLAIM, Some(&[job(1, 96, 101)]), t0);
        assert_eq!(h.plan("q", t0).0, Scan::From(1, at(96)));
        // Without a starvation bound every job counts.
        let h2 = ScanHints::default();
        h2.observe(&req(None), Scan::Full, SLOW_CLAIM, Some(&jobs), t0);
        h2.horizon("q", 10_000, SLOW_CLAIM, t0);
        assert_eq!(h2.plan("q", t0).0, Scan::From(1, at(95)));
    }
}
