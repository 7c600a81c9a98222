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
    /// A queue name outside the allowed characters or length (the name given).
    #[error("invalid queue name {0:?}: use 1-64 characters from A-Z a-z 0-9 _ . -")]
    Queue(String),
    /// A job kind outside the allowed characters or length (the kind given).
    #[error("invalid kind {0:?}: use 1-128 characters from A-Z a-z 0-9 _ . : / -")]
    Kind(String),
    /// A payload (args, metadata, an output, a signal) over its size limit, measured as
    /// the database stores it.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Which payload.
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A string with a NUL character (PostgreSQL's text and jsonb cannot hold one).
    #[error("{what} contains a NUL character, which PostgreSQL cannot store")]
    Nul {
        /// Which value.
        what: &'static str,
    },
    /// Metadata that is not a JSON object.
    #[error("metadata must be a JSON object")]
    MetadataNotObject,
    /// A claim budget outside 1..=1000 (the value given).
    #[error("max_attempts {0} is out of range 1..=1000")]
    MaxAttempts(i32),
    /// A priority outside -100..=100 (the value given).
    #[error("priority {0} is out of range -100..=100")]
    Priority(i32),
    /// A unique key that is empty or too long (why).
    #[error("invalid unique key: {0}")]
    UniqueKey(String),
    /// A duration out of range or unparsable.
    #[error("invalid duration for {what}: {reason}")]
    Duration {
        /// Which setting.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A schema name Docket will not create or use (the name given).
    #[error("invalid schema name {0:?}: use 1-48 characters from a-z 0-9 _, starting with a letter or _ (not pg_*, information_schema or public)")]
    Schema(String),
    /// Any other refused value.
    #[error("invalid {what}: {reason}")]
    Other {
        /// Which value.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A workflow graph refused (the node named); nothing was written.
    #[error("workflow refused: {0}")]
    Workflow(#[from] crate::workflow::WorkflowError),
    /// A batch refused, or an operation its state forbids; nothing was written.
    #[error("batch refused: {0}")]
    Batch(#[from] crate::batches::BatchError),
    /// One job of a batch is invalid; nothing of the batch was written.
    #[error("job #{index} of the batch (0-based): {error}")]
    InBatch {
        /// The job's position in the batch, from 0.
        index: usize,
        /// What is wrong with it.
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
        /// The job.
        id: JobId,
        /// Its state when the operation was tried.
        state: JobState,
        /// The operation refused (`cancel`, `retry`, `signal`, ...).
        op: &'static str,
    },
    /// A unique key is held by another non-terminal job.
    #[error("unique key {key:?} is held by job {holder}")]
    UniqueConflict {
        /// The key.
        key: String,
        /// The pending or running job holding it.
        holder: JobId,
    },
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

impl From<crate::batches::BatchError> for StoreError {
    fn from(e: crate::batches::BatchError) -> Self {
        StoreError::Invalid(ValidationError::Batch(e))
    }
}

impl From<crate::workflow::WorkflowError> for StoreError {
    fn from(e: crate::workflow::WorkflowError) -> Self {
        StoreError::Invalid(ValidationError::Workflow(e))
    }
}
