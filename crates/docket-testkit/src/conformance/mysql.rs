//! The MariaDB / MySQL harness: a fresh database per case on the test server
//! (`mariadb::server_url`), and a clock moved by shifting every time column (commented
//! `time_ms`) of every table into the past.

use std::time::Duration;

use docket_core::Store;
use docket_mysql::MySqlStore;

use super::Harness;

/// [`Harness`] for [`MySqlStore`].
pub struct MySqlHarness {
    /// The case's database.
    pub url: String,
    store: MySqlStore,
}

impl MySqlHarness {
    /// A store on a new empty database, migrated.
    pub async fn new() -> Self {
        let url = crate::mariadb::fresh_database().await;
        let store = MySqlStore::connect(&url, 8)
            .await
            .unwrap_or_else(|e| panic!("open the test database: {e}"));
        store.migrate().await.expect("migrate");
        MySqlHarness { url, store }
    }

    async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(self.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

impl Harness for MySqlHarness {
    type S = MySqlStore;

    async fn fresh() -> Self {
        Self::new().await
    }

    fn store(&self) -> &MySqlStore {
        &self.store
    }

    async fn second(&self) -> MySqlStore {
        MySqlStore::connect(&self.url, 4)
            .await
            .unwrap_or_else(|e| panic!("open the test database: {e}"))
    }

    async fn reset(&self) {
        for t in [
            "jobs",
            "queues",
            "key_limits",
            "job_steps",
            "job_signals",
            "job_deps",
            "workflows",
        ] {
            self.exec(&format!("TRUNCATE TABLE {t}")).await;
        }
    }

    async fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let ms: i64 = sqlx::query_scalar(
            "SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)",
        )
        .fetch_one(self.store.pool())
        .await
        .unwrap_or_else(|e| panic!("now: {e}"));
        chrono::DateTime::from_timestamp_millis(ms).expect("now in range")
    }

    async fn actor(&self) -> String {
        "mysql".into()
    }

    async fn advance(&self, d: Duration) {
        let ms = d.as_millis() as i64;
        let cols: Vec<(String, String)> = sqlx::query_as(
            "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR) FROM information_schema.columns
             WHERE table_schema = DATABASE() AND column_comment = 'time_ms'",
        )
        .fetch_all(self.store.pool())
        .await
        .unwrap_or_else(|e| panic!("time columns: {e}"));
        let mut by_table: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (t, c) in cols {
            by_table.entry(t).or_default().push(c);
        }
        for (t, cs) in by_table {
            let sets: Vec<String> = cs.iter().map(|c| format!("`{c}` = `{c}` - {ms}")).collect();
            self.exec(&format!("UPDATE `{t}` SET {}", sets.join(", ")))
                .await;
        }
    }
}
