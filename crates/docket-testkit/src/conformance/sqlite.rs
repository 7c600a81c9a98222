//! The SQLite harness: a fresh database file per case in its own temporary directory, and a
//! clock moved by shifting every time column (declared `TIMEINT`, milliseconds) of every
//! table into the past — SQLite's clock cannot be moved, and every deadline Docket keeps is
//! a time compared with it.

use std::time::Duration;

use docket_core::Store;
use docket_sqlite::SqliteStore;

use super::Harness;

/// [`Harness`] for [`SqliteStore`].
pub struct SqliteHarness {
    /// The case's database file (removed with the directory).
    pub url: String,
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

impl SqliteHarness {
    /// A store on a new empty file, migrated.
    pub async fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("docket-sqlite-")
            .tempdir()
            .expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
        let store = SqliteStore::connect(&url, 8)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
        store.migrate().await.expect("migrate");
        SqliteHarness {
            url,
            store,
            _dir: dir,
        }
    }

    async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(self.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

impl Harness for SqliteHarness {
    type S = SqliteStore;

    async fn fresh() -> Self {
        Self::new().await
    }

    fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn second(&self) -> SqliteStore {
        SqliteStore::connect(&self.url, 4)
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.url))
    }

    async fn reset(&self) {
        self.exec(
            "DELETE FROM jobs; DELETE FROM queues; DELETE FROM key_limits; DELETE FROM job_steps;
             DELETE FROM job_signals; DELETE FROM job_deps; DELETE FROM workflows;
             DELETE FROM sqlite_sequence WHERE name = 'jobs'",
        )
        .await;
    }

    async fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let ms: i64 = sqlx::query_scalar("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)")
            .fetch_one(self.store.pool())
            .await
            .unwrap_or_else(|e| panic!("now: {e}"));
        chrono::DateTime::from_timestamp_millis(ms).expect("now in range")
    }

    async fn actor(&self) -> String {
        "sqlite".into()
    }

    async fn advance(&self, d: Duration) {
        let ms = d.as_millis() as i64;
        let cols: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
             WHERE m.type = 'table' AND c.type = 'TIMEINT'",
        )
        .fetch_all(self.store.pool())
        .await
        .unwrap_or_else(|e| panic!("time columns: {e}"));
        let mut by_table: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (t, c) in cols {
            by_table.entry(t).or_default().push(c);
        }
        let mut sql = String::from("BEGIN IMMEDIATE;");
        for (t, cs) in by_table {
            let sets: Vec<String> = cs
                .iter()
                .map(|c| format!("\"{c}\" = \"{c}\" - {ms}"))
                .collect();
            sql.push_str(&format!("UPDATE \"{t}\" SET {};", sets.join(", ")));
        }
        sql.push_str("COMMIT;");
        self.exec(&sql).await;
    }
}
