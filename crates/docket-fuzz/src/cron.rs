//! Cron expressions with a time zone: any text is a schedule or an error, and a schedule's
//! ticks obey what the leader relies on — the next tick is later, the last is not, and the
//! ticks due after an outage are increasing, within the outage and bounded in number.

use chrono::{DateTime, Duration, TimeZone, Utc};
use docket_core::{CronSchedule, MissedTicks, MAX_CATCH_UP};

/// Instants that meet daylight-saving changes (Europe in March and October, the USA in
/// November), a leap day, a year's end and the Unix epoch.
fn instants() -> [DateTime<Utc>; 6] {
    [
        Utc.with_ymd_and_hms(2026, 3, 29, 0, 59, 59).unwrap(),
        Utc.with_ymd_and_hms(2026, 10, 25, 0, 30, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 11, 1, 5, 59, 0).unwrap(),
        Utc.with_ymd_and_hms(2028, 2, 29, 12, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap(),
        Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap(),
    ]
}

/// The body of the `cron` target: the first line is the expression, the second (if any)
/// the time zone.
pub fn cron(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (expr, tz) = text.split_once('\n').unwrap_or((text, "UTC"));
    let Ok(schedule) = CronSchedule::parse(expr, tz) else {
        return;
    };
    for t in instants() {
        if let Some(next) = schedule.next_after(t) {
            assert!(next > t, "{expr:?} in {tz:?}: next after {t} is {next}");
        }
        if let Some(last) = schedule.last_at_or_before(t) {
            assert!(
                last <= t,
                "{expr:?} in {tz:?}: last at or before {t} is {last}"
            );
        }
        let since = t - Duration::hours(3);
        let (ticks, following) = schedule.due(since, t, MissedTicks::All);
        assert!(
            ticks.len() <= MAX_CATCH_UP,
            "{expr:?}: {} ticks",
            ticks.len()
        );
        for w in ticks.windows(2) {
            assert!(
                w[0] < w[1],
                "{expr:?} in {tz:?}: ticks {} then {}",
                w[0],
                w[1]
            );
        }
        for tick in &ticks {
            assert!(
                since <= *tick && *tick <= t,
                "{expr:?}: tick {tick} outside {since}..{t}"
            );
        }
        if let Some(f) = following {
            assert!(f > t, "{expr:?} in {tz:?}: following {f} not after {t}");
        }
    }
}
