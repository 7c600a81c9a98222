//! Numbered, embedded migrations. DDL commits implicitly on these servers, so migrations
//! are serialised by a named server lock (`GET_LOCK`) instead of a transaction: processes
//! racing to migrate one database apply each migration once (the second waits, then sees
//! the version and skips it).

use docket_core::Result;
use sqlx::mysql::{MySqlConnection, MySqlPool};

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

/// The statements of a migration file: split at a `;` that ends a line, comments dropped.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in sql.lines() {
        let t = line.trim();
        if t.starts_with("--") || t.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if t.ends_with(';') {
            out.push(cur.trim().trim_end_matches(';').to_string());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

pub(crate) async fn run(pool: &MySqlPool) -> Result<()> {
    let mut c = pool.acquire().await.map_err(db_err)?;
    let got: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(CONCAT('docket_migrate:', DATABASE()), 60)")
            .fetch_one(&mut *c)
            .await
            .map_err(db_err)?;
    if got != Some(1) {
        return Err(docket_core::StoreError::Unavailable(
            "another process held the migration lock for 60 s".into(),
        ));
    }
    let result = apply(&mut c).await;
    let _ = sqlx::query("SELECT RELEASE_LOCK(CONCAT('docket_migrate:', DATABASE()))")
        .execute(&mut *c)
        .await;
    result
}

async fn apply(c: &mut MySqlConnection) -> Result<()> {
    {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS docket_migrations (
                 version    BIGINT       NOT NULL PRIMARY KEY,
                 name       VARCHAR(64)  NOT NULL,
                 applied_at BIGINT       NOT NULL
             ) ENGINE = InnoDB",
        )
        .execute(&mut *c)
        .await
        .map_err(db_err)?;
        for &(version, name, sql) in MIGRATIONS {
            let done: Option<i64> =
                sqlx::query_scalar("SELECT version FROM docket_migrations WHERE version = ?")
                    .bind(version)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)?;
            if done.is_some() {
                continue;
            }
            for stmt in statements(sql) {
                sqlx::Executor::execute(&mut *c, stmt.as_str())
                    .await
                    .map_err(db_err)?;
            }
            sqlx::query(
                "INSERT INTO docket_migrations (version, name, applied_at)
                 VALUES (?, ?, CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED))",
            )
            .bind(version)
            .bind(name)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
        }
        Ok(())
    }
}

/// The newest applied version (0 on an empty database).
pub(crate) async fn applied(pool: &MySqlPool) -> Result<i64> {
    let exists: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = DATABASE() AND table_name = 'docket_migrations'",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    if exists == 0 {
        return Ok(0);
    }
    sqlx::query_scalar("SELECT CAST(COALESCE(MAX(version), 0) AS SIGNED) FROM docket_migrations")
        .fetch_one(pool)
        .await
        .map_err(db_err)
}
