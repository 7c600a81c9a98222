//! SQLite errors into Docket's typed errors: a locked file or a lost connection is
//! [`StoreError::Unavailable`] (transient: the runtime retries), anything else
//! [`StoreError::Database`]. Messages carry the file's error text, never a URL.

use docket_core::StoreError;

/// Result codes (primary or extended) that mean "try again": SQLITE_BUSY (5) and its
/// extended forms (261 BUSY_RECOVERY, 517 BUSY_SNAPSHOT, 773 BUSY_TIMEOUT), SQLITE_LOCKED (6)
/// and 262 LOCKED_SHAREDCACHE.
fn transient_code(code: &str) -> bool {
    matches!(code, "5" | "6" | "261" | "262" | "517" | "773")
}

/// The extended result code of a database error, if any.
pub(crate) fn code(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// The file is locked by another connection (retry).
pub(crate) fn is_busy(e: &sqlx::Error) -> bool {
    code(e).is_some_and(|c| transient_code(&c))
}

/// SQLITE_CONSTRAINT_UNIQUE (2067) or _PRIMARYKEY (1555).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(code(e).as_deref(), Some("2067" | "1555"))
}

pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.code().is_some_and(|c| transient_code(&c)) => {
            StoreError::Unavailable(Box::new(e))
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(Box::new(e)),
        _ => StoreError::Database(Box::new(e)),
    }
}

/// A value the store wrote itself but cannot read back (a hand-edited row).
pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Database(what.into().into())
}
