//! The worker runtime on MariaDB / MySQL: the engines' shared suite (`local/mod.rs`) with
//! this engine's raw SQL, and an enqueue inside the application's own connection. The
//! server: `MYSQL_URL`, or a private `mariadbd`.

use crate::local;

use docket_core::*;
use docket_mysql::{MySqlStore, MySqlTx};
use docket_testkit::conformance::{Harness, MySqlHarness};
use serde_json::json;

impl local::Local for MySqlHarness {
    async fn exec_on(store: &MySqlStore, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    async fn scalar_on(store: &MySqlStore, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn exec_in(conn: &mut MySqlTx, sql: &str) {
        sqlx::query(sql)
            .execute(conn.conn())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

local_worker_suite!(MySqlHarness);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_in_the_applications_own_transaction_exists_iff_it_commits() {
    let h = MySqlHarness::new().await;
    let s = h.store().clone();
    let mut tx = s.pool().begin().await.unwrap();
    s.enqueue_tx(&mut tx, &NewJob::new("q", "k", json!({"a": 1})))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(docket_testkit::conformance::all(&s).await.is_empty());
    let mut tx = s.pool().begin().await.unwrap();
    let e = s
        .enqueue_tx(&mut tx, &NewJob::new("q", "k", json!({})))
        .await
        .unwrap();
    assert!(
        matches!(s.get(e.id).await, Err(StoreError::NotFound(_))),
        "invisible to others before the commit"
    );
    tx.commit().await.unwrap();
    assert_eq!(s.get(e.id).await.unwrap().state, JobState::Pending);
}
