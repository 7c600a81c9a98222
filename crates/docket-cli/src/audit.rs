//! The CLI's operator actions go to the same audit log as the dashboard's, and `docket audit`
//! reads it.
//!
//! The actor is `cli:<user>@<host>`: the login name from the environment and this machine's
//! host name, each cut to the characters a name needs (both are input nobody checked: a
//! `USER` with a newline or an ANSI escape would otherwise reach every reader of the log).

use comfy_table::Cell;
use docket_core::{AuditEntry, Store};

use crate::cli::AuditArgs;
use crate::engine::Open;
use crate::fail::CliError;
use crate::output;

/// A name as the log keeps it: letters, digits and `._-`, at most 64 characters; `?` when
/// nothing is left.
fn clean(s: &str) -> String {
    let s: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(64)
        .collect();
    if s.is_empty() {
        "?".into()
    } else {
        s
    }
}

/// `cli:<user>@<host>`.
pub fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    format!(
        "cli:{}@{}",
        clean(&user),
        clean(&docket_worker::config::host_name())
    )
}

/// Keeps one action. A failure to keep it is said on stderr and does not undo the action
/// (which already happened): the operator must know the log has a gap.
pub async fn record(
    store: &impl Store,
    action: &str,
    target: impl Into<String>,
    detail: serde_json::Value,
) {
    let e = AuditEntry {
        at: None,
        actor: actor(),
        action: action.into(),
        target: target.into().chars().take(2000).collect(),
        detail,
    };
    if let Err(err) = store.audit(&e).await {
        eprintln!("docket: warning: the action was done but not kept in the audit log: {err}");
    }
}

/// `docket audit [--limit N] [--json]`: the latest actions, newest first.
pub async fn run(ctx: &impl Open, a: AuditArgs) -> anyhow::Result<()> {
    if !(1..=10_000).contains(&a.limit) {
        return Err(CliError::invalid("--limit must be 1..=10000").into());
    }
    let log = Open::existing(ctx, 1).await?.audit_log(a.limit).await?;
    if a.json {
        return output::json(&log);
    }
    let mut t = output::table(&["at (UTC)", "actor", "action", "target", "detail"]);
    for e in &log {
        t.add_row(vec![
            Cell::new(e.at.as_ref().map(output::time).unwrap_or_default()),
            Cell::new(output::safe(&e.actor)),
            Cell::new(output::safe(&e.action)),
            Cell::new(output::safe(&e.target)),
            Cell::new(output::preview(&e.detail, 200)),
        ]);
    }
    println!("{t}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_only_what_a_name_needs() {
        assert_eq!(clean("ann"), "ann");
        assert_eq!(clean("ann\n\u{1b}[31mroot"), "ann31mroot");
        assert_eq!(clean(""), "?");
        assert_eq!(clean(&"x".repeat(100)).len(), 64);
    }
}
