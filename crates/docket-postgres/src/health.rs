//! Queue health and depth history on PostgreSQL (`sql/queue_health.sql`,
//! `depth_sample.sql`, `depth_list.sql`; the table from migration 0026). Reads run
//! unprepared, like the overview's, so each is planned with its values.

use std::time::Duration;

use docket_core::health::{BlockedReason, DepthSample, QueueHealth};
use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::{ms, PgStore};

/// Depth samples one read returns at most (500 queues for two days would be 1.4 M).
pub const DEPTH_ROWS: i64 = 100_000;

fn check_cap(cap: i64) -> Result<()> {
    Ok(validate::count_cap(cap)?)
}

impl PgStore {
    pub(crate) async fn queue_health_impl(&self, cap: i64) -> Result<Vec<QueueHealth>> {
        check_cap(cap)?;
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                sqlx::query(&self.queries().queue_health)
                    .persistent(false)
                    .bind(cap)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                let get = |c: &str| -> Result<i64> { r.try_get(c).map_err(db_err) };
                let blocked = BlockedReason::ALL
                    .into_iter()
                    .map(|reason| Ok((reason, get(reason.as_str())?)))
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .collect();
                Ok(QueueHealth {
                    queue: r.try_get("queue").map_err(db_err)?,
                    retrying: Count {
                        n: get("retrying")?,
                        more: get("retrying_read")? > cap,
                    },
                    oldest_running_age_s: r.try_get("oldest_running_age_s").map_err(db_err)?,
                    blocked,
                    blocked_more: get("blocked_read")? > cap,
                })
            })
            .collect()
    }

    pub(crate) async fn sample_depth_impl(&self, cap: i64) -> Result<()> {
        check_cap(cap)?;
        // A write, once a minute: the store's ordinary statement path, not the dashboard's
        // unprepared read transaction.
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().depth_sample)
                .bind(cap)
                .execute(&mut *c)
                .await
                .map_err(db_err)
        })
        .await?;
        Ok(())
    }

    pub(crate) async fn depth_history_impl(&self, window: Duration) -> Result<Vec<DepthSample>> {
        let window = ms(window.min(Duration::from_secs(2 * 86_400)));
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                sqlx::query(&self.queries().depth_list)
                    .persistent(false)
                    .bind(window)
                    .bind(DEPTH_ROWS)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DepthSample {
                    queue: r.try_get("queue").map_err(db_err)?,
                    minute: r.try_get("minute").map_err(db_err)?,
                    waiting: r.try_get("waiting").map_err(db_err)?,
                    running: r.try_get("running").map_err(db_err)?,
                    enqueued: r.try_get("enqueued").map_err(db_err)?,
                })
            })
            .collect()
    }
}
