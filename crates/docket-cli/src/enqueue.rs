//! `docket enqueue`: one job from flags, or many from NDJSON (all or nothing).

use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::time::Duration;

use docket_core::duration::{parse_bounded, MAX_DELAY};
use docket_core::{validate, NewJob, Store};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use crate::cli::EnqueueArgs;
use crate::engine::Open;
use crate::fail::CliError;
use crate::{output, Ctx};

fn parse_json(what: &str, s: &str) -> Result<serde_json::Value, CliError> {
    serde_json::from_str(s)
        .map_err(|e| CliError::invalid(format!("--{what} is not valid JSON: {e}")))
}

fn parse_delay(s: &str) -> Result<Duration, CliError> {
    parse_bounded("delay", s, Duration::ZERO, MAX_DELAY)
        .map_err(|e| CliError::invalid(e.to_string()))
}

fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, CliError> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| CliError::invalid(format!("run_at {s:?} is not an RFC 3339 time: {e}")))
}

/// One NDJSON line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default = "default_queue")]
    queue: String,
    kind: String,
    #[serde(default = "empty_object")]
    args: serde_json::Value,
    #[serde(default)]
    priority: i16,
    /// "30s" or a number of seconds.
    delay: Option<serde_json::Value>,
    run_at: Option<String>,
    max_attempts: Option<i32>,
    unique_key: Option<String>,
    metadata: Option<serde_json::Value>,
    ordering_key: Option<String>,
    concurrency_key: Option<String>,
}

fn default_queue() -> String {
    "default".into()
}
fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

impl Line {
    fn into_job(self) -> Result<NewJob, CliError> {
        let mut job = NewJob::new(self.queue, self.kind, self.args).priority(self.priority);
        if let Some(m) = self.max_attempts {
            job = job.max_attempts(m);
        }
        if let Some(k) = self.unique_key {
            job = job.unique_key(k);
        }
        job.ordering_key = self.ordering_key;
        job.concurrency_key = self.concurrency_key;
        if let Some(m) = self.metadata {
            job = job.metadata(m);
        }
        match (self.delay, self.run_at) {
            (Some(_), Some(_)) => return Err(CliError::invalid("give delay or run_at, not both")),
            (Some(serde_json::Value::String(s)), None) => job = job.delay(parse_delay(&s)?),
            (Some(serde_json::Value::Number(n)), None) => {
                let secs = n.as_f64().unwrap_or(-1.0);
                if !(0.0..=MAX_DELAY.as_secs_f64()).contains(&secs) {
                    return Err(CliError::invalid(format!("delay {n} is out of range")));
                }
                job = job.delay(Duration::from_secs_f64(secs));
            }
            (Some(other), None) => {
                return Err(CliError::invalid(format!(
                    "delay must be a duration string or seconds, not {other}"
                )))
            }
            (None, Some(t)) => job = job.run_at(parse_time(&t)?),
            (None, None) => {}
        }
        validate::new_job(&job, &validate::Limits::default())
            .map_err(|e| CliError::invalid(e.to_string()))?;
        Ok(job)
    }
}

pub async fn run(ctx: &impl Open, a: EnqueueArgs) -> anyhow::Result<()> {
    match &a.bulk {
        Some(path) => ctx.bulk_file(path, a.json).await,
        None => one(ctx, a).await,
    }
}

/// One job, on any engine.
async fn one(ctx: &impl Open, a: EnqueueArgs) -> anyhow::Result<()> {
    let kind = a.kind.clone().unwrap_or_default();
    let mut job = NewJob::new(a.queue.clone(), kind, parse_json("args", &a.args)?)
        .priority(a.priority)
        .max_attempts(a.max_attempts);
    if let Some(d) = &a.delay {
        job = job.delay(parse_delay(d)?);
    }
    if let Some(t) = &a.run_at {
        job = job.run_at(parse_time(t)?);
    }
    if let Some(k) = &a.unique_key {
        job = job.unique_key(k.clone());
    }
    job.ordering_key = a.ordering_key.clone();
    job.concurrency_key = a.concurrency_key.clone();
    if let Some(m) = &a.metadata {
        job = job.metadata(parse_json("metadata", m)?);
    }
    // Validate before connecting: bad input never touches the database.
    validate::new_job(&job, &validate::Limits::default())
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let store = ctx.migrated(1).await?;
    let e = store.enqueue(&job).await?;
    if a.json {
        output::json(&e)?;
    } else if e.duplicate {
        println!("{} (duplicate: unique key held by this job)", e.id);
    } else {
        println!("{}", e.id);
    }
    Ok(())
}

/// Lines per insert: a chunk is validated, encoded and sent (by COPY) before the next is
/// read, so memory stays bounded by the chunk whatever the file's size.
const CHUNK: usize = 10_000;

/// Streams the file in chunks into one transaction (on PostgreSQL by COPY where
/// worthwhile): a file goes in whole or not at all (a bad line, reported by number, rolls
/// back every chunk sent before it), and memory stays bounded (measured: tests/bulk.rs).
pub(crate) async fn bulk_pg(ctx: &Ctx, path: &str, json: bool) -> anyhow::Result<()> {
    let store = ctx.store(2).await?;
    let mut tx = store
        .pool()
        .begin()
        .await
        .map_err(docket_postgres::errors::db_err)?;
    let counts = bulk_lines(path, async |chunk| {
        Ok(store.enqueue_many_tx(&mut tx, chunk).await?)
    })
    .await?;
    tx.commit().await.map_err(docket_postgres::errors::db_err)?;
    report_bulk(counts, json)
}

