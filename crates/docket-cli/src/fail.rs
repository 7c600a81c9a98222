//! Turning any error into one clear line, a hint, and an exit code.

use docket_core::StoreError;

use crate::cli::exit;

/// An error that knows its exit code and hint.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl CliError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: None,
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
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
                StoreError::Invalid(_) => (exit::INVALID, s.to_string(), Some("nothing was written".into())),
                StoreError::NotFound(_) => (exit::NOT_FOUND, s.to_string(), Some("`docket jobs list` shows existing jobs".into())),
                StoreError::WrongState { .. } | StoreError::UniqueConflict { .. } => {
                    (exit::CONFLICT, s.to_string(), None)
                }
                StoreError::Unavailable(_) => (
                    exit::UNAVAILABLE,
                    s.to_string(),
                    Some("is PostgreSQL running? check --database-url / DATABASE_URL, or unset it to use the embedded one".into()),
                ),
                StoreError::LeaseLost(_) => (exit::CONFLICT, s.to_string(), None),
                _ => (exit::FAILURE, s.to_string(), None),
            };
        }
    }
    (exit::FAILURE, format!("{e:#}"), None)
}

/// Removes the password from a URL for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
