//! The transactional outbox on PostgreSQL: the SQL API of migration 0032 (`publish()`,
//! `outbox_claim()`, `outbox_mark()`, `outbox_fail()`, `prune_outbox()`). The rules — what a
//! message may hold, which message a claim may take (a key's oldest only), the fence on
//! every later write — live in those functions, so a caller reaching SQL directly meets the
//! same ones.

use std::collections::BTreeMap;
use std::time::Duration;

use docket_core::outbox::{
    NewMessage, OutboxMessage, OutboxRow, OutboxState, OutboxStats, Published,
};
use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::PgStore;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgStore {
    pub(crate) async fn publish_impl(&self, msg: &NewMessage) -> Result<i64> {
        self.run(async |c: &mut PgConnection| self.publish_on(c, msg).await)
            .await
    }

    /// A checked message written by `publish()` on `conn` (perhaps inside the caller's
    /// transaction).
    pub(crate) async fn publish_on(
        &self,
        conn: &mut PgConnection,
        msg: &NewMessage,
    ) -> Result<i64> {
        // Checked once; the payload's text is what is bound (serialised once).
        let payload = msg.checked()?;
        self.query_scalar(&self.queries().outbox_publish)
            .bind(&msg.subject)
            .bind(payload)
            .bind(msg.key.as_deref())
            .bind(msg.headers_text())
            .fetch_one(&mut *conn)
            .await
            .map_err(outbox_err)
    }

    pub(crate) async fn outbox_origin_impl(&self) -> Result<String> {
        self.run(async |c: &mut PgConnection| {
            self.query_scalar(&self.queries().outbox_origin)
                .fetch_one(&mut *c)
                .await
                .map_err(db_err)
        })
        .await
    }

    pub(crate) async fn outbox_claim_impl(
        &self,
        relay: &str,
        limit: i64,
        lease: Duration,
    ) -> Result<Vec<OutboxMessage>> {
        let limit = limit.clamp(1, 1000) as i32;
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().outbox_claim)
                    .bind(relay)
                    .bind(limit)
                    .bind(ms(lease))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter().map(claimed).collect()
    }

    pub(crate) async fn outbox_mark_impl(&self, done: &[Published]) -> Result<u64> {
        if done.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = done.iter().map(|p| p.id).collect();
        let attempts: Vec<i32> = done.iter().map(|p| p.attempt).collect();
        let seqs: Vec<i64> = done
            .iter()
            .map(|p| i64::try_from(p.stream_seq).unwrap_or(i64::MAX))
            .collect();
        let dups: Vec<bool> = done.iter().map(|p| p.duplicate).collect();
        let n: i64 = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(&self.queries().outbox_mark)
                    .bind(&ids)
                    .bind(&attempts)
                    .bind(&seqs)
                    .bind(&dups)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(n as u64)
    }

    pub(crate) async fn outbox_fail_impl(
        &self,
        id: i64,
        attempt: i32,
        error: &str,
        retry_in: Duration,
    ) -> Result<bool> {
        let error = docket_core::outbox::stored_error(error);
        self.run(async |c: &mut PgConnection| {
            self.query_scalar(&self.queries().outbox_fail)
                .bind(id)
                .bind(attempt)
                .bind(&error)
                .bind(ms(retry_in))
                .fetch_one(&mut *c)
                .await
                .map_err(db_err)
        })
        .await
    }

    pub(crate) async fn outbox_stats_impl(&self) -> Result<OutboxStats> {
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().outbox_stats)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(OutboxStats {
            unpublished: row.try_get("unpublished").map_err(db_err)?,
            in_flight: row.try_get("in_flight").map_err(db_err)?,
            failing: row.try_get("failing").map_err(db_err)?,
            oldest_age_ms: row.try_get("oldest_age_ms").map_err(db_err)?,
            published: row.try_get("published").map_err(db_err)?,
            last_error: row.try_get("last_error").map_err(db_err)?,
        })
    }

    pub(crate) async fn outbox_list_impl(
        &self,
        state: OutboxState,
        limit: i64,
    ) -> Result<Vec<OutboxRow>> {
        let limit = limit.clamp(1, 1000);
        let rows = self
            .run(async |c: &mut PgConnection| {
                let q = match state {
                    OutboxState::Published => self
                        .query(&self.queries().outbox_list_published)
                        .bind(limit),
                    s => self
                        .query(&self.queries().outbox_list)
                        .bind(s == OutboxState::Failing)
                        .bind(limit),
                };
                q.fetch_all(&mut *c).await.map_err(db_err)
            })
            .await?;
        rows.iter().map(listed).collect()
    }

    pub(crate) async fn prune_outbox_impl(&self, retention: Duration, limit: i64) -> Result<u64> {
        let limit = limit.clamp(1, 100_000) as i32;
        let n: i64 = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(&self.queries().outbox_prune)
                    .bind(ms(retention))
                    .bind(limit)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(n as u64)
    }
}

fn claimed(r: &PgRow) -> Result<OutboxMessage> {
    let headers: Option<serde_json::Value> = r.try_get("headers").map_err(db_err)?;
    let headers: BTreeMap<String, String> = match headers {
        Some(v) => serde_json::from_value(v).map_err(|e| StoreError::Database(e.into()))?,
        None => BTreeMap::new(),
    };
    Ok(OutboxMessage {
        id: r.try_get("id").map_err(db_err)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        errors: r.try_get("errors").map_err(db_err)?,
        subject: r.try_get("subject").map_err(db_err)?,
        payload: r.try_get("payload").map_err(db_err)?,
        key: r.try_get("key").map_err(db_err)?,
        headers,
    })
}

fn listed(r: &PgRow) -> Result<OutboxRow> {
    Ok(OutboxRow {
        id: r.try_get("id").map_err(db_err)?,
        subject: r.try_get("subject").map_err(db_err)?,
        key: r.try_get("key").map_err(db_err)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        errors: r.try_get("errors").map_err(db_err)?,
        last_error: r.try_get("last_error").map_err(db_err)?,
        created_at: r.try_get("created_at").map_err(db_err)?,
        published_at: r.try_get("published_at").map_err(db_err)?,
        stream_seq: r.try_get("stream_seq").map_err(db_err)?,
        payload: r.try_get("payload").map_err(db_err)?,
    })
}

/// `publish()`'s refusals ("outbox refused: …") as the message's validation error.
fn outbox_err(e: sqlx::Error) -> StoreError {
    match db_err(e) {
        StoreError::Invalid(ValidationError::Other { reason, .. }) => {
            StoreError::Invalid(ValidationError::Other {
                what: "outbox message",
                reason: reason.trim_start_matches("outbox refused: ").to_string(),
            })
        }
        other => other,
    }
}
