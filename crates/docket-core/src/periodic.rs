//! Periodic jobs: cron expressions with a time zone, and which ticks are due.
//!
//! The expression is parsed by `croner` (POSIX cron, 5 fields, or 6 with seconds first) and
//! evaluated in the definition's IANA time zone (`chrono-tz`), so "0 9 * * MON-FRI" in
//! Europe/Berlin stays at 09:00 local time across daylight-saving changes. Which ticks to
//! enqueue after an outage is the definition's [`MissedTicks`] policy; the store enqueues them
//! exactly once (see `Store::enqueue_due_periodic`).

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;
use serde::Serialize;

use crate::job::{JobId, NewJob, DEFAULT_MAX_ATTEMPTS};
use crate::ValidationError;

/// What to do with ticks that passed while no leader ran (all workers down, a deploy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedTicks {
    /// Enqueue only ticks seen within [`SKIP_GRACE`] of their time; drop older ones.
    Skip,
    /// Enqueue one job for the most recent missed tick (the default: "run it once now").
    #[default]
    Latest,
    /// Enqueue every missed tick, oldest first, at most [`MAX_CATCH_UP`] per leader pass
    /// (the most recent ones).
    All,
}

/// A tick late by more than this is dropped under [`MissedTicks::Skip`].
pub const SKIP_GRACE: Duration = Duration::from_secs(60);
/// At most this many missed ticks are enqueued at once under [`MissedTicks::All`].
pub const MAX_CATCH_UP: usize = 100;

impl MissedTicks {
    /// The policy as stored and as the CLI names it.
    pub fn as_str(self) -> &'static str {
        match self {
            MissedTicks::Skip => "skip",
            MissedTicks::Latest => "latest",
            MissedTicks::All => "all",
        }
    }
}

impl FromStr for MissedTicks {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(MissedTicks::Skip),
            "latest" => Ok(MissedTicks::Latest),
            "all" => Ok(MissedTicks::All),
            other => Err(ValidationError::Other {
                what: "missed-tick policy",
                reason: format!("{other:?}: use skip, latest or all"),
            }),
        }
    }
}

/// A parsed schedule: cron expression plus time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
}

impl CronSchedule {
    /// Parses `expr` (5 fields, or 6 with seconds) in the IANA zone `tz` (e.g. "UTC",
    /// "Europe/Berlin").
    pub fn parse(expr: &str, tz: &str) -> Result<Self, ValidationError> {
        let tz: Tz = tz.parse().map_err(|_| ValidationError::Other {
            what: "time zone",
            reason: format!("{tz:?} is not an IANA time zone name (e.g. UTC, Europe/Berlin)"),
        })?;
        // croner also takes 7 fields (a year last); Docket's schedules are 5 or 6, so a
        // seventh is a mistake to name, not a year to obey silently.
        let fields = expr.split_whitespace().count();
        if !(5..=6).contains(&fields) && !expr.trim_start().starts_with('@') {
            return Err(ValidationError::Other {
                what: "cron expression",
                reason: format!(
                    "{} fields; use 5 (minute hour day month weekday) or 6 (seconds first)",
                    fields
                ),
            });
        }
        // An empty element (",", "1,,2", a lone "+") is a set that matches nothing: croner
        // accepts some and then searches thousands of years day by day for a tick (seconds
        // of CPU for `0 , 2 1 * */2`, found by the `cron` fuzz target). Refused here, before
        // any search.
        if let Some(field) = expr.split_whitespace().find(|f| {
            f.split(',').any(|e| {
                !e.chars()
                    .any(|c| c.is_ascii_alphanumeric() || "*?#".contains(c))
            })
        }) {
            return Err(ValidationError::Other {
                what: "cron expression",
                reason: format!("{expr:?}: the field {field:?} has an empty element"),
            });
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(expr)
            .map_err(|e| ValidationError::Other {
                what: "cron expression",
                reason: format!("{expr:?}: {e}"),
            })?;
        let schedule = CronSchedule { cron, tz };
        // An expression that matches no date (found by the `cron` fuzz target: "0 1 1 10 1 +",
        // day 10 of January that is also a weekday croner reads as none) parsed fine, and
        // every later search for its next tick walked croner's whole horizon of years — a
        // third of a second of the leader's time per schedule per pass, for nothing.
        if schedule.next_after(Utc::now()).is_none() {
            return Err(ValidationError::Other {
                what: "cron expression",
                reason: format!("{expr:?} matches no date, so it would never run"),
            });
        }
        Ok(schedule)
    }

    /// The first tick strictly after `t`. Ticks are whole seconds: `croner` would carry
    /// `t`'s fraction of a second into the result, so it is dropped first.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.trunc_subsecs(0).with_timezone(&self.tz), false)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }

    /// The last tick at or before `t` (whole seconds, as [`CronSchedule::next_after`]).
    pub fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_previous_occurrence(&t.trunc_subsecs(0).with_timezone(&self.tz), true)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }

