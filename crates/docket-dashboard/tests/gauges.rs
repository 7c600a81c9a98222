//! The database gauges: a queue that empties and leaves the overview has no series at the
//! next read (an alert on it clears, and no series lives for ever), queues beyond the first
//! 500 get no series of their own (whoever can enqueue can create queues), and the series an
//! operator alerts on — retrying jobs, the oldest running job, blocked jobs by reason — read
//! what the database holds.

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_queue_has_no_series_and_series_are_bounded() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("gone", "k", json!({})))
        .await
        .unwrap();
    let body = docket_dashboard::metrics::db_gauges(&db.store)
        .await
        .unwrap();
    let pending = r#"docket_queue_jobs{queue="gone",state="pending"}"#;
    assert_eq!(value(&body, pending), Some(1.0), "{body}");
    db.exec("DELETE FROM {schema}.jobs").await;
    let body = docket_dashboard::metrics::db_gauges(&db.store)
        .await
        .unwrap();
    assert!(!body.contains(r#"queue="gone""#), "{body}");
    // Each family keeps its HELP and TYPE, once.
    assert_eq!(body.matches("# TYPE docket_queue_jobs gauge").count(), 1);

    // 520 queues: 500 get series, 20 are counted as dropped.
    let jobs: Vec<NewJob> = (0..520)
        .map(|i| NewJob::new(format!("q{i:03}"), "k", json!({})))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let body = docket_dashboard::metrics::db_gauges(&db.store)
        .await
        .unwrap();
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
    assert_eq!(queues.len(), 500);
}

/// Blocked jobs by reason, retrying jobs and the oldest running job's age, as gauges: each
/// reason set up once (a dead head, an earlier job of the ordering key, a full concurrency
/// key, a key nothing holds any more) and read back by its label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_reasons_retrying_and_the_oldest_running_job_are_gauges() {
    let db = TestDb::new().await;
    let s = &db.store;
    let put = |j: NewJob| async move { s.enqueue(&j).await.unwrap().id.0 };
    let j = |key: &str| NewJob::new("held", "k", json!({})).ordering_key(key);
    let c = |key: &str| NewJob::new("held", "k", json!({})).concurrency_key(key);
    let (dead, behind_dead) = (put(j("o1")).await, put(j("o1")).await);
    let (head, behind) = (put(j("o2")).await, put(j("o2")).await);
    let (runs, full) = (put(c("c1")).await, put(c("c1")).await);
    let free = put(c("c2")).await;
    let retry = put(NewJob::new("held", "k", json!({}))).await;
    s.set_key_limit(&KeyLimit {
        key: "c1".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    let _ = head;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET state = 'dead', finished_at = now(), attempt = 1 WHERE id = {dead}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET state = 'running', attempt = 1, lease_owner = 't',
                attempted_at = now() - interval '95 seconds',
                lease_expires_at = now() + interval '10 minutes' WHERE id = {runs}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET errors = '[{{\"message\": \"boom\", \"attempt\": 1}}]' WHERE id = {retry}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET blocked = true WHERE id IN ({behind_dead}, {behind}, {full}, {free})"
    ))
    .await;
    let body = docket_dashboard::metrics::db_gauges(s).await.unwrap();
    let reason = |r: &str| {
        value(
            &body,
            &format!(r#"docket_queue_blocked_jobs{{queue="held",reason="{r}"}}"#),
        )
    };
    assert_eq!(reason("dead_head"), Some(1.0), "{body}");
    assert_eq!(reason("ordering_behind"), Some(1.0), "{body}");
    assert_eq!(reason("key_limit"), Some(1.0), "{body}");
    assert_eq!(reason("awaiting_sweep"), Some(1.0), "{body}");
    assert_eq!(
        value(&body, r#"docket_queue_retrying_jobs{queue="held"}"#),
        Some(1.0),
        "{body}"
    );
    let age = value(
        &body,
        r#"docket_queue_oldest_running_age_seconds{queue="held"}"#,
    )
    .expect("the oldest running job's age");
    assert!((95.0..200.0).contains(&age), "{age}");
    assert_eq!(
        value(&body, "docket_database_gauges_ok"),
        None,
        "added by the endpoint"
    );
}

/// A label value is escaped as the text format requires (queue names are validated, but
/// the exporter does not rely on it).
#[test]
fn label_values_are_escaped() {
    assert_eq!(
        docket_dashboard::metrics::escape_label("a\"b\\c\nd"),
        "a\\\"b\\\\c\\nd"
    );
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
