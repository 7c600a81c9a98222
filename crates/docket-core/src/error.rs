//! Typed errors. Libraries return these; binaries wrap them in `anyhow`.

use crate::job::{JobId, JobState, Lease};

/// A fenced write matched no row: the job is no longer running under this claim (the reaper
/// took it back, another worker re-claimed it, an operator cancelled it, or the lease expired
/// by the database clock). The caller must stop working on the job and must not retry the write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lease lost on job {} (attempt {}): {reason}", .lease.id, .lease.attempt)]
pub struct LeaseLost {
    /// The claim that no longer holds.
    pub lease: Lease,
    /// What the job looks like now, as far as the store could tell.
    pub reason: LostReason,
}

/// Why a lease no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LostReason {
    /// The row is gone (pruned).
    #[error("job no longer exists")]
    Missing,
    /// A newer claim exists.
    #[error("superseded by attempt {0}")]
    Superseded(i32),
    /// The job left `running` (reaped, finished, cancelled).
    #[error("job is {0}")]
    NotRunning(JobState),
    /// Same claim, but its lease expired by the database clock or the owner differs.
    #[error("lease expired or owned by another worker")]
    Expired,
}

/// Input rejected before any write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    #[error("invalid queue name {0:?}: use 1-64 characters from A-Z a-z 0-9 _ . -")]
    Queue(String),
    #[error("invalid kind {0:?}: use 1-128 characters from A-Z a-z 0-9 _ . : / -")]
    Kind(String),
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        what: &'static str,
        size: usize,
        limit: usize,
    },
    #[error("{what} contains a NUL character, which PostgreSQL cannot store")]
    Nul { what: &'static str },
    #[error("metadata must be a JSON object")]
    MetadataNotObject,
    #[error("max_attempts {0} is out of range 1..=1000")]
    MaxAttempts(i32),
    #[error("priority {0} is out of range -100..=100")]
    Priority(i32),
    #[error("invalid unique key: {0}")]
    UniqueKey(String),
    #[error("invalid duration for {what}: {reason}")]
    Duration { what: &'static str, reason: String },
    #[error("invalid schema name {0:?}: use 1-48 characters from a-z 0-9 _, starting with a letter or _ (not pg_*, information_schema or public)")]
    Schema(String),
    #[error("invalid {what}: {reason}")]
    Other { what: &'static str, reason: String },
    /// One job of a batch is invalid; nothing of the batch was written.
    #[error("job #{index} of the batch (0-based): {error}")]
    InBatch {
        index: usize,
        error: Box<ValidationError>,
    },
}

/// Any store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Bad input; nothing was written.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A fenced write matched nothing.
    #[error(transparent)]
    LeaseLost(#[from] LeaseLost),
    /// No job with that id.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The operation does not apply to the job's current state.
    #[error("job {id} is {state}; cannot {op}")]
    WrongState {
        id: JobId,
        state: JobState,
        op: &'static str,
    },
    /// A unique key is held by another non-terminal job.
    #[error("unique key {key:?} is held by job {holder}")]
    UniqueConflict { key: String, holder: JobId },
    /// The database could not be reached, the connection dropped, or the statement lost a
    /// race (serialization failure, deadlock); the operation may be retried (fenced writes
    /// make a retry safe).
    #[error("database unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database role lacks the privilege for this operation; nothing was written. Its
    /// own variant so a read-only operator's click or command says so plainly (the roles of
    /// `docket grant`), not "database error".
    #[error("permission denied: {0}")]
    Denied(String),
    /// Any other database error.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// True when retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
