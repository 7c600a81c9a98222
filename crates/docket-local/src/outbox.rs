//! The transactional outbox on SQLite and MariaDB: a message written in the caller's
//! transaction, a relay's claim (unkeyed messages and each key's oldest unpublished one),
//! and the fenced mark and failure. PostgreSQL's versions are `publish()`,
//! `outbox_claim()`, `outbox_mark()`, `outbox_fail()` and `prune_outbox()` (migration 0032);
//! the guarantees are written down once, in `docket_core::outbox`.
//!
//! The claim reads and leases in one write transaction: SQLite's single writer, or
//! MariaDB's `FOR UPDATE SKIP LOCKED` on the heads it takes, so two relays never lease one
//! message, and a key's next message is not a head until its predecessor was marked. Heads
//! are found among the oldest 2,000 unpublished keyed messages (see `outbox_heads.sql`).

use std::collections::BTreeMap;
use std::time::Duration;

use docket_core::mutants::{self, Mutant};
use docket_core::outbox::{
    stored_error, NewMessage, OutboxMessage, OutboxRow, OutboxState, OutboxStats, Published,
};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Inserted, Row};
use crate::rows::{ms, time, time_opt};

/// Writes `msg` in a transaction of its own; its id.
pub async fn publish<E: Engine>(e: &E, msg: &NewMessage) -> Result<i64> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let id = publish_on(&mut tx, now, msg).await?;
    tx.commit().await?;
    Ok(id)
}

/// Writes `msg` on `c` (perhaps inside the caller's transaction) at database time `now`,
/// checked first (nothing is written when refused).
pub async fn publish_on<C: Conn>(c: &mut C, now: i64, msg: &NewMessage) -> Result<i64> {
    let payload = msg.checked()?;
    let headers = msg.headers_text();
    match c
        .insert(
            "outbox_insert",
            args![&msg.subject, &payload, &msg.key, &headers, now],
        )
        .await?
    {
        Inserted::Id(id) => Ok(id),
        Inserted::Duplicate => Err(corrupt("outbox has no unique key to meet")),
    }
}

/// The outbox's origin.
pub async fn origin<E: Engine>(e: &E) -> Result<String> {
    e.reader().scalar("outbox_origin", args![]).await
}

/// Claims up to `limit` messages for `relay` (see `Store::outbox_claim`).
pub async fn claim<E: Engine>(
    e: &E,
    relay: &str,
    limit: i64,
    lease: Duration,
) -> Result<Vec<OutboxMessage>> {
    let limit = limit.clamp(1, 1000);
    let pipelined = mutants::active(Mutant::OutboxKeyPipelined);
    let mut tx = e.begin().await?;
    let now = tx.now();
    let heads = tx
        .fetch_all("outbox_heads", args![now, limit, pipelined, limit * 4])
        .await?;
    let heads = heads
        .iter()
        .map(|r| r.get::<i64>("id"))
        .collect::<Result<Vec<_>>>()?;
    let ids = if heads.is_empty() {
        heads
    } else {
        tx.fetch_all("outbox_lock", args![&heads[..], now, limit])
            .await?
            .iter()
            .map(|r| r.get::<i64>("id"))
            .collect::<Result<Vec<_>>>()?
    };
    if ids.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let until = now.saturating_add(ms(lease));
    tx.execute("outbox_lease", args![&ids[..], relay, until])
        .await?;
    let rows = tx.fetch_all("outbox_claimed", args![&ids[..]]).await?;
    tx.commit().await?;
    rows.iter().map(claimed).collect()
}

fn claimed(r: &Row) -> Result<OutboxMessage> {
    let headers: Option<String> = r.get("headers")?;
    let headers: BTreeMap<String, String> = match headers {
        Some(t) => serde_json::from_str(&t).map_err(|e| corrupt(format!("headers: {e}")))?,
        None => BTreeMap::new(),
    };
    Ok(OutboxMessage {
        id: r.get("id")?,
        attempt: r.get::<i64>("attempt")? as i32,
        errors: r.get::<i64>("errors")? as i32,
        subject: r.get("subject")?,
        payload: r.get("payload")?,
        key: r.get("key")?,
        headers,
    })
}

/// Marks acknowledged publishes, each fenced on its claim's attempt; how many were marked.
pub async fn mark<E: Engine>(e: &E, done: &[Published]) -> Result<u64> {
    if done.is_empty() {
        return Ok(0);
    }
    let unfenced = mutants::active(Mutant::OutboxMarkNoFence);
    let mut sorted = done.to_vec();
    sorted.sort_by_key(|p| p.id);
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut n = 0;
    for p in &sorted {
        let seq = i64::try_from(p.stream_seq).unwrap_or(i64::MAX);
        n += tx
            .execute(
                "outbox_mark",
                args![now, seq, p.duplicate, p.id, p.attempt, unfenced],
            )
            .await?;
    }
    tx.commit().await?;
    Ok(n)
}

/// Records a failed publish, fenced; false when another claim owns the message now.
pub async fn fail<E: Engine>(
    e: &E,
    id: i64,
    attempt: i32,
    error: &str,
    retry_in: Duration,
) -> Result<bool> {
    let error = stored_error(error);
    let mut tx = e.begin().await?;
    let at = tx.now().saturating_add(ms(retry_in));
    let n = tx
        .execute("outbox_fail", args![&error, at, id, attempt])
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// The outbox's counts.
pub async fn stats<E: Engine>(e: &E) -> Result<OutboxStats> {
    let mut tx = e.begin_read().await?;
    let now = tx.now();
    let r = tx.fetch_one("outbox_stats", args![now]).await?;
    tx.commit().await?;
    Ok(OutboxStats {
        unpublished: r.get("unpublished")?,
        in_flight: r.get("in_flight")?,
        failing: r.get("failing")?,
        oldest_age_ms: r.get::<i64>("oldest_age_ms")?.max(0),
        published: r.get("published")?,
        last_error: r.get("last_error")?,
    })
}

/// Up to `limit` messages in `state`.
pub async fn list<E: Engine>(e: &E, state: OutboxState, limit: i64) -> Result<Vec<OutboxRow>> {
    let limit = limit.clamp(1, 1000);
    let rows = match state {
        OutboxState::Published => {
            e.reader()
                .fetch_all("outbox_list_published", args![limit])
                .await?
        }
        s => {
            e.reader()
                .fetch_all("outbox_list", args![s == OutboxState::Failing, limit])
                .await?
        }
    };
    rows.iter()
        .map(|r| {
            Ok(OutboxRow {
                id: r.get("id")?,
                subject: r.get("subject")?,
                key: r.get("key")?,
                attempt: r.get::<i64>("attempt")? as i32,
                errors: r.get::<i64>("errors")? as i32,
                last_error: r.get("last_error")?,
                created_at: time(r, "created_at")?,
                published_at: time_opt(r, "published_at")?,
                stream_seq: r.get("stream_seq")?,
                payload: r.get("payload")?,
            })
        })
        .collect()
}

/// Deletes up to `limit` messages published longer than `retention` ago.
pub async fn prune<E: Engine>(e: &E, retention: Duration, limit: i64) -> Result<u64> {
    let mut tx = e.begin().await?;
    let before = tx.now().saturating_sub(ms(retention));
    let n = tx
        .execute("outbox_prune", args![before, limit.clamp(1, 100_000)])
        .await?;
    tx.commit().await?;
    Ok(n)
}
