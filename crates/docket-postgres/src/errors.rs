//! Mapping of `sqlx` errors onto the engine-independent [`StoreError`].

use docket_core::{StoreError, ValidationError};

/// SQLSTATE our SQL functions raise for invalid input (`invalid_parameter_value`).
const INVALID_PARAMETER: &str = "22023";

/// Converts a database error. Connection-level failures (I/O, pool, server shutdown, the
/// connection being terminated) become [`StoreError::Unavailable`] so callers know a retry
/// may help; input rejected by the schema's own validation becomes [`StoreError::Invalid`].
pub fn db_err(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(Box::new(e)),
        sqlx::Error::Database(d) => {
            let code = d.code().map(|c| c.to_string()).unwrap_or_default();
            if code == INVALID_PARAMETER {
                StoreError::Invalid(ValidationError::Other {
                    what: "job",
                    reason: d.message().trim_start_matches("docket: ").to_string(),
                })
            } else if is_connection_class(&code) {
                StoreError::Unavailable(Box::new(e))
            } else {
                StoreError::Database(Box::new(e))
            }
        }
        _ => StoreError::Database(Box::new(e)),
    }
}

/// Errors a retry may cure: class 08 (connection exception), 57P01..57P03 (admin shutdown,
/// crash shutdown, cannot connect now), 53300 (too many connections), lost races: 40001
/// (serialization failure, also raised by a contended unique key) and 40P01 (deadlock), and
/// the limits a managed database sets: 57014 (statement_timeout, or a cancel), 25P03
/// (idle_in_transaction_session_timeout) and 57P05 (idle_session_timeout). Every write after
/// a claim is fenced, so retrying any of them is safe.
fn is_connection_class(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "57P05" | "53300" | "40001" | "40P01" | "57014" | "25P03"
        )
}

/// The SQLSTATE of a database error, if it is one.
pub fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.to_string()),
        _ => None,
    }
}
