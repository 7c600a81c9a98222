//! Signals and parks: a job waits for a named signal (`ctx.wait_signal`) parked — pending,
//! holding no slot, spending no attempt — until the signal arrives or its timeout passes.
//!
//! A signal is kept per (job, name), sent once (a repeat changes nothing), before or after
//! the wait: a wait finds one sent earlier at once. Sending wakes a job parked on that name;
//! the park write itself checks for the signal, and both lock the job's row first, so a
//! signal that arrives while the handler is still deciding to park is never missed. Which
//! of signal and timeout won is recorded as a step, so a job resumes exactly once per park
//! with one answer, whatever runs it again later.

use std::time::Duration;

use crate::job::Lease;
use crate::ValidationError;

/// The largest signal payload, in bytes of stored JSON text.
pub const MAX_SIGNAL_PAYLOAD: usize = 1 << 20;

/// A fenced park: `snooze_many`'s write for a job waiting for signal `signal`, except that
/// it is due at once when that signal has already arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Park {
    /// The claim parking its job.
    pub lease: Lease,
    /// Until the wait times out.
    pub delay: Duration,
    /// The signal it waits for.
    pub signal: String,
}

/// What sending a signal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SignalSent {
    /// False when the job already had a signal of that name (nothing changed).
    pub new: bool,
    /// True when it woke the job, parked waiting for it.
    pub woke: bool,
}

/// The step name a wait for signal `name` is recorded under (with its timeout).
pub fn wait_step(name: &str) -> String {
    format!("{}wait:{name}", crate::steps::RESERVED_PREFIX)
}

/// The step name a wait's answer (the signal's payload, or its timeout) is recorded under.
pub fn answer_step(name: &str) -> String {
    format!("{}signal:{name}", crate::steps::RESERVED_PREFIX)
}

/// Checks a signal's name (as a step's) and payload (as an output, up to
/// [`MAX_SIGNAL_PAYLOAD`]).
pub fn check(name: &str, payload: &serde_json::Value) -> Result<(), ValidationError> {
    crate::steps::check_user_name(name).map_err(|e| match e {
        ValidationError::Other { reason, .. } => ValidationError::Other {
            what: "signal name",
            reason,
        },
        other => other,
    })?;
    crate::validate::json_payload("signal payload", payload, MAX_SIGNAL_PAYLOAD)?;
    Ok(())
}

/// Parks in id order without repeats, each name checked and delay bounded.
pub fn sorted_parks(parks: &[Park]) -> Result<Vec<Park>, ValidationError> {
    let mut v = parks.to_vec();
    v.sort_by_key(|p| p.lease);
    v.dedup_by_key(|p| p.lease);
    for p in &mut v {
        crate::steps::check_user_name(&p.signal)?;
        p.delay = p.delay.min(crate::duration::MAX_DELAY);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_checked_before_any_write() {
        assert!(check("approved", &serde_json::json!({"by": "ann"})).is_ok());
        assert!(check("", &serde_json::json!(1)).is_err());
        assert!(check("docket:x", &serde_json::json!(1)).is_err());
        assert!(check("ok", &serde_json::json!("a\u{0}b")).is_err());
        assert!(check("ok", &serde_json::json!("x".repeat(MAX_SIGNAL_PAYLOAD))).is_err());
        assert_eq!(wait_step("a"), "docket:wait:a");
        assert_eq!(answer_step("a"), "docket:signal:a");
    }
}