    /// Which ticks to enqueue now, given the first tick not yet enqueued (`next_tick`), and
    /// where the schedule continues. Never iterates over an outage tick by tick: it walks back
    /// from `now` at most [`MAX_CATCH_UP`] ticks.
    pub fn due(
        &self,
        next_tick: DateTime<Utc>,
        now: DateTime<Utc>,
        missed: MissedTicks,
    ) -> (Vec<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let following = self.next_after(now);
        let Some(last) = self.last_at_or_before(now).filter(|t| *t >= next_tick) else {
            return (Vec::new(), following);
        };
        let ticks = match missed {
            MissedTicks::Latest => vec![last],
            MissedTicks::Skip => {
                let late = (now - last).to_std().unwrap_or_default();
                if late <= SKIP_GRACE {
                    vec![last]
                } else {
                    Vec::new()
                }
            }
            MissedTicks::All => {
                let mut v = vec![last];
                while v.len() < MAX_CATCH_UP {
                    let prev = v.last().and_then(|t| {
                        self.cron
                            .find_previous_occurrence(&t.with_timezone(&self.tz), false)
                            .ok()
                            .map(|d| d.with_timezone(&Utc))
                    });
                    match prev {
                        Some(p) if p >= next_tick => v.push(p),
                        _ => break,
                    }
                }
                v.reverse();
                v
            }
        };
        (ticks, following)
    }
}

/// A periodic job definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Periodic {
    /// Stable name (`[A-Za-z0-9_.:-]`, 1–128): the identity of the schedule.
    pub name: String,
    /// Cron expression (5 fields, or 6 with seconds).
    pub cron: String,
    /// IANA time zone the expression is evaluated in.
    pub timezone: String,
    /// The queue each tick enqueues into.
    pub queue: String,
    /// The kind of the enqueued job.
    pub kind: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// Its priority.
    pub priority: i16,
    /// Its claim budget.
    pub max_attempts: i32,
    /// What to do about ticks missed while no leader ran.
    pub missed: MissedTicks,
}

impl Periodic {
    /// A definition in UTC with default job options and the `latest` missed-tick policy.
    pub fn new(
        name: impl Into<String>,
        cron: impl Into<String>,
        queue: impl Into<String>,
        kind: impl Into<String>,
        args: serde_json::Value,
    ) -> Self {
        Periodic {
            name: name.into(),
            cron: cron.into(),
            timezone: "UTC".into(),
            queue: queue.into(),
            kind: kind.into(),
            args,
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            missed: MissedTicks::default(),
        }
    }
    /// Evaluates the expression in `tz`.
    #[must_use = "a builder method returns the changed value"]
    pub fn timezone(mut self, tz: impl Into<String>) -> Self {
        self.timezone = tz.into();
        self
    }
    /// Sets the missed-tick policy.
    #[must_use = "a builder method returns the changed value"]
    pub fn missed(mut self, m: MissedTicks) -> Self {
        self.missed = m;
        self
    }

