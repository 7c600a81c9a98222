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
