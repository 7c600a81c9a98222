//! "Which error is new?": retrying and dead jobs grouped by what their last error *says*, not
//! by its exact text.
//!
//! One cause spread over a thousand jobs reads as a thousand messages once each carries its
//! customer id, e-mail address or request UUID. [`fingerprint`] replaces those parts with
//! placeholders (`<uuid>`, `<email>`, `<hex>`, `<n>`) so the messages of one cause share one
//! fingerprint, and [`group`] counts the jobs of each fingerprint with when it was first and
//! last seen. Both are plain functions over rows any engine reads
//! ([`Store::errored_jobs`](crate::Store::errored_jobs)), so every engine groups alike.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{ErrorEntry, JobId, JobState};

/// Longest fingerprint kept, in characters (a message is at most 4,096).
pub const FINGERPRINT_CHARS: usize = 300;

/// The most errored jobs of each state one read returns.
pub const ERRORED_MAX: i64 = 10_000;

/// A job whose last run failed and that is retrying (pending with an error history) or dead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErroredJob {
    /// The job.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// `Pending` (retrying) or `Dead`.
    pub state: JobState,
    /// The first entry of its error history.
    pub first: Option<ErrorEntry>,
    /// The last entry of its error history.
    pub last: Option<ErrorEntry>,
}

/// Jobs of one queue and kind whose last errors share a fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorGroup {
    /// The normalised message (see [`fingerprint`]).
    pub fingerprint: String,
    /// The queue.
    pub queue: String,
    /// The kind.
    pub kind: String,
    /// Jobs retrying.
    pub retrying: i64,
    /// Jobs dead.
    pub dead: i64,
    /// The earliest error of any job of the group: when this cause was first seen.
    pub first_seen: Option<DateTime<Utc>>,
    /// The latest last error of the group.
    pub last_seen: Option<DateTime<Utc>>,
    /// One message as stored (the newest), to show what the placeholders stand for.
    pub example_message: String,
    /// The group's jobs, newest error first.
    pub ids: Vec<JobId>,
}

impl ErrorGroup {
    /// Jobs in the group.
    pub fn count(&self) -> i64 {
        self.retrying + self.dead
    }
}

/// The message with what varies between jobs of one cause replaced: UUIDs by `<uuid>`,
/// e-mail addresses by `<email>`, runs of 8 or more hexadecimal characters holding a digit by
/// `<hex>`, other digit runs (with their decimal point) by `<n>`; whitespace runs become one
/// space; at most [`FINGERPRINT_CHARS`] characters.
///
/// Written by hand, one pass over the words: the four patterns are simple, and a regex
/// engine in the core crate for them would be the bigger dependency.
pub fn fingerprint(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(FINGERPRINT_CHARS * 2));
    let mut first = true;
    for word in message.split_whitespace() {
        if !first {
            out.push(' ');
        }
        first = false;
        normalise_word(word, &mut out);
        if out.chars().count() >= FINGERPRINT_CHARS {
            break;
        }
    }
    out.chars().take(FINGERPRINT_CHARS).collect()
}

fn is_email(token: &str) -> bool {
    let Some((local, domain)) = token.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%+-".contains(c))
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
}