    /// Parses the schedule, checking the name and the job template too.
    pub fn schedule(&self) -> Result<CronSchedule, ValidationError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 128
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
        if !name_ok {
            return Err(ValidationError::Other {
                what: "periodic name",
                reason: format!("{:?}: use 1-128 of A-Z a-z 0-9 _ . : -", self.name),
            });
        }
        let s = CronSchedule::parse(&self.cron, &self.timezone)?;
        crate::validate::new_job(&self.job_for(Utc::now()), &crate::Limits::default())?;
        Ok(s)
    }

    /// The job for one tick: unique per (name, tick), so even two overlapping leaders
    /// cannot enqueue a tick twice while its job is live; the tick is in the metadata.
    pub fn job_for(&self, tick: DateTime<Utc>) -> NewJob {
        let tick_s = tick.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        NewJob::new(self.queue.clone(), self.kind.clone(), self.args.clone())
            .priority(self.priority)
            .max_attempts(self.max_attempts)
            .unique_key(format!("periodic:{}:{tick_s}", self.name))
            .metadata(serde_json::json!({ "periodic": self.name, "tick": tick_s }))
    }
}

/// A stored definition and where its schedule stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodicState {
    /// The definition.
    pub def: Periodic,
    /// The next tick not yet enqueued.
    pub next_tick_at: DateTime<Utc>,
    /// The last tick enqueued.
    pub last_tick_at: Option<DateTime<Utc>>,
    /// The job that tick enqueued.
    pub last_job: Option<JobId>,
    /// When an operator paused it (`None`: running). While paused no tick is enqueued;
    /// on resume the ticks that passed follow its `missed` policy.
    pub paused_at: Option<DateTime<Utc>>,
}

/// One tick enqueued by a leader pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TickEnqueued {
    /// The schedule's name.
    pub name: String,
    /// The tick (the time the cron expression named).
    pub tick: DateTime<Utc>,
    /// The job enqueued for it (or the one already holding its unique key).
    pub job: JobId,
    /// True when the tick's unique key was already held (nothing new was inserted).
    pub duplicate: bool,
}

