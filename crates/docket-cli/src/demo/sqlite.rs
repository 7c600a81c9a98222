//! The demo on SQLite: the file named by `--database-url sqlite://…`, emptied and migrated
//! again by every run (only a file an earlier demo made, recognised by its marker table), the
//! provider's tables in it, and pickup latency of a worker woken in-process (SQLite has no
//! LISTEN: other processes poll).

use docket_sqlite::SqliteStore;
use docket_worker::JobError;
use sqlx::Row;

use super::{DemoDb, Summary};
use crate::cli::exit;
use crate::engine::Open;
use crate::fail::CliError;
use crate::sqlite::SqliteCtx;

/// The demo's SQLite file.
#[derive(Clone)]
pub struct Db(pub SqliteCtx);

const MARKER: &str = "docket_demo_scratch";

/// Drops every table and view of an earlier demo's file, on one connection, and vacuums it.
/// The file itself is kept: removing it and making a new one raced the old connections,
/// which close in the background — the file's last one checkpoints and unlinks
/// `<file>-wal` by name, by then the new database's WAL (a "disk I/O error" next).
async fn empty_in_place(store: &SqliteStore) -> anyhow::Result<()> {
    let mut conn = store.pool().acquire().await?;
    // Tables are dropped in any order: a foreign key must not refuse a drop.
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await?;
    let objects: Vec<(String, String)> = sqlx::query_as(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )
    .fetch_all(&mut *conn)
    .await?;
    for (kind, name) in objects {
        let kind = if kind == "view" { "VIEW" } else { "TABLE" };
        // An identifier cannot be bound: quoted, its quotes doubled (names come from the
        // file, which an earlier demo made, but are treated as hostile all the same).
        let sql = format!("DROP {kind} IF EXISTS \"{}\"", name.replace('"', "\"\""));
        sqlx::query(&sql).execute(&mut *conn).await?;
    }
    sqlx::query("VACUUM").execute(&mut *conn).await?;
    sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await?;
    Ok(())
}
const TABLES: &str = include_str!("sqlite_tables.sql");
const SUMMARY: &str = include_str!("sqlite_summary.sql");

impl DemoDb for Db {
    type Store = SqliteStore;

    fn label(&self) -> String {
        format!("SQLite file {}", self.0.path())
    }

    async fn fresh(&self) -> anyhow::Result<SqliteStore> {
        let path = std::path::PathBuf::from(self.0.path());
        if path.exists() {
            let store = self.0.connect(1).await?;
            let ours: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            )
            .bind(MARKER)
            .fetch_one(store.pool())
            .await?;
            let empty: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM sqlite_master)")
                .fetch_one(store.pool())
                .await?;
            if !ours && !empty {
                store.close().await;
                return Err(CliError::new(
                    exit::CONFLICT,
                    format!("{} exists and was not made by `docket demo`; refusing to delete or reuse it", path.display()),
                )
                .hint("name a new file: --database-url sqlite://demo.db")
                .into());
            }
            empty_in_place(&store).await?;
            store.close().await;
        }
        let store = self.0.migrated(4).await?;
        sqlx::raw_sql(TABLES).execute(store.pool()).await?;
        Ok(store)
    }

    async fn worker_store(&self) -> anyhow::Result<SqliteStore> {
        self.0.existing(8).await
    }

    fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        self.0.child(subcommand)
    }

    /// Through the store's write transaction, so the provider's writes queue with Docket's
    /// own instead of sleeping in SQLite's busy handler.
    async fn record_send(
        &self,
        store: &SqliteStore,
        id: i64,
        attempt: i32,
    ) -> Result<(), JobError> {
        let mut tx = store.begin_write().await?;
        let sent: Option<i64> = sqlx::query_scalar(
            "INSERT INTO demo_sends (job_id) VALUES (?1) ON CONFLICT (job_id) DO NOTHING RETURNING job_id",
        )
        .bind(id)
        .fetch_optional(tx.conn())
        .await?;
        sqlx::query("INSERT INTO demo_attempts (job_id, attempt, deduped) VALUES (?1, ?2, ?3)")
            .bind(id)
            .bind(attempt)
            .bind(sent.is_none())
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn held(&self, store: &SqliteStore, owner: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner = ?1",
        )
        .bind(owner)
        .fetch_one(store.pool())
        .await?)
    }

    async fn summary(&self, store: &SqliteStore) -> anyhow::Result<Summary> {
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
        let store = self.0.existing(4).await?;
        let ms = super::in_process_latency(store, 60).await?;
        Ok((
            crate::bench::percentiles(ms),
            "idle worker in the enqueuing process, woken in-process; other processes poll",
        ))
    }

    fn next(&self) -> Vec<String> {
        let u = &self.0.url;
        vec![
            format!("docket --database-url {u} stats"),
            format!("docket --database-url {u} jobs list --state dead"),
            format!("docket --database-url {u} jobs show <id>"),
        ]
    }
}
