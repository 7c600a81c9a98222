//! Progress of a running job: a percentage and a short message the handler reports
//! (`ctx.progress(…)`), coalesced by the worker and written with its next heartbeat, fenced
//! like it — an attempt that lost its lease reports nothing — and shown by `docket jobs
//! show` and the dashboard's job page.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::job::Lease;
use crate::ValidationError;

/// The longest progress message kept, in bytes (longer ones are cut at a character).
pub const MAX_PROGRESS_MESSAGE: usize = 256;

/// A progress report of one claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The claim reporting.
    pub lease: Lease,
    /// 0 to 100.
    pub percent: f32,
    /// What the handler is doing (at most [`MAX_PROGRESS_MESSAGE`] bytes).
    pub message: String,
}

/// A job's last reported progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobProgress {
    /// 0 to 100.
    pub percent: f32,
    /// What the handler said.
    pub message: String,
    /// When it was written (the database's clock).
    pub at: DateTime<Utc>,
}

/// `message` cut to [`MAX_PROGRESS_MESSAGE`] bytes at a character boundary.
pub fn cut_message(message: &str) -> String {
    let mut end = message.len().min(MAX_PROGRESS_MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// Checks reports before any write: a percentage from 0 to 100, a message within bounds
/// and without NUL.
pub fn check(p: &Progress) -> Result<(), ValidationError> {
    if !(p.percent.is_finite() && (0.0..=100.0).contains(&p.percent)) {
        return Err(ValidationError::Other {
            what: "progress",
            reason: format!("percent {} is not within 0..=100", p.percent),
        });
    }
    if p.message.len() > MAX_PROGRESS_MESSAGE {
        return Err(ValidationError::TooLarge {
            what: "progress message",
            size: p.message.len(),
            limit: MAX_PROGRESS_MESSAGE,
        });
    }
    if p.message.contains('\0') {
        return Err(ValidationError::Nul {
            what: "progress message",
        });
    }
    Ok(())
}

/// Reports in id order without repeats (the last of a lease's kept), checked.
pub fn sorted_progress(reports: &[Progress]) -> Result<Vec<Progress>, ValidationError> {
    let mut v: Vec<Progress> = Vec::with_capacity(reports.len());
    for p in reports {
        check(p)?;
        match v.iter_mut().find(|q| q.lease == p.lease) {
            Some(q) => *q = p.clone(),
            None => v.push(p.clone()),
        }
    }
    v.sort_by_key(|p| p.lease);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobId;

    fn p(percent: f32, message: &str) -> Progress {
        Progress {
            lease: Lease {
                id: JobId(1),
                attempt: 1,
            },
            percent,
            message: message.into(),
        }
    }

    #[test]
    fn reports_out_of_range_or_oversized_are_refused() {
        assert!(check(&p(0.0, "")).is_ok());
        assert!(check(&p(100.0, "done")).is_ok());
        for bad in [
            p(-0.1, ""),
            p(100.5, ""),
            p(f32::NAN, ""),
            p(f32::INFINITY, ""),
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
        assert!(check(&p(1.0, &"x".repeat(MAX_PROGRESS_MESSAGE + 1))).is_err());
        assert!(check(&p(1.0, "a\0b")).is_err());
    }

    #[test]
    fn messages_are_cut_at_a_character_and_repeats_keep_the_last() {
        let long = "é".repeat(200);
        let cut = cut_message(&long);
        assert!(cut.len() <= MAX_PROGRESS_MESSAGE && long.starts_with(&cut));
        let v = sorted_progress(&[p(1.0, "a"), p(2.0, "b")]).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].message, "b");
    }
}