/// Enqueues one run of the schedule `name` now, outside its schedule: its job as a tick at
/// `now` would be (same queue, kind, args, priority and attempts; unique per second, so a
/// double click makes one job), marked `"run_now": true` in its metadata. The schedule's
/// next tick is left as it is, and a paused schedule runs too (an operator asked for it).
/// `None`: no schedule of that name.
pub async fn run_now<S: crate::Store>(
    store: &S,
    name: &str,
    now: DateTime<Utc>,
) -> Result<Option<crate::Enqueued>, crate::StoreError> {
    let Some(st) = store
        .list_periodic()
        .await?
        .into_iter()
        .find(|p| p.def.name == name)
    else {
        return Ok(None);
    };
    let mut job = st.def.job_for(now.trunc_subsecs(0));
    if let Some(m) = job.metadata.as_object_mut() {
        m.insert("run_now".into(), serde_json::Value::Bool(true));
    }
    store.enqueue(&job).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn berlin_morning_stays_local_across_dst() {
        let s = CronSchedule::parse("0 9 * * *", "Europe/Berlin").unwrap();
        // 2026-03-29 is the spring-forward day in Berlin: 09:00 local is 07:00 UTC after it.
        let before = Utc.with_ymd_and_hms(2026, 3, 28, 12, 0, 0).unwrap();
        let next = s.next_after(before).unwrap();
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 3, 29, 7, 0, 0).unwrap());
        let winter = s
            .next_after(Utc.with_ymd_and_hms(2026, 1, 10, 12, 0, 0).unwrap())
            .unwrap();
        assert_eq!(winter, Utc.with_ymd_and_hms(2026, 1, 11, 8, 0, 0).unwrap());
    }

    /// Found by the `cron` fuzz target: an expression that matches no date was accepted, and
    /// every search for its next tick then walked croner's whole horizon.
    #[test]
    fn an_expression_that_never_fires_is_refused() {
        assert!(CronSchedule::parse("0 1 1 10 1 +", "UTC").is_err());
        for expr in ["0 0 30 2 *", "0 0 31 4 *"] {
            let e = CronSchedule::parse(expr, "UTC").unwrap_err();
            assert!(e.to_string().contains("never run"), "{expr}: {e}");
        }
        // Empty elements are refused before any search (each took seconds of searching).
        for expr in ["0 , 2 1 * */2", "1,,2 * * * *", "0 0 1 1 +", "0 0 * * 1,"] {
            let e = CronSchedule::parse(expr, "UTC").unwrap_err();
            assert!(e.to_string().contains("empty element"), "{expr}: {e}");
        }
        assert!(CronSchedule::parse("0 0 29 2 *", "UTC").is_ok());
    }

    /// Regression: croner keeps the fraction of a second of its input, which made ticks
    /// drift off whole seconds (and a worker test saw a tick skipped).
    #[test]
    fn ticks_are_whole_seconds_whatever_the_fraction_of_now() {
        let s = CronSchedule::parse("* * * * * *", "UTC").unwrap();
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 41).unwrap();
        let later = t + chrono::Duration::milliseconds(950);
        assert_eq!(s.last_at_or_before(later), Some(t));
        assert_eq!(s.next_after(later), Some(t + chrono::Duration::seconds(1)));
        let (ticks, next) = s.due(t, later, MissedTicks::All);
        assert_eq!(ticks, vec![t]);
        assert_eq!(next, Some(t + chrono::Duration::seconds(1)));
    }

    #[test]
    fn missed_tick_policies() {
        let s = CronSchedule::parse("*/10 * * * * *", "UTC").unwrap();
        let first = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let now = first + chrono::Duration::seconds(95);
        let (all, next) = s.due(first, now, MissedTicks::All);
        assert_eq!(all.len(), 10, "ticks 0,10,...,90");
        assert_eq!(all[0], first);
        assert_eq!(next, Some(first + chrono::Duration::seconds(100)));
        let (latest, _) = s.due(first, now, MissedTicks::Latest);
        assert_eq!(latest, vec![first + chrono::Duration::seconds(90)]);
        let (skip, _) = s.due(first, now, MissedTicks::Skip);
        assert_eq!(
            skip,
            vec![first + chrono::Duration::seconds(90)],
            "5 s late is within grace"
        );
        let long_after = first + chrono::Duration::seconds(3600 + 5);
        let hourly = CronSchedule::parse("0 * * * *", "UTC").unwrap();
        let (skip, next) = hourly.due(
            first,
            first + chrono::Duration::seconds(61),
            MissedTicks::Skip,
        );
        assert!(skip.is_empty(), "a tick 61 s late is dropped: {skip:?}");
        assert_eq!(next, Some(first + chrono::Duration::seconds(3600)));
        let (capped, _) = s.due(first, long_after, MissedTicks::All);
        assert_eq!(capped.len(), MAX_CATCH_UP);
        assert_eq!(
            *capped.last().unwrap(),
            first + chrono::Duration::seconds(3600)
        );
        let (none, _) = s.due(now + chrono::Duration::seconds(1), now, MissedTicks::All);
        assert!(none.is_empty(), "nothing due before next_tick");
    }

    #[test]
    fn bad_input_is_rejected_with_the_reason() {
        assert!(CronSchedule::parse("61 * * * *", "UTC").is_err());
        let e = CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert!(e.to_string().contains("time zone"), "{e}");
        let p = Periodic::new("bad name!", "* * * * *", "q", "k", serde_json::json!({}));
        assert!(p.schedule().is_err());
    }
}
