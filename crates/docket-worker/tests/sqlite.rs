//! The worker runtime on SQLite: the engines' shared suite (`local/mod.rs`) with this
//! engine's raw SQL.

use crate::local;

use docket_sqlite::SqliteStore;
use docket_testkit::conformance::SqliteHarness;
use sqlx::SqliteConnection;

impl local::Local for SqliteHarness {
    async fn exec_on(store: &SqliteStore, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    async fn scalar_on(store: &SqliteStore, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn exec_in(conn: &mut SqliteConnection, sql: &str) {
        sqlx::query(sql)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

local_worker_suite!(SqliteHarness);
