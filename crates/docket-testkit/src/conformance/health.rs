//! What the queues page and the gauges read beyond the overview: retrying jobs and the oldest
//! running one per queue, and the leader's per-minute depth samples with the jobs enqueued
//! between them.

use std::time::Duration;

use docket_core::*;

use super::*;

/// Retrying jobs and the oldest running one are counted per queue; the depth sample of a
/// minute is written once (the first stands) and counts the jobs enqueued since the one
/// before, per queue and for the whole database; after no earlier sample that count is
/// unknown, not the whole table.
pub async fn queue_health_and_depth_history<H: Harness>(h: &H) {
    let s = h.store();
    for _ in 0..4 {
        put(s, job("deep")).await;
    }
    let c = claim(s, "deep", 2, "health", LONG).await;
    let out = s
        .fail_many(
            "health",
            &[Failure {
                lease: c[0].lease(),
                class: FailureClass::Retry,
                message: "boom".into(),
                retry_in: Some(Duration::from_secs(3600)),
            }],
        )
        .await
        .unwrap();
    assert!(out.lost.is_empty());
    let hs = s.queue_health(100).await.unwrap();
    let d = hs
        .iter()
        .find(|h| h.queue == "deep")
        .expect("deep has health");
    assert_eq!(d.retrying, Count { n: 1, more: false });
    let age = d.oldest_running_age_s.expect("one runs");
    assert!((0.0..600.0).contains(&age), "oldest running {age} s");
    assert!(matches!(
        s.queue_health(0).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        s.sample_depth(0).await,
        Err(StoreError::Invalid(_))
    ));

    s.sample_depth(100).await.unwrap();
    let first = s.depth_history(Duration::from_secs(3600)).await.unwrap();
    let deep = first
        .iter()
        .find(|d| d.queue == "deep")
        .expect("deep is sampled")
        .clone();
    // Two pending and due (the retried one waits an hour), one running; no earlier sample.
    assert_eq!((deep.waiting, deep.running, deep.enqueued), (2, 1, None));
    let all = first
        .iter()
        .find(|d| d.queue.is_empty())
        .expect("the whole-database row");
    assert_eq!((all.waiting, all.running, all.enqueued), (2, 1, None));

    // A second sample in the same minute changes nothing: the first stands.
    put(s, job("deep")).await;
    s.sample_depth(100).await.unwrap();
    let again = s.depth_history(Duration::from_secs(3600)).await.unwrap();
    // (Unless the clock crossed into the next minute between the two: then that is a new
    // minute's first sample, and the job was counted in it.)
    let crossed = again.iter().filter(|d| d.queue == "deep").count() > 1;
    if !crossed {
        let same = again.iter().find(|d| d.queue == "deep").unwrap();
        assert_eq!(same.waiting, 2, "the minute's first sample stands");
    }

    // A minute later: what was enqueued since is counted, per queue and in all.
    h.advance(Duration::from_secs(60)).await;
    for _ in 0..3 {
        put(s, job("deep")).await;
    }
    put(s, job("fresh")).await;
    s.sample_depth(100).await.unwrap();
    let second = s.depth_history(Duration::from_secs(3600)).await.unwrap();
    let last = |q: &str| {
        second
            .iter()
            .filter(|d| d.queue == q)
            .max_by_key(|d| d.minute)
            .cloned()
            .unwrap_or_else(|| panic!("{q:?} is sampled: {second:?}"))
    };
    // Enqueued since the minute's sample: the one in the same minute and the three now.
    let since = if crossed { 3 } else { 4 };
    assert_eq!(last("deep").enqueued, Some(since), "{second:?}");
    assert_eq!(last("deep").waiting, 6);
    assert_eq!(last("fresh").enqueued, Some(1));
    assert_eq!(last("").enqueued, Some(since + 1));
    assert!(
        second.windows(2).all(|w| w[0].minute <= w[1].minute),
        "oldest first"
    );
}
