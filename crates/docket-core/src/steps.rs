//! Memoized steps: a named piece of a job's work whose output is recorded once per job,
//! under the claim that holds the job. A later attempt gets the recorded value instead of
//! running the step again, and a stale attempt can record nothing: the record is written in
//! one transaction with the fence (attempt, owner, unexpired lease on the database clock),
//! the job's row locked until it commits.
//!
//! What this does not promise: a crash after a step's side effect and before its record
//! runs the step again (at-least-once, as every job). The job id and the step name together
//! make the idempotency key for such effects.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ValidationError;

/// The longest step name, in bytes.
pub const MAX_STEP_NAME: usize = 128;

/// The most steps one job may record (a bound on the rows one job keeps).
pub const MAX_STEPS: usize = 1000;

/// One recorded step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    /// Its name, unique within the job.
    pub name: String,
    /// The run that recorded it (the claim's token).
    pub attempt: i32,
    /// What the step returned.
    pub output: serde_json::Value,
    /// When it was recorded (the database's clock).
    pub recorded_at: DateTime<Utc>,
}

/// What [`crate::Store::record_step`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecorded {
    /// The step's output as recorded: this call's, or an earlier record's of the same name
    /// (the first record wins).
    pub output: serde_json::Value,
    /// True when this call wrote it.
    pub written: bool,
}

/// One step to record, as [`crate::Store::record_steps`] takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepWrite {
    /// The claim it is recorded under (the fencing token is `lease.attempt`).
    pub lease: crate::Lease,
    /// Its name.
    pub name: String,
    /// Its output.
    pub output: serde_json::Value,
}

/// Checks every step of a batch (name and output) before anything is written: a batch with
/// one bad step writes nothing.
pub fn check_writes(steps: &[StepWrite]) -> Result<(), ValidationError> {
    for s in steps {
        check_name(&s.name)?;
        crate::output::check(&s.output, crate::output::MAX_OUTPUT_BYTES)?;
    }
    Ok(())
}

/// Names beginning with this are Docket's own records (durable sleeps): a handler's step
/// may not use them.
pub const RESERVED_PREFIX: &str = "docket:";

/// The step name a durable sleep named `name` is recorded under.
pub fn sleep_step(name: &str) -> String {
    format!("{RESERVED_PREFIX}sleep:{name}")
}

/// When a recorded durable sleep ends (its record's time plus its length, on the
/// database's clock), and its name; `None` for any other step.
pub fn sleep_of(step: &StepRecord) -> Option<(&str, DateTime<Utc>)> {
    let name = step
        .name
        .strip_prefix(RESERVED_PREFIX)?
        .strip_prefix("sleep:")?;
    let ms = step.output.get("sleep_ms")?.as_i64()?;
    Some((
        name,
        step.recorded_at + chrono::TimeDelta::try_milliseconds(ms)?,
    ))
}

/// Checks the name of a handler's own step: as [`check_name`], and not one of Docket's.
pub fn check_user_name(name: &str) -> Result<(), ValidationError> {
    check_name(name)?;
    if name.starts_with(RESERVED_PREFIX) {
        return Err(ValidationError::Other {
            what: "step name",
            reason: format!("{name:?}: names beginning with {RESERVED_PREFIX:?} are Docket's"),
        });
    }
    Ok(())
}

/// Checks a step name: 1 to [`MAX_STEP_NAME`] bytes, no control characters.
pub fn check_name(name: &str) -> Result<(), ValidationError> {
    let bad = |reason: String| {
        Err(ValidationError::Other {
            what: "step name",
            reason,
        })
    };
    if name.is_empty() || name.len() > MAX_STEP_NAME {
        return bad(format!(
            "{} bytes; 1 to {MAX_STEP_NAME} allowed",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return bad(format!("{:?} holds a control character", name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_bounded_and_printable() {
        assert!(check_name("charge card").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(MAX_STEP_NAME + 1)).is_err());
        assert!(check_name("a\nb").is_err());
        assert!(check_name("a\u{0}b").is_err());
        assert!(check_user_name("docket:sleep:x").is_err());
        assert!(check_name(&sleep_step("x")).is_ok());
    }

    #[test]
    fn a_sleep_ends_its_length_after_its_record() {
        let at = chrono::DateTime::from_timestamp(1_000_000, 0).unwrap();
        let step = StepRecord {
            name: sleep_step("cool-off"),
            attempt: 1,
            output: serde_json::json!({"sleep_ms": 90_000}),
            recorded_at: at,
        };
        let (name, until) = sleep_of(&step).unwrap();
        assert_eq!(name, "cool-off");
        assert_eq!((until - at).num_seconds(), 90);
        let plain = StepRecord {
            name: "sleep_ms".into(),
            ..step
        };
        assert!(
            sleep_of(&plain).is_none(),
            "a handler's step is never a sleep"
        );
    }
}
