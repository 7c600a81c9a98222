//! Job outputs: the value a handler returns, stored with its job by the fenced completion.
//!
//! An output is written only by the completion of the claim that produced it — the same
//! compare-and-set on id + attempt + owner + unexpired lease as every other write after a
//! claim — so a stale attempt can record nothing. A job with an output is kept (not deleted
//! by a worker that deletes plain successes) and readable until [`crate::Retention::outputs`]
//! past its finish; plain jobs keep the fast path that deletes them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::job::{JobState, Lease};
use crate::ValidationError;

/// The bound of one output a worker accepts unless configured otherwise: 1 MiB of stored
/// JSON text (JetStream's default message size, and far past what a result should carry).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 20;

/// The hard cap of one output, whatever the configuration: 16 MiB of stored JSON text.
/// Every engine refuses more (PostgreSQL with a CHECK constraint, the others in the shared
/// rules), so a caller that skips the client's check still cannot store more.
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// How long a job with an output stays readable after it finished, by default.
pub const DEFAULT_OUTPUT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// A fenced completion that records the handler's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The claim being completed.
    pub lease: Lease,
    /// The output, checked by [`check`] before it gets here.
    pub value: serde_json::Value,
}

/// A job's output as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOutput {
    /// The job's state now: an output exists only once it `succeeded`.
    pub state: JobState,
    /// The output, once recorded.
    pub output: Option<serde_json::Value>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
}

/// Checks an output against `max` bytes (itself capped at [`MAX_OUTPUT_BYTES`]): size as
/// stored, no NUL, numbers of sane length — the rules of job arguments.
pub fn check(value: &serde_json::Value, max: usize) -> Result<usize, ValidationError> {
    crate::validate::json_payload("output", value, max.min(MAX_OUTPUT_BYTES))
}

/// Outputs in id order without repeats (the order every batch write locks rows in).
pub fn sorted_outputs(outputs: &[Output]) -> Vec<Output> {
    let mut v = outputs.to_vec();
    v.sort_by_key(|o| o.lease);
    v.dedup_by_key(|o| o.lease);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobId;

    #[test]
    fn an_output_over_its_bound_or_the_cap_is_refused() {
        let v = serde_json::json!({"s": "x".repeat(100)});
        assert!(check(&v, 1000).is_ok());
        assert!(matches!(
            check(&v, 50),
            Err(ValidationError::TooLarge { what: "output", .. })
        ));
        let big = serde_json::Value::String("x".repeat(MAX_OUTPUT_BYTES));
        assert!(
            check(&big, usize::MAX).is_err(),
            "the cap binds any configuration"
        );
        assert!(check(&serde_json::json!("a\u{0}b"), 1000).is_err());
    }

    #[test]
    fn outputs_are_sorted_by_lease_without_repeats() {
        let o = |id, attempt| Output {
            lease: Lease {
                id: JobId(id),
                attempt,
            },
            value: serde_json::json!(id),
        };
        let s = sorted_outputs(&[o(3, 1), o(1, 2), o(3, 1), o(2, 1)]);
        let ids: Vec<i64> = s.iter().map(|o| o.lease.id.0).collect();
        assert_eq!(ids, [1, 2, 3]);
    }
}
