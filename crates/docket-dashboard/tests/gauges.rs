//! The database gauges: a queue that empties and leaves the overview reads 0 at the next
//! read instead of its last value for ever (an alert on it would never clear), and queues
//! beyond the first 500 get no series of their own (whoever can enqueue can create queues).

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_queue_reads_zero_and_series_are_bounded() {
    let db = TestDb::new().await;
    let handle = docket_dashboard::metrics::install().unwrap();
    db.store
        .enqueue(&NewJob::new("gone", "k", json!({})))
        .await
        .unwrap();
    docket_dashboard::metrics::record_db_gauges(&db.store)
        .await
        .unwrap();
    let body = handle.render();
    let pending = r#"docket_queue_jobs{queue="gone",state="pending"}"#;
    assert_eq!(value(&body, pending), Some(1.0), "{body}");
    db.exec("DELETE FROM {schema}.jobs").await;
    docket_dashboard::metrics::record_db_gauges(&db.store)
        .await
        .unwrap();
    let body = handle.render();
    assert_eq!(value(&body, pending), Some(0.0), "{body}");

    // 520 queues: 500 get series, 20 are counted as dropped.
    let jobs: Vec<NewJob> = (0..520)
        .map(|i| NewJob::new(format!("q{i:03}"), "k", json!({})))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    docket_dashboard::metrics::record_db_gauges(&db.store)
        .await
        .unwrap();
    let body = handle.render();
    assert_eq!(
        value(&body, "docket_queue_series_dropped"),
        Some(20.0),
        "{body}"
    );
    let queues: std::collections::BTreeSet<&str> = body
        .lines()
        .filter(|l| l.starts_with("docket_queue_workers{"))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    // The 500 shown plus "gone", which still reads 0 until a restart.
    assert!(queues.len() <= 501, "{} queues have series", queues.len());
}

/// The queues page with 300 queues: the 200 busiest rows and a line saying how many more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_is_bounded_however_many_queues() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..300)
        .map(|i| NewJob::new(format!("many{i:03}"), "k", json!({})))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let app =
        docket_dashboard::router(db.store.clone(), docket_dashboard::Options::default()).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let page = reqwest::get(format!("http://{addr}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(page.matches("data-queue=").count(), 200);
    assert!(
        page.contains("100 more queues"),
        "the hidden ones are counted"
    );
}
