//! What the server's own settings cannot change: a server whose global `sql_mode` is
//! `ORACLE` (or anything else unusual) still runs every operation, because each connection pins
//! the mode Docket's SQL is written for; and a refused port fails at once, naming the cause.

use std::time::{Duration, Instant};

use docket_core::*;
use docket_mysql::MySqlStore;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_oracle_mode_runs_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let (port_tx, port_rx) = std::sync::mpsc::channel::<u16>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // The server dies with the thread that started it: that thread lives through the test.
    let server = std::thread::spawn(move || {
        let db = docket_testkit::mariadb::PrivateMariaDb::start(&data);
        port_tx.send(db.port).unwrap();
        let _ = done_rx.recv();
        drop(db);
    });
    let port = port_rx.recv().unwrap();
    let admin = sqlx::MySqlPool::connect(&format!("mysql://root@127.0.0.1:{port}/mysql"))
        .await
        .unwrap();
    sqlx::raw_sql("CREATE DATABASE docket; SET GLOBAL sql_mode = 'ORACLE'")
        .execute(&admin)
        .await
        .unwrap();
    let store = MySqlStore::connect(&format!("mysql://root@127.0.0.1:{port}/docket"), 4)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let id = store
        .enqueue(&NewJob::new("q", "k", json!({"a": 1})).concurrency_key("c"))
        .await
        .unwrap()
        .id;
    let got = store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 5,
            owner: "w".into(),
            lease: Duration::from_secs(30),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let out = store.complete_many("w", &[got[0].lease()]).await.unwrap();
    assert!(out.lost.is_empty(), "{out:?}");
    assert_eq!(store.get(id).await.unwrap().state, JobState::Succeeded);
    store.pause_queue("q").await.unwrap();
    drop(store);
    admin.close().await;
    done_tx.send(()).unwrap();
    server.join().unwrap();
}

#[tokio::test]
async fn a_refused_port_fails_at_once_with_its_cause() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let t = Instant::now();
    let e = MySqlStore::connect(&format!("mysql://root:pw@127.0.0.1:{port}/x"), 2)
        .await
        .expect_err("nothing listens there");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let msg = e.to_string();
    assert!(msg.to_lowercase().contains("refused"), "{msg}");
    assert!(!msg.contains("pw"), "{msg}");
}

/// A fresh database on the test server, migrated, with one job; the store has `max` connections.
async fn store_with_a_job(max: u32) -> (MySqlStore, String, i64) {
    let url = docket_testkit::mariadb::fresh_database().await;
    let store = MySqlStore::connect(&url, max).await.unwrap();
    store.migrate().await.unwrap();
    let id = store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap()
        .id;
    (store, url, id.0)
}

/// Whether another connection can lock the job's row now (`NOWAIT`: no waiting for it).
async fn lockable(url: &str, id: i64) -> bool {
    use sqlx::Connection;
    let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
    let mut tx = c.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = ? FOR UPDATE NOWAIT")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .is_ok()
}

/// One of Docket's connections left idle inside a transaction holding a row lock — what a worker
/// cut off by a network partition between two statements leaves on the server — is ended by
/// the server after `IDLE_TRANSACTION_TIMEOUT_S`, and the lock with it; without the bound
/// the lock would stay until the server's `wait_timeout` (8 hours by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_inside_a_transaction_is_ended_by_the_server() {
    let (store, url, id) = store_with_a_job(1).await;
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let locked_at = Instant::now();
    assert!(
        !lockable(&url, id).await,
        "the open transaction holds the row"
    );
    let bound = Duration::from_secs(docket_mysql::IDLE_TRANSACTION_TIMEOUT_S.into());
    docket_testkit::eventually(
        bound * 3,
        "the server ended the idle transaction and released its lock",
        || lockable(&url, id),
    )
    .await;
    let freed = locked_at.elapsed();
    assert!(
        freed >= bound - Duration::from_millis(500),
        "released after {freed:?}, before the bound of {bound:?}"
    );
    assert!(
        tx.commit().await.is_err(),
        "the server ended the connection, so its commit fails"
    );
    println!("an idle transaction's lock was released {freed:?} after it was taken");
}

/// This connection's idle-in-transaction bound, in seconds.
async fn bound(c: &mut sqlx::MySqlConnection) -> Result<u64, sqlx::Error> {
    sqlx::query_scalar("SELECT @@idle_transaction_timeout")
        .fetch_one(c)
        .await
}

/// A handler's transaction (`InTransaction`) runs the user's code, which may pause between
/// statements: its connection has no idle bound while it is open, and has it again once the
/// transaction ended — committed, rolled back or dropped unended (the next user of the pooled
/// connection is Docket itself).
#[tokio::test]
async fn a_handler_transaction_is_exempt_from_the_idle_bound_and_restores_it() {
    let (store, _url, _id) = store_with_a_job(1).await;
    let mut conn = store.pool().acquire().await.unwrap();
    assert_eq!(
        bound(&mut conn).await.unwrap(),
        u64::from(docket_mysql::IDLE_TRANSACTION_TIMEOUT_S)
    );
    drop(conn);
    for end in ["commit", "rollback", "drop"] {
        let mut tx = InTransaction::begin(&store).await.unwrap();
        assert_eq!(bound(tx.conn()).await.unwrap(), 0, "exempt while open");
        match end {
            "commit" => tx.commit().await.unwrap(),
            "rollback" => tx.rollback().await.unwrap(),
            // A handler's future dropped mid-transaction: the pool's one connection comes
            // back to the pool only after the rollback that restores the bound.
            _ => drop(tx),
        }
        let mut conn = store.pool().acquire().await.unwrap();
        assert_eq!(
            bound(&mut conn).await.unwrap(),
            u64::from(docket_mysql::IDLE_TRANSACTION_TIMEOUT_S),
            "restored after {end}"
        );
    }
}
