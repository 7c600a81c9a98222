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
            } else if code == CHECK_VIOLATION || code == NUMERIC_OUT_OF_RANGE {
                // The table's own checks (migration 0008): named, never with the row's
                // contents (the server's DETAIL would print the whole row, args included).
                StoreError::Invalid(ValidationError::Other {
                    what: "job",
                    reason: check_message(d.constraint().unwrap_or(""), d.message()),
                })
            } else if code == INSUFFICIENT_PRIVILEGE {
                // The server's message names the table or function, never a row.
                StoreError::Denied(format!(
                    "{} (this database role may not do this; see `docket grant` for what each role may)",
                    d.message()
                ))
            } else if is_connection_class(&code) {
                StoreError::Unavailable(Box::new(e))
            } else {
                StoreError::Database(Box::new(e))
            }
        }
        _ => StoreError::Database(Box::new(e)),
    }
}

/// Whether `e` is what a transaction-mode pooler does to named prepared statements: one
/// client's `sqlx_s_1` met on a server connection another client prepared its own on
/// (42P05 duplicate_prepared_statement), a statement executed on a server connection it was
/// not prepared on (26000 invalid_sql_statement_name), or a bind that found another
/// client's statement of that name (08P01, "prepared statement … requires …"). In each the
/// failing statement did not run.
pub fn is_pooler_statement_error(e: &StoreError) -> bool {
    let (StoreError::Database(b) | StoreError::Unavailable(b)) = e else {
        return false;
    };
    let Some(sqlx::Error::Database(d)) = b.downcast_ref::<sqlx::Error>() else {
        return false;
    };
    let code = d.code().map(|c| c.to_string()).unwrap_or_default();
    matches!(code.as_str(), "42P05" | "26000" | "08P01")
        && d.message().contains("prepared statement")
}

/// SQLSTATE of a missing privilege (table, function or schema).
const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// SQLSTATE of a CHECK constraint violation.
const CHECK_VIOLATION: &str = "23514";
/// SQLSTATE of a number `jsonb` or `numeric` cannot hold (e.g. `1e1000000` in args).
const NUMERIC_OUT_OF_RANGE: &str = "22003";

/// What a violated table constraint means, in the words of the client-side validation.
fn check_message(constraint: &str, message: &str) -> String {
    match constraint {
        "jobs_priority_range" => "priority is out of range -100..=100".into(),
        "jobs_attempt_within_budget" => "attempt exceeds max_attempts".into(),
        "jobs_times_finite" => "times must be finite (not infinity or -infinity)".into(),
        "jobs_times_in_range" => {
            "run_at and created_at must be within 1970-01-01 .. 9999-12-31".into()
        }
        "jobs_args_size" => "args is over the limit of 262144 bytes (as stored)".into(),
        "jobs_metadata_size" => "metadata is over the limit of 16384 bytes (as stored)".into(),
        "jobs_errors_size" => "error history is over 262144 bytes".into(),
        "jobs_number_length" => {
            "a number in args or metadata would be stored as more than 1024 characters; send it as a string".into()
        }
        "jobs_backoff_range" => "backoff base must be 1 ms..7 days and cap base..30 days".into(),
        "" => message.to_string(),
        other => format!("violates {other}"),
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
