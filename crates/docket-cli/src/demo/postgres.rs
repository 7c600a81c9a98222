//! The demo on PostgreSQL: a scratch schema `<schema>_demo` (see scratch.rs), the provider's
//! tables in it, LISTEN/NOTIFY pickup latency.

use docket_postgres::PgStore;
use docket_worker::JobError;
use sqlx::Row;

use super::{DemoDb, Summary};
use crate::Ctx;

/// The demo's PostgreSQL database (the base `--schema`; the demo uses `<schema>_demo`).
#[derive(Clone)]
pub struct Db(pub Ctx);

impl Db {
    fn ctx(&self) -> Ctx {
        let c = &self.0;
        Ctx {
            url: c.url.clone(),
            schema: if c.schema.ends_with("_demo") {
                c.schema.clone()
            } else {
                format!("{}_demo", c.schema)
            },
        }
    }
}

impl DemoDb for Db {
    type Store = PgStore;

    fn label(&self) -> String {
        let c = self.ctx();
        format!("schema {} on {}", c.schema, crate::fail::redact(&c.url))
    }

    async fn fresh(&self) -> anyhow::Result<PgStore> {
        let ctx = self.ctx();
        let store = crate::scratch::fresh(&ctx, "demo", 4).await?;
        sqlx::raw_sql(&format!(
            "CREATE TABLE {s}.demo_sends (job_id bigint PRIMARY KEY);
             CREATE TABLE {s}.demo_attempts (job_id bigint, attempt int, deduped bool);",
            s = ctx.schema
        ))
        .execute(store.pool())
        .await?;
        Ok(store)
    }

    async fn worker_store(&self) -> anyhow::Result<PgStore> {
        let ctx = self.ctx();
        docket_core::validate::schema(&ctx.schema)
            .map_err(|e| crate::fail::CliError::invalid(e.to_string()))?;
        ctx.connect(8).await
    }

    fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        self.ctx().child(subcommand)
    }

    /// The schema is the worker's own (validated at start), never job data.
    async fn record_send(&self, store: &PgStore, id: i64, attempt: i32) -> Result<(), JobError> {
        let schema = store.schema();
        let pool = store.pool();
        let sent: Option<i64> = sqlx::query_scalar(&format!(
            "INSERT INTO {schema}.demo_sends (job_id) VALUES ($1) ON CONFLICT (job_id) DO NOTHING RETURNING job_id"
        ))
        .bind(id)
        .fetch_optional(pool)
        .await?;
        sqlx::query(&format!(
            "INSERT INTO {schema}.demo_attempts (job_id, attempt, deduped) VALUES ($1, $2, $3)"
        ))
        .bind(id)
        .bind(attempt)
        .bind(sent.is_none())
        .execute(pool)
        .await?;
        Ok(())
    }

    async fn held(&self, store: &PgStore, owner: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {}.jobs WHERE state = 'running' AND lease_owner = $1",
            store.schema()
        ))
        .bind(owner)
        .fetch_one(store.pool())
        .await?)
    }

    async fn summary(&self, store: &PgStore) -> anyhow::Result<Summary> {
        let row = sqlx::query(&format!(
            "SELECT
               count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
               count(*) FILTER (WHERE state = 'succeeded' AND jsonb_array_length(errors) > 0) AS retried,
               count(*) FILTER (WHERE state = 'dead') AS dead,
               count(*) FILTER (WHERE errors @> '[{{\"class\": \"lease_expired\"}}]') AS recovered,
               (SELECT count(*) FROM {s}.demo_attempts WHERE deduped) AS deduped,
               (SELECT count(*) FROM (SELECT job_id FROM {s}.demo_attempts GROUP BY job_id
                                      HAVING count(*) > 1) r) AS rerun,
               -- The checks that can fail. The provider dedupes on the job id, so sending
               -- twice is impossible by construction; what the queue must get right is that
               -- every job it marked succeeded was really sent (a completion accepted without
               -- its handler's effect), and that nothing was sent for a job it did not finish.
               count(*) FILTER (WHERE state = 'succeeded'
                                AND NOT EXISTS (SELECT 1 FROM {s}.demo_sends d WHERE d.job_id = jobs_all.id))
                 AS unsent,
               (SELECT count(*) FROM {s}.demo_sends d
                WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs_all j WHERE j.id = d.job_id AND j.state = 'succeeded'))
                 AS stray
             FROM {s}.jobs_all WHERE queue = 'email'",
            s = store.schema()
        ))
        .fetch_one(store.pool())
        .await?;
        let g = |c: &str| row.try_get::<i64, _>(c).unwrap_or(-1);
        Ok(Summary {
            succeeded: g("succeeded"),
            retried: g("retried"),
            dead: g("dead"),
            recovered: g("recovered"),
            deduped: g("deduped"),
            rerun: g("rerun"),
            unsent: g("unsent"),
            stray: g("stray"),
        })
    }

    async fn latency(&self) -> anyhow::Result<((f64, f64, f64), &'static str)> {
        // Measured like `docket bench --scenario latency`, in a schema of its own.
        let ctx = self.ctx();
        let latency_ctx = Ctx {
            url: ctx.url.clone(),
            schema: format!("{}_latency", ctx.schema),
        };
        let (ms, _) = crate::bench::latency_samples(&latency_ctx, 60, true).await?;
        Ok((crate::bench::percentiles(ms), "idle worker, LISTEN/NOTIFY"))
    }

    fn next(&self) -> Vec<String> {
        let s = self.ctx().schema;
        vec![
            format!("docket stats --schema {s}"),
            format!("docket jobs list --schema {s} --state dead"),
            format!("docket jobs show <id> --schema {s}"),
            "docket lab naive    # why a queue needs SKIP LOCKED and leases".into(),
        ]
    }
}
