//! The demo on MariaDB / MySQL: a scratch database `<database>_demo` on the same server
//! (re-created by every run, only when an earlier demo made it: a marker table says so), the
//! provider's tables in it, and pickup latency of a worker woken in-process (no LISTEN on
//! these servers: other processes poll).

use docket_mysql::MySqlStore;
use docket_worker::JobError;
use sqlx::Row;

use super::{DemoDb, Summary};
use crate::cli::exit;
use crate::engine::Open;
use crate::fail::CliError;
use crate::mysql::MySqlCtx;

/// The demo's MariaDB / MySQL database (the URL's; the demo uses `<database>_demo`).
#[derive(Clone)]
pub struct Db(pub MySqlCtx);

const MARKER: &str = "docket_demo_scratch";
const TABLES: [&str; 4] = [
    "CREATE TABLE docket_demo_scratch (made_at BIGINT NOT NULL)",
    "INSERT INTO docket_demo_scratch VALUES (UNIX_TIMESTAMP())",
    "CREATE TABLE demo_sends (job_id BIGINT PRIMARY KEY) ENGINE = InnoDB",
    "CREATE TABLE demo_attempts (job_id BIGINT, attempt INT, deduped TINYINT) ENGINE = InnoDB",
];
const SUMMARY: &str = include_str!("mysql_summary.sql");

impl Db {
    fn ctx(&self) -> MySqlCtx {
        let db = self.0.database().unwrap_or_default();
        if db.ends_with("_demo") {
            self.0.clone()
        } else {
            self.0.with_database(&format!("{db}_demo"))
        }
    }

    fn name(&self) -> String {
        self.ctx().database().unwrap_or_default()
    }
}

impl DemoDb for Db {
    type Store = MySqlStore;

    fn label(&self) -> String {
        format!("database {} on {}", self.name(), self.ctx().shown())
    }

    async fn fresh(&self) -> anyhow::Result<MySqlStore> {
        let name = self.name();
        docket_core::validate::schema(&name.to_lowercase())
            .map_err(|e| CliError::invalid(format!("demo database name: {e}")))?;
        // The server, through the database the URL names (it must exist).
        let admin = self.0.connect(1).await?;
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
        )
        .bind(&name)
        .fetch_one(admin.pool())
        .await?;
        if exists > 0 {
            let ours: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
            )
            .bind(&name)
            .bind(MARKER)
            .fetch_one(admin.pool())
            .await?;
            if ours == 0 {
                return Err(CliError::new(
                    exit::CONFLICT,
                    format!("database {name:?} exists and was not made by `docket demo`; refusing to drop or reuse it"),
                )
                .hint("point --database-url at another database (the demo uses <database>_demo)")
                .into());
            }
            sqlx::raw_sql(&format!("DROP DATABASE `{name}`"))
                .execute(admin.pool())
                .await?;
        }
        sqlx::raw_sql(&format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        ))
        .execute(admin.pool())
        .await?;
        admin.pool().close().await;
        let store = self.ctx().migrated(4).await?;
        for t in TABLES {
            sqlx::raw_sql(t).execute(store.pool()).await?;
        }
        Ok(store)
    }

    async fn worker_store(&self) -> anyhow::Result<MySqlStore> {
        self.ctx().existing(8).await
    }

    fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        self.ctx().child(subcommand)
    }

    async fn record_send(&self, store: &MySqlStore, id: i64, attempt: i32) -> Result<(), JobError> {
        let mut tx = store.pool().begin().await?;
        let sent = sqlx::query("INSERT IGNORE INTO demo_sends (job_id) VALUES (?)")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        sqlx::query("INSERT INTO demo_attempts (job_id, attempt, deduped) VALUES (?, ?, ?)")
            .bind(id)
            .bind(attempt)
            .bind(!sent)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn held(&self, store: &MySqlStore, owner: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_owner = ?",
        )
        .bind(owner)
        .fetch_one(store.pool())
        .await?)
    }

    async fn summary(&self, store: &MySqlStore) -> anyhow::Result<Summary> {
        let row = sqlx::query(SUMMARY).fetch_one(store.pool()).await?;
        let g = |c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten().unwrap_or(0);
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
        let store = self.ctx().existing(4).await?;
        let ms = super::in_process_latency(store, 60).await?;
        Ok((
            crate::bench::percentiles(ms),
            "idle worker in the enqueuing process, woken in-process; other processes poll",
        ))
    }

    fn next(&self) -> Vec<String> {
        let u = self.ctx().shown();
        vec![
            format!("docket --database-url {u} stats"),
            format!("docket --database-url {u} jobs list --state dead"),
            format!("docket --database-url {u} jobs show <id>"),
        ]
    }
}
