//! The benchmark's SQLite side: fresh files next to the one the URL names, and the floor —
//! one client (SQLite has one writer) claiming and completing batches in raw SQL.

use docket_core::Store;
use docket_sqlite::SqliteStore;

use super::BenchDb;
use crate::sqlite::SqliteCtx;

const FLOOR: &str = include_str!("sqlite_floor.sql");
const CLAIM: &str = include_str!("sqlite_claim.sql");
const COMPLETE: &str = include_str!("sqlite_complete.sql");
const NOW: &str = "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// The benchmark's files: `<path>.bench-N.db` and `<path>.floor-N.db`, a new N for every
/// store (N counts within the process), each earlier one removed when the next is made.
/// A name is never reused while this process could still have a connection to it: a store's
/// connections close in the background after it is dropped, and the file's last one
/// checkpoints and unlinks `<file>-wal` by name — with a reused name, the next database's
/// WAL, which then read short ("disk I/O error", code 522).
pub(crate) struct Bench(pub SqliteCtx);

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Bench {
    fn scratch(&self, what: &str) -> anyhow::Result<String> {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Earlier files of this kind: their connections are closed or closing on unlinked
        // files, which only their own process could still reach.
        for earlier in 0..n {
            self.remove(&format!("{}.{what}-{earlier}.db", self.0.path()))?;
        }
        let path = format!("{}.{what}-{n}.db", self.0.path());
        self.remove(&path)?;
        Ok(format!("sqlite://{path}"))
    }

    fn remove(&self, path: &str) -> anyhow::Result<()> {
        for suffix in ["", "-wal", "-shm"] {
            match std::fs::remove_file(format!("{path}{suffix}")) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl BenchDb for Bench {
    type Store = SqliteStore;
    const NAME: &'static str = "SQLite";
    const FLOOR_CLIENTS: usize = 1;

    async fn fresh(&self, _run: usize) -> anyhow::Result<SqliteStore> {
        let store = SqliteStore::connect(&self.scratch("bench")?, 16).await?;
        store.migrate().await?;
        Ok(store)
    }

    async fn floor(&self, n: u64, batch: usize, _clients: usize) -> anyhow::Result<f64> {
        let store = SqliteStore::connect(&self.scratch("floor")?, 2).await?;
        let pool = store.pool();
        sqlx::raw_sql(FLOOR).execute(pool).await?;
        let now: i64 = sqlx::query_scalar(NOW).fetch_one(pool).await?;
        sqlx::query(
            "WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?1)
             INSERT INTO floor_jobs (payload, run_at) SELECT json_object('n', x), ?2 FROM g",
        )
        .bind(n as i64)
        .bind(now)
        .execute(pool)
        .await?;
        let started = std::time::Instant::now();
        let mut done = 0u64;
        loop {
            let now: i64 = sqlx::query_scalar(NOW).fetch_one(pool).await?;
            let claimed: Vec<(i64, i64)> = sqlx::query_as(CLAIM)
                .bind(batch as i64)
                .bind(now)
                .fetch_all(pool)
                .await?;
            if claimed.is_empty() {
                break;
            }
            let r = sqlx::query(COMPLETE)
                .bind(serde_json::to_string(&claimed)?)
                .execute(pool)
                .await?;
            done += r.rows_affected();
        }
        let secs = started.elapsed().as_secs_f64();
        store.close().await;
        anyhow::ensure!(done == n, "the floor completed {done} of {n}");
        Ok(n as f64 / secs)
    }

    async fn close(&self, store: SqliteStore) {
        store.close().await;
    }

    async fn span(&self, store: &SqliteStore) -> anyhow::Result<(i64, i64)> {
        Ok(
            sqlx::query_as("SELECT min(attempted_at), max(finished_at) FROM jobs")
                .fetch_one(store.pool())
                .await?,
        )
    }
}