fn is_uuid(token: &str) -> bool {
    let groups: Vec<&str> = token.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// One whitespace-free word: a token of identifier characters at a time, punctuation kept.
fn normalise_word(word: &str, out: &mut String) {
    let token_char = |c: char| c.is_ascii_alphanumeric() || "@._%+-".contains(c);
    let mut rest = word;
    while let Some(c) = rest.chars().next() {
        if !token_char(c) {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let end = rest.find(|c: char| !token_char(c)).unwrap_or(rest.len());
        let token = &rest[..end];
        // Sentence punctuation at a token's end is not part of it ("for bob@x.com.").
        let core = token.trim_end_matches(['.', '-']);
        let tail = &token[core.len()..];
        normalise_token(core, out);
        out.push_str(tail);
        rest = &rest[end..];
    }
}

fn normalise_token(token: &str, out: &mut String) {
    if is_email(token) {
        out.push_str("<email>");
        return;
    }
    if is_uuid(token) {
        out.push_str("<uuid>");
        return;
    }
    // Tokens hold ASCII only (see `normalise_word`), so a byte is a character.
    let b = token.as_bytes();
    let glued = |k: usize| k < b.len() && b[k].is_ascii_alphanumeric();
    let mut i = 0;
    while i < b.len() {
        // A run of 8 or more hexadecimal characters holding a digit, not part of a word.
        if b[i].is_ascii_hexdigit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_hexdigit() {
                j += 1;
            }
            if j - i >= 8 && b[i..j].iter().any(u8::is_ascii_digit) && !glued(j) {
                out.push_str("<hex>");
                i = j;
                continue;
            }
        }
        // A number, with its decimal part ("3.5s" is "<n>s", "user42" is "user<n>").
        if b[i].is_ascii_digit() {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
                j += 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            out.push_str("<n>");
            i = j;
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
}

/// Groups `jobs` by queue, kind and fingerprint of the last error: largest group first,
/// then the most recently seen. A job with no error history is left out.
pub fn group(jobs: &[ErroredJob]) -> Vec<ErrorGroup> {
    let mut groups: BTreeMap<(String, String, String), ErrorGroup> = BTreeMap::new();
    for j in jobs {
        let Some(last) = &j.last else { continue };
        let fp = fingerprint(&last.message);
        let g = groups
            .entry((j.queue.clone(), j.kind.clone(), fp.clone()))
            .or_insert_with(|| ErrorGroup {
                fingerprint: fp,
                queue: j.queue.clone(),
                kind: j.kind.clone(),
                retrying: 0,
                dead: 0,
                first_seen: None,
                last_seen: None,
                example_message: String::new(),
                ids: Vec::new(),
            });
        match j.state {
            JobState::Dead => g.dead += 1,
            _ => g.retrying += 1,
        }
        let first = j.first.as_ref().map(|e| e.at).unwrap_or(last.at);
        g.first_seen = Some(g.first_seen.map_or(first, |f| f.min(first)));
        if g.last_seen.is_none_or(|l| last.at >= l) {
            g.last_seen = Some(last.at);
            g.example_message = last.message.clone();
        }
        g.ids.push(j.id);
    }
    let mut out: Vec<ErrorGroup> = groups.into_values().collect();
    for g in &mut out {
        g.ids.sort_by(|a, b| b.cmp(a));
    }
    out.sort_by(|a, b| {
        b.count()
            .cmp(&a.count())
            .then(b.last_seen.cmp(&a.last_seen))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_varies_between_jobs_of_one_cause_is_replaced() {
        for (msg, want) in [
            (
                "smtp 550: mailbox bob@example.com unavailable",
                "smtp <n>: mailbox <email> unavailable",
            ),
            (
                "customer 12345 has no card (request 1b4e28ba-2fa1-11d2-883f-0016d3cca427)",
                "customer <n> has no card (request <uuid>)",
            ),
            ("timeout after 3.5s", "timeout after <n>s"),
            ("object 5f2b9c0a1e3d not found", "object <hex> not found"),
            ("user42 is locked", "user<n> is locked"),
            ("connection   reset\nby peer", "connection reset by peer"),
            ("sent to ann@x.org.", "sent to <email>."),
            ("feedback loop", "feedback loop"),
        ] {
            assert_eq!(fingerprint(msg), want, "{msg}");
        }
        assert_eq!(
            fingerprint("no card for carl@example.com (customer 7)"),
            fingerprint("no card for dana@example.org (customer 99812)")
        );
        assert_ne!(fingerprint("card declined"), fingerprint("card expired"));
        assert_eq!(
            fingerprint(&"é".repeat(5000)).chars().count(),
            FINGERPRINT_CHARS
        );
        assert_eq!(fingerprint(""), "");
    }

    fn errored(id: i64, state: JobState, msg: &str, first_s: i64, last_s: i64) -> ErroredJob {
        let at = |s| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
        let entry = |s, m: &str| ErrorEntry {
            attempt: 1,
            at: at(s),
            class: "retry".into(),
            message: m.into(),
            owner: None,
        };
        ErroredJob {
            id: JobId(id),
            queue: "mail".into(),
            kind: "send".into(),
            state,
            first: Some(entry(first_s, "earlier")),
            last: Some(entry(last_s, msg)),
        }
    }

    #[test]
    fn one_cause_is_one_group_counting_retrying_and_dead() {
        let jobs = vec![
            errored(1, JobState::Dead, "no card for a@x.com", 100, 200),
            errored(2, JobState::Pending, "no card for b@y.com", 150, 300),
            errored(3, JobState::Pending, "gateway timeout", 250, 260),
            ErroredJob {
                last: None,
                ..errored(4, JobState::Pending, "", 0, 0)
            },
        ];
        let g = group(&jobs);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].fingerprint, "no card for <email>");
        assert_eq!((g[0].retrying, g[0].dead), (1, 1));
        assert_eq!(g[0].first_seen.unwrap().timestamp(), 100);
        assert_eq!(g[0].last_seen.unwrap().timestamp(), 300);
        assert_eq!(g[0].example_message, "no card for b@y.com");
        assert_eq!(g[0].ids, vec![JobId(2), JobId(1)]);
        assert_eq!(g[1].fingerprint, "gateway timeout");
        assert_eq!(g[1].count(), 1);
    }
}
