//! The worker registry on PostgreSQL (`sql/worker_beat.sql`, `worker_gone.sql`,
//! `workers_list.sql`, table `workers` from migration 0009).

use std::time::Duration;

use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::{ms, PgStore};

/// Longest host name kept (the column's CHECK).
const MAX_HOST: usize = 255;

fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl PgStore {
    pub(crate) async fn worker_beat_impl(&self, b: &WorkerBeat, ttl: Duration) -> Result<()> {
        validate::worker_beat(b)?;
        let clamp = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().worker_beat)
                .bind(&b.owner)
                .bind(cut(&b.host, MAX_HOST))
                .bind(clamp(b.pid))
                .bind(&b.queues)
                .bind(clamp(b.concurrency))
                .bind(clamp(b.in_flight))
                .bind(ms(ttl))
                .bind(clamp(b.buffered))
                .bind(
                    b.buffered_by_queue
                        .iter()
                        .map(|&n| clamp(n))
                        .collect::<Vec<i32>>(),
                )
                .execute(&mut *c)
                .await
                .map_err(db_err)
        })
        .await?;
        Ok(())
    }

    pub(crate) async fn worker_gone_impl(&self, owner: &str) -> Result<()> {
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().worker_gone)
                .bind(owner)
                .execute(&mut *c)
                .await
                .map_err(db_err)
        })
        .await?;
        Ok(())
    }

    pub(crate) async fn workers_impl(&self) -> Result<Vec<WorkerInfo>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().workers_list)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter().map(|r| worker_row(r, false)).collect()
    }

    pub(crate) async fn registry_impl(&self, window: Duration) -> Result<Registry> {
        let (rows, lease) = self
            .run(async |c: &mut PgConnection| {
                let rows = self
                    .query(&self.queries().workers_recent)
                    .bind(ms(window))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                let lease = self
                    .query(&self.queries().leader_lease)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok((rows, lease))
            })
            .await?;
        let owner: Option<String> = lease.try_get("owner").map_err(db_err)?;
        let expires_at: Option<chrono::DateTime<chrono::Utc>> =
            lease.try_get("expires_at").map_err(db_err)?;
        Ok(Registry {
            workers: rows
                .iter()
                .map(|r| worker_row(r, true))
                .collect::<Result<_>>()?,
            leader: owner
                .zip(expires_at)
                .map(|(owner, expires_at)| LeaderLease { owner, expires_at }),
            now: lease.try_get("now").map_err(db_err)?,
        })
    }
}

/// One registry row (`stopped`: the statement reads `stopped_at`).
fn worker_row(r: &sqlx::postgres::PgRow, stopped: bool) -> Result<WorkerInfo> {
    let unsigned = |n: i32| u32::try_from(n).unwrap_or(0);
    Ok(WorkerInfo {
        beat: WorkerBeat {
            owner: r.try_get("owner").map_err(db_err)?,
            host: r.try_get("host").map_err(db_err)?,
            pid: unsigned(r.try_get("pid").map_err(db_err)?),
            queues: r.try_get("queues").map_err(db_err)?,
            concurrency: unsigned(r.try_get("concurrency").map_err(db_err)?),
            in_flight: unsigned(r.try_get("in_flight").map_err(db_err)?),
            buffered: unsigned(r.try_get("buffered").map_err(db_err)?),
            buffered_by_queue: r
                .try_get::<Vec<i32>, _>("buffered_by_queue")
                .map_err(db_err)?
                .into_iter()
                .map(unsigned)
                .collect(),
        },
        started_at: r.try_get("started_at").map_err(db_err)?,
        seen_at: r.try_get("seen_at").map_err(db_err)?,
        expires_at: r.try_get("expires_at").map_err(db_err)?,
        leader: r.try_get("leader").map_err(db_err)?,
        stopped_at: if stopped {
            r.try_get("stopped_at").map_err(db_err)?
        } else {
            None
        },
    })
}
