//! Human output (tables, colour only on a terminal) and JSON.

use std::io::IsTerminal;

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{Cell, Color, ContentArrangement, Table};
use docket_core::{JobRecord, JobState};
use serde::Serialize;

/// Prints `v` as one line of JSON.
pub fn json<T: Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(v)?);
    Ok(())
}

/// A table styled for stdout: borders and colour only on a terminal.
pub fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    if std::io::stdout().is_terminal() {
        t.load_preset(UTF8_BORDERS_ONLY);
        t.enforce_styling();
    } else {
        t.load_preset(comfy_table::presets::NOTHING);
        t.force_no_tty();
    }
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(headers.iter().map(Cell::new));
    t
}

/// A state cell, coloured on a terminal.
pub fn state_cell(s: JobState) -> Cell {
    let c = Cell::new(s.as_str());
    match s {
        JobState::Waiting => c.fg(Color::Magenta),
        JobState::Pending => c.fg(Color::Yellow),
        JobState::Running => c.fg(Color::Blue),
        JobState::Succeeded => c.fg(Color::Green),
        JobState::Dead => c.fg(Color::Red),
        JobState::Cancelled => c.fg(Color::DarkGrey),
    }
}

/// Short time: RFC 3339 without sub-seconds.
pub fn time(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// Text from job data made safe for a terminal: control characters (C0, DEL, C1 — an
/// escape sequence could rewrite the screen or the title) and bidirectional overrides (which
/// reorder what is shown) are printed as `\u{..}` escapes. JSON output needs none of this:
/// serde escapes what JSON requires and the consumer is a program.
pub fn safe(s: &str) -> String {
    docket_core::validate::visible(s)
}

/// Bounded preview of JSON for tables (payloads can be large), terminal-safe.
pub fn preview(v: &serde_json::Value, max: usize) -> String {
    clip(&v.to_string(), max)
}

/// `s` terminal-safe and cut to at most `max` bytes (at a character boundary), `…` marking
/// a cut.
pub fn clip(s: &str, max: usize) -> String {
    let s = safe(s);
    if s.len() <= max {
        s
    } else {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

/// The list view of jobs.
pub fn jobs_table(jobs: &[JobRecord]) -> Table {
    let mut t = table(&[
        "id", "queue", "kind", "state", "attempt", "priority", "run_at", "args",
    ]);
    for j in jobs {
        t.add_row(vec![
            Cell::new(j.id),
            Cell::new(safe(&j.queue)),
            Cell::new(safe(&j.kind)),
            state_cell(j.state),
            Cell::new(format!("{}/{}", j.runs(), j.max_runs())),
            Cell::new(j.priority),
            Cell::new(time(&j.run_at)),
            Cell::new(preview(&j.args, 40)),
        ]);
    }
    t
}
