//! `docket enqueue`: one job from flags, or many from NDJSON (all or nothing).

use std::io::{BufRead, BufReader, IsTerminal, Read};

use docket_core::{bulk, validate, NewJob, Store};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::EnqueueArgs;
use crate::engine::Open;
use crate::fail::CliError;
use crate::{output, Ctx};

fn parse_json(what: &str, s: &str) -> Result<serde_json::Value, CliError> {
    serde_json::from_str(s)
        .map_err(|e| CliError::invalid(format!("--{what} is not valid JSON: {e}")))
}

fn parse_delay(s: &str) -> Result<std::time::Duration, CliError> {
    bulk::delay(s).map_err(|e| CliError::invalid(e.0))
}

fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, CliError> {
    bulk::run_at(s).map_err(|e| CliError::invalid(e.0))
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
            if let Some(job) = bulk::parse_line(line).map_err(|e| bad(n, e.0))? {
                if chunk.is_empty() {
                    chunk_first = n;
                }
                chunk.push(job);
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
