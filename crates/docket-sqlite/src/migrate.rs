//! Numbered, embedded migrations. Each runs in its own `BEGIN IMMEDIATE` transaction with
//! its version row, so processes racing to migrate one file apply each migration once (the
//! second waits for the first writer, then sees the version and skips it).

use docket_core::Result;
use sqlx::SqlitePool;

use crate::errors::db_err;

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "jobs", include_str!("../migrations/0001_jobs.sql")),
    (
        2,
        "released",
        include_str!("../migrations/0002_released.sql"),
    ),
    (3, "outputs", include_str!("../migrations/0003_outputs.sql")),
    (
        4,
        "progress",
        include_str!("../migrations/0004_progress.sql"),
    ),
    (5, "steps", include_str!("../migrations/0005_steps.sql")),
    (6, "signals", include_str!("../migrations/0006_signals.sql")),
    (
        7,
        "workers_stopped",
        include_str!("../migrations/0007_workers_stopped.sql"),
    ),
    (
        8,
        "sample_buckets",
        include_str!("../migrations/0008_sample_buckets.sql"),
    ),
    (
        9,
        "queue_depth",
        include_str!("../migrations/0009_queue_depth.sql"),
    ),
    (
        10,
        "periodic_pause",
        include_str!("../migrations/0010_periodic_pause.sql"),
    ),
    (
        11,
        "buffered_by_queue",
        include_str!("../migrations/0011_buffered_by_queue.sql"),
    ),
    (
        12,
        "workflows",
        include_str!("../migrations/0012_workflows.sql"),
    ),
    (
        13,
        "batches",
        include_str!("../migrations/0013_batches.sql"),
    ),
    (14, "outbox", include_str!("../migrations/0014_outbox.sql")),
];

/// The newest version.
pub(crate) const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

pub(crate) async fn run(pool: &SqlitePool) -> Result<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS docket_migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT    NOT NULL,
             applied_at INTEGER NOT NULL
         )",
    )
    .execute(pool)
    .await
    .map_err(db_err)?;
    for &(version, name, sql) in MIGRATIONS {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
        let done: Option<i64> =
            sqlx::query_scalar("SELECT version FROM docket_migrations WHERE version = ?1")
                .bind(version)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err)?;
        if done.is_some() {
            continue;
        }
        // Several statements in one string: the Executor runs them in order.
        sqlx::Executor::execute(&mut *tx, sql)
            .await
            .map_err(db_err)?;
        sqlx::query(
            "INSERT INTO docket_migrations (version, name, applied_at)
             VALUES (?1, ?2, CAST(unixepoch('subsec') * 1000 AS INTEGER))",
        )
        .bind(version)
        .bind(name)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
    }
    Ok(())
}

/// The newest applied version (0 on an empty file).
pub(crate) async fn applied(pool: &SqlitePool) -> Result<i64> {
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'docket_migrations')",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    if !exists {
        return Ok(0);
    }
    sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM docket_migrations")
        .fetch_one(pool)
        .await
        .map_err(db_err)
}
