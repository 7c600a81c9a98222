//! Turning any error into one clear line, a hint, and an exit code.

use docket_core::StoreError;

use crate::cli::exit;

/// An error that knows its exit code and hint.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// The exit code (see `cli::exit`).
    pub code: i32,
    /// One line, secrets removed.
    pub message: String,
    /// What usually fixes it, printed after the message.
    pub hint: Option<String>,
}

impl CliError {
    /// An error with exit code `code`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: None,
        }
    }
    /// Adds a hint line.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    /// Invalid input (exit 5): nothing was written.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(exit::INVALID, message)
    }
}

/// The exit code, message and hint for any error.
pub fn classify(e: &anyhow::Error) -> (i32, String, Option<String>) {
    for cause in e.chain() {
        if let Some(c) = cause.downcast_ref::<CliError>() {
            return (c.code, c.message.clone(), c.hint.clone());
        }
        if let Some(s) = cause.downcast_ref::<StoreError>() {
            return match s {
                StoreError::Invalid(_) => (
                    exit::INVALID,
                    s.to_string(),
                    Some("nothing was written".into()),
                ),
                StoreError::NotFound(_) => (
                    exit::NOT_FOUND,
                    s.to_string(),
                    Some("`docket jobs list` shows existing jobs".into()),
                ),
                StoreError::WrongState { .. } | StoreError::UniqueConflict { .. } => {
                    (exit::CONFLICT, s.to_string(), None)
                }
                StoreError::Unavailable(inner) => match inner
                    .downcast_ref::<docket_postgres::ConnectError>()
                {
                    Some(c) => (
                        exit::UNAVAILABLE,
                        redact(&c.to_string()),
                        Some(c.hint().into()),
                    ),
                    None => (
                        exit::UNAVAILABLE,
                        redact(&s.to_string()),
                        Some(
                            "the connection to the database failed or was cut; retrying may help"
                                .into(),
                        ),
                    ),
                },
                StoreError::LeaseLost(_) => (exit::CONFLICT, s.to_string(), None),
                StoreError::Denied(_) => (
                    exit::FAILURE,
                    redact(&s.to_string()),
                    Some("nothing was written; what each role of `docket grant` may do: docs/guarantees.md, the trust model".into()),
                ),
                _ => (exit::FAILURE, redact(&s.to_string()), schema_hint(s)),
            };
        }
    }
    (exit::FAILURE, redact(&format!("{e:#}")), None)
}

/// A hint for schema errors (missing schema, a newer schema) and pooler mistakes.
fn schema_hint(s: &StoreError) -> Option<String> {
    let text = s.to_string();
    if text.contains("prepared statement") {
        return Some(
            "connecting through a transaction-mode pooler? add pooler=transaction to the URL"
                .into(),
        );
    }
    None
}

/// Removes every password from a connection string (URL, query or key=value form).
pub use docket_postgres::redact::redact;

/// A connection failure as a CLI error: exit 3 (5 for a malformed string) with the cause and
/// the hint that fits it.
pub fn connect_error(e: docket_postgres::ConnectError) -> CliError {
    let code = match e {
        docket_postgres::ConnectError::InvalidUrl { .. } => exit::INVALID,
        _ => exit::UNAVAILABLE,
    };
    CliError::new(code, e.to_string()).hint(e.hint())
}