/// Reads NDJSON from `path` (`-`: standard input), [`CHUNK`] validated lines at a time, and
/// hands each chunk to `send` (which writes it inside the caller's transaction). Returns
/// (inserted, duplicates). The first bad line is an error naming it; the caller's
/// transaction is then dropped, so nothing of the file is kept.
pub(crate) async fn bulk_lines(
    path: &str,
    mut send: impl AsyncFnMut(&[NewJob]) -> anyhow::Result<Vec<docket_core::Enqueued>>,
) -> anyhow::Result<(usize, usize)> {
    let reader: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError::invalid(format!("cannot read {path}: {e}")))?,
        )
    };
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} jobs {per_sec}").expect("template"),
    );
    let mut inserted = 0usize;
    let mut duplicates = 0usize;
    let mut chunk: Vec<NewJob> = Vec::with_capacity(CHUNK);
    let bad = |n: usize, msg: String| {
        CliError::invalid(format!("line {n}: {msg}")).hint("nothing from this file was inserted")
    };
    let mut lines = BufReader::new(reader).lines().enumerate();
    let (mut chunk_first, mut chunk_last) = (0usize, 0usize);
    loop {
        let next = lines.next();
        if let Some((i, line)) = &next {
            let n = i + 1;
            let line = line.as_ref().map_err(|e| bad(n, e.to_string()))?;
            // A byte-order mark (some editors write one) is not part of the first line.
            let line = if n == 1 {
                line.strip_prefix('\u{feff}').unwrap_or(line)
            } else {
                line
            };
            if !line.trim().is_empty() {
                if line.trim_start().starts_with('[') {
                    return Err(bad(
                        n,
                        "a JSON array; each line holds one job object (NDJSON), not a list of them"
                            .into(),
                    )
                    .into());
                }
                let parsed: Line = serde_json::from_str(line)
                    .map_err(|e| bad(n, format!("not a job object: {e}")))?;
                if chunk.is_empty() {
                    chunk_first = n;
                }
                chunk.push(parsed.into_job().map_err(|e| bad(n, e.message))?);
                chunk_last = n;
            }
        }
        if chunk.len() >= CHUNK || (next.is_none() && !chunk.is_empty()) {
            // What the database refuses is named by the lines it came from.
            let res = send(&chunk).await.map_err(|e| {
                if matches!(
                    e.downcast_ref::<docket_core::StoreError>(),
                    Some(docket_core::StoreError::Unavailable(_))
                ) {
                    return e;
                }
                let range = if chunk_first == chunk_last {
                    format!("line {chunk_first}")
                } else {
                    format!("lines {chunk_first}-{chunk_last}")
                };
                let msg = docket_core::redact::redact(&format!("{e:#}"));
                CliError::invalid(format!("{range}: {msg}"))
                    .hint("nothing from this file was inserted")
                    .into()
            })?;
            let dups = res.iter().filter(|e| e.duplicate).count();
            duplicates += dups;
            inserted += res.len() - dups;
            bar.inc(chunk.len() as u64);
            chunk.clear();
        }
        if next.is_none() {
            break;
        }
    }
    bar.finish_and_clear();
    Ok((inserted, duplicates))
}

/// Prints what a bulk enqueue wrote.
pub(crate) fn report_bulk(
    (inserted, duplicates): (usize, usize),
    json: bool,
) -> anyhow::Result<()> {
    if json {
        output::json(&serde_json::json!({"inserted": inserted, "duplicates": duplicates}))?;
    } else {
        println!("{inserted}");
        if duplicates > 0 {
            eprintln!(
                "{duplicates} line(s) matched an unfinished job's unique key and were not inserted"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The NDJSON parser against arbitrary input: any line is a job that passed validation
    //! or a clear error, never a panic (the fuzz target for bulk files; cargo-fuzz needs a
    //! nightly toolchain, which this project's machines do not have).
    use super::Line;
    use proptest::prelude::*;

    fn parse(line: &str) -> Result<docket_core::NewJob, String> {
        let l: Line = serde_json::from_str(line).map_err(|e| e.to_string())?;
        l.into_job().map_err(|e| e.message)
    }

    fn field() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            "[ -~]{0,20}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just(r#""infinity""#.to_string()),
            Just(r#""+275760-09-13T00:00:00Z""#.to_string()),
            Just(r#""1969-12-31T23:59:59Z""#.to_string()),
            Just(r#""30s""#.to_string()),
            Just(r#""-5s""#.to_string()),
            Just("1e999999".to_string()),
            Just(r#"{"a":[1,{"b":"\u0000"}]}"#.to_string()),
            Just("[]".to_string()),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(line in ".{0,200}") {
            let _ = parse(&line);
        }

        #[test]
        fn lines_with_hostile_fields_are_valid_jobs_or_errors(
            values in prop::collection::vec(field(), 12),
        ) {
            let names = ["queue", "kind", "args", "priority", "delay", "run_at", "max_attempts",
                         "unique_key", "metadata", "ordering_key", "concurrency_key", "extra"];
            for i in 0..names.len() {
                let mut obj = vec![r#""kind":"k""#.to_string()];
                obj.push(format!("\"{}\":{}", names[i], values[i]));
                let line = format!("{{{}}}", obj.join(","));
                if let Ok(job) = parse(&line) {
                    // Whatever parses has passed the same validation as every entry point.
                    prop_assert!(docket_core::validate::new_job(&job, &Default::default()).is_ok(), "{}", line);
                }
            }
        }
    }
}
