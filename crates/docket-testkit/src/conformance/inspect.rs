//! What operators read and do in bulk: search with every filter and keyset pages, the capped
//! overview, dead groups, bulk retry and cancel, run now, samples and the audit log.

use std::time::Duration;

use docket_core::*;
use serde_json::json;

use super::*;

async fn kill<S: Store>(s: &S, queue: &str, message: &str) -> JobId {
    let c = claim(s, queue, 1, "inspector", LONG).await;
    let out = s
        .fail_many(
            "inspector",
            &[Failure {
                lease: c[0].lease(),
                class: FailureClass::Discard,
                message: message.into(),
                retry_in: None,
            }],
        )
        .await
        .unwrap();
    assert!(out.lost.is_empty());
    c[0].id
}

fn ids(p: &JobPage) -> Vec<JobId> {
    p.jobs.iter().map(|j| j.id).collect()
}

/// Every filter narrows the search; pages are keyset pages that never repeat or skip a job;
/// bad filters are refused before the database sees them.
pub async fn search_filters_and_pages<H: Harness>(h: &H) {
    let s = h.store();
    let mut mails = Vec::new();
    for i in 0..7 {
        let j = NewJob::new(
            "mail",
            "send",
            json!({"user_id": i, "to": format!("u{i}@x")}),
        )
        .metadata(json!({"tenant": if i % 2 == 0 { "even" } else { "odd" }}))
        .priority(if i == 3 { -5 } else { 0 });
        mails.push(put(s, j).await);
    }
    let keyed = put(
        s,
        NewJob::new("mail", "digest", json!({})).ordering_key("acct-1"),
    )
    .await;
    let other = put(s, NewJob::new("img", "resize", json!({"user_id": 3}))).await;
    let q = |f: fn(&mut JobQuery)| {
        let mut q = JobQuery::default();
        f(&mut q);
        q
    };
    let search = |q: JobQuery| async move { s.search(&q).await.unwrap() };

    let p = search(q(|q| q.queue = Some("mail".into()))).await;
    assert_eq!(p.jobs.len(), 8);
    assert!(p.next.is_none());
    assert!(p.jobs.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    let p = search(q(|q| q.kind = Some("resize".into()))).await;
    assert_eq!(ids(&p), vec![other]);
    let p = search(q(|q| q.priority = Some(-5))).await;
    assert_eq!(ids(&p), vec![mails[3]]);
    let p = search(q(|q| q.ordering_key = Some("acct-1".into()))).await;
    assert_eq!(ids(&p), vec![keyed]);
    let p = search(q(|q| q.field = FieldEq::parse("args.user_id = 3").ok())).await;
    assert_eq!(
        ids(&p),
        vec![other, mails[3]],
        "a JSON path into args, any queue"
    );
    let p = search(q(|q| q.field = FieldEq::parse("args.user_id = \"3\"").ok())).await;
    assert!(p.jobs.is_empty(), "the string \"3\" is not the number 3");
    let p = search(q(|q| {
        q.field = FieldEq::parse("metadata.tenant = odd").ok()
    }))
    .await;
    assert_eq!(p.jobs.len(), 3);
    let p = search(q(|q| {
        q.queue = Some("mail".into());
        q.field = FieldEq::parse("args.to = u4@x").ok();
    }))
    .await;
    assert_eq!(ids(&p), vec![mails[4]]);
    let now = h.now().await;
    let p = search(q(|q| q.state = Some(JobState::Dead))).await;
    assert!(p.jobs.is_empty());
    let mut tq = JobQuery {
        since: Some(now - chrono::Duration::hours(1)),
        until: Some(now + chrono::Duration::hours(1)),
        ..Default::default()
    };
    assert_eq!(search(tq.clone()).await.jobs.len(), 9);
    tq.since = Some(now + chrono::Duration::minutes(1));
    assert!(search(tq).await.jobs.is_empty());

    // Keyset pages of 3 over the 9 jobs: 3 + 3 + 3, no repeats, then no cursor.
    let mut seen = Vec::new();
    let mut before = None;
    for round in 0..3 {
        let p = search(JobQuery {
            limit: 3,
            before,
            ..Default::default()
        })
        .await;
        assert_eq!(p.jobs.len(), 3, "page {round}");
        seen.extend(ids(&p));
        before = p.next;
        assert_eq!(
            before.is_some(),
            round < 2,
            "page {round}: a cursor while more remain"
        );
    }
    let mut all_ids: Vec<JobId> = all(s).await.iter().map(|r| r.id).collect();
    all_ids.reverse();
    assert_eq!(seen, all_ids);

    for bad in [
        JobQuery {
            queue: Some("bad queue".into()),
            ..Default::default()
        },
        JobQuery {
            limit: docket_core::inspect::MAX_PAGE + 1,
            ..Default::default()
        },
    ] {
        assert!(matches!(s.search(&bad).await, Err(StoreError::Invalid(_))));
    }
}

/// A filter no index serves (here the kind) looks at a bounded window of jobs per page and
/// says so; the pages together still find every match, and an indexed search is not
/// windowed.
pub async fn search_windows_a_filter_no_index_serves<H: Harness>(h: &H) {
    let s = h.store();
    let needle = put(s, NewJob::new("w", "needle", json!({}))).await;
    let window = docket_core::inspect::SCAN_WINDOW as usize;
    let hay: Vec<NewJob> = (0..window + 500)
        .map(|i| NewJob::new("w", "hay", json!({"i": i})))
        .collect();
    for chunk in hay.chunks(5000) {
        s.enqueue_many(chunk).await.unwrap();
    }
    let q = JobQuery {
        kind: Some("needle".into()),
        ..Default::default()
    };
    let first = s.search(&q).await.unwrap();
    assert!(
        first.jobs.is_empty(),
        "the needle is below the first window"
    );
    assert_eq!(first.scanned, Some(window as i64));
    let next = first.next.expect("a window that ended goes on");
    let second = s
        .search(&JobQuery {
            before: Some(next),
            ..q.clone()
        })
        .await
        .unwrap();
    assert_eq!(ids(&second), vec![needle]);
    assert!(
        second.next.is_none(),
        "the last window reached the oldest job"
    );
    assert!(second.scanned.unwrap() < window as i64);
    let plain = s
        .search(&JobQuery {
            queue: Some("w".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(plain.scanned, None, "a queue filter is not windowed");
    assert_eq!(plain.jobs.len(), 50);
}

/// The overview knows every queue with work, caps its counts, and reports pause, limits,
/// leases and live workers; dead jobs group by kind and error.
pub async fn overview_counts_with_a_cap_and_dead_jobs_group<H: Harness>(h: &H) {
    let s = h.store();
    for _ in 0..5 {
        put(s, job("big")).await;
    }
    put(s, job("big").delay(Duration::from_secs(600))).await;
    put(s, job("busy")).await;
    put(s, job("busy")).await;
    claim(s, "busy", 1, "w", Duration::from_secs(5)).await;
    put(s, job("graveyard")).await;
    put(s, job("graveyard")).await;
    put(s, job("graveyard")).await;
    kill(s, "graveyard", "boom").await;
    kill(s, "graveyard", "boom").await;
    kill(s, "graveyard", "other <b>error</b>").await;
    s.pause_queue("quiet").await.unwrap();
    s.worker_beat(
        &WorkerBeat {
            owner: "w".into(),
            host: "h".into(),
            pid: 1,
            queues: vec!["served".into()],
            concurrency: 1,
            in_flight: 0,
            buffered: 0,
            buffered_by_queue: vec![],
        },
        Duration::from_secs(60),
    )
    .await
    .unwrap();

    let o = s.overview(3).await.unwrap();
    assert_eq!(o.cap, 3);
    let names: Vec<&str> = o.queues.iter().map(|q| q.queue.as_str()).collect();
    assert_eq!(names, vec!["big", "busy", "graveyard", "quiet", "served"]);
    let by = |n: &str| o.queues.iter().find(|q| q.queue == n).unwrap().clone();
    let big = by("big");
    assert_eq!(
        big.pending,
        Count { n: 3, more: true },
        "6 pending, capped at 3"
    );
    assert_eq!(big.ready, Count { n: 3, more: true });
    assert!(big.oldest_ready_age_s.is_some());
    // The oldest waiting job includes held ones: never younger than the oldest ready one.
    assert!(big.oldest_waiting_age_s >= big.oldest_ready_age_s);
    assert!(
        by("graveyard").oldest_waiting_age_s.is_none(),
        "no job waits"
    );
    let busy = by("busy");
    assert_eq!(busy.running, 1);
    assert_eq!(busy.near_expiry, 1, "a 5 s lease is within 10 s of its end");
    assert_eq!(busy.pending, Count { n: 1, more: false });
    assert_eq!(by("graveyard").dead, Count { n: 3, more: false });
    assert!(by("quiet").paused);
    assert_eq!(by("served").workers, 1);
    let o = s.overview(100).await.unwrap();
    assert_eq!(
        o.queues.iter().find(|q| q.queue == "big").unwrap().pending,
        Count { n: 6, more: false }
    );
    assert!(matches!(s.overview(0).await, Err(StoreError::Invalid(_))));

    let g = s.dead_groups(10).await.unwrap();
    assert_eq!(g.len(), 2, "{g:?}");
    assert_eq!((g[0].error.as_str(), g[0].count), ("boom", 2));
    assert_eq!(g[1].error, "other <b>error</b>", "stored as given");
    assert_eq!(g[0].kind, "conformance");
}

/// Bulk retry replays dead jobs and runs scheduled ones now; bulk cancel cancels pending
/// and flags running ones; ids the action leaves alone are counted, not errors.
pub async fn bulk_actions_and_run_now<H: Harness>(h: &H) {
    let s = h.store();
    put(s, job("b")).await;
    put(s, job("b")).await;
    let d1 = kill(s, "b", "x").await;
    let d2 = kill(s, "b", "x").await;
    let later = put(s, job("b").delay(Duration::from_secs(3600))).await;
    let done = put(s, job("c")).await;
    let c = claim(s, "c", 1, "w", LONG).await;
    s.complete_many("w", &[c[0].lease()]).await.unwrap();

    let r = s
        .bulk(&[d1, d2, later, done, JobId(i64::MAX)], BulkAction::Retry)
        .await
        .unwrap();
    assert_eq!(
        r,
        BulkReport {
            changed: 3,
            skipped: 2
        }
    );
    let now = h.now().await;
    for id in [d1, d2, later] {
        let j = get(s, id).await;
        assert_eq!(j.state, JobState::Pending);
        assert!(j.run_at <= now, "due now");
    }
    assert_eq!(get(s, d1).await.max_attempts, get(s, d1).await.attempt + 1);
    assert!(matches!(
        s.run_now(done).await,
        Err(StoreError::WrongState { .. })
    ));

    let running = claim(s, "b", 1, "w", LONG).await[0].id;
    let r = s
        .bulk(&[d1, d2, later, running, done], BulkAction::Cancel)
        .await
        .unwrap();
    assert_eq!(r.changed, 4, "{r:?}");
    assert_eq!(r.skipped, 1);
    let j = get(s, running).await;
    assert_eq!(j.state, JobState::Running, "a running job is only flagged");
    assert!(j.cancel_requested_at.is_some());
    // A walk over cancelled jobs in finished order that replays each page as it goes (what
    // a bulk retry of "all matching" does) keeps its place and visits every job once.
    let mut walk = Vec::new();
    for _ in 0..5 {
        let id = put(s, job("walk")).await;
        s.cancel(id).await.unwrap();
        walk.push(id);
    }
    let mut q = JobQuery {
        queue: Some("walk".into()),
        state: Some(JobState::Cancelled),
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let p = s.search(&q).await.unwrap();
        assert!(p.jobs.iter().all(|j| j.state == JobState::Cancelled));
        seen.extend(ids(&p));
        s.bulk(&ids(&p), BulkAction::Retry).await.unwrap();
        match p.next {
            Some(n) => {
                q.before = Some(n);
                q.before_finished_at = p.next_finished_at;
                assert!(
                    q.before_finished_at.is_some(),
                    "a finished-order page carries its time"
                );
            }
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, walk, "every cancelled job visited once");
    let too_many: Vec<JobId> = (0..=docket_core::inspect::MAX_PAGE).map(JobId).collect();
    assert!(matches!(
        s.bulk(&too_many, BulkAction::Retry).await,
        Err(StoreError::Invalid(_))
    ));
}

/// Samples from several workers add up per queue and minute; the audit log keeps actions
/// newest first and refuses bad entries.
pub async fn samples_add_up_and_the_audit_log_keeps_actions<H: Harness>(h: &H) {
    let s = h.store();
    let now = h.now().await;
    let minute = now
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap();
    // Histograms add up bucket by bucket across reports: n waits of 10 ms and one of 2 s,
    // n runs of 300 ms.
    let sample = |n: i64| {
        let mut wait_hist = vec![0; docket_core::histogram::BUCKETS];
        wait_hist[docket_core::histogram::bucket(10)] = n;
        wait_hist[docket_core::histogram::bucket(2_000)] = 1;
        let mut run_hist = vec![0; docket_core::histogram::BUCKETS];
        run_hist[docket_core::histogram::bucket(300)] = n;
        Sample {
            queue: "q".into(),
            minute,
            succeeded: n,
            failed: 1,
            wait_ms_sum: 10 * n,
            wait_count: n,
            run_ms_sum: 5,
            wait_hist,
            run_hist,
        }
    };
    s.record_samples(&[sample(3)]).await.unwrap();
    s.record_samples(&[sample(4)]).await.unwrap();
    let got = s.samples(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (
            got[0].succeeded,
            got[0].failed,
            got[0].wait_ms_sum,
            got[0].wait_count
        ),
        (7, 2, 70, 7)
    );
    let q = |h: &[i64], p| docket_core::histogram::quantile(h, p);
    assert_eq!(got[0].wait_hist[docket_core::histogram::bucket(10)], 7);
    assert_eq!(got[0].wait_hist[docket_core::histogram::bucket(2_000)], 2);
    assert_eq!(q(&got[0].wait_hist, 0.5), Some(10.0));
    assert_eq!(
        q(&got[0].wait_hist, 0.95),
        Some(2_500.0),
        "the slow tail shows"
    );
    assert_eq!(q(&got[0].run_hist, 0.99), Some(500.0));
    let mut bad = sample(1);
    bad.queue = "bad queue".into();
    assert!(matches!(
        s.record_samples(&[bad]).await,
        Err(StoreError::Invalid(_))
    ));

    for i in 0..3 {
        s.audit(&AuditEntry {
            at: None,
            actor: "alice".into(),
            action: "job.retry".into(),
            target: format!("job {i}"),
            detail: json!({"n": i}),
        })
        .await
        .unwrap();
    }
    let log = s.audit_log(2).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].target, "job 2");
    assert!(log[0].at.is_some());
    let bad = AuditEntry {
        at: None,
        actor: String::new(),
        action: "x".into(),
        target: "y".into(),
        detail: json!({}),
    };
    assert!(matches!(s.audit(&bad).await, Err(StoreError::Invalid(_))));
}

use chrono::Timelike;

/// The errors page's read: retrying jobs (pending with a history) and dead ones, each with
/// the first and last entries of its history; jobs that never failed are not in it; and one
/// cause spread over e-mail addresses is one group.
pub async fn errored_jobs_are_retrying_and_dead_ones_with_their_histories<H: Harness>(h: &H) {
    let s = h.store();
    let ok = put(s, job("e")).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(put(s, job("e").max_attempts(if i == 2 { 1 } else { 5 })).await);
    }
    let got = claim(s, "e", 10, "w", LONG).await;
    let fails: Vec<Failure> = got
        .iter()
        .filter(|c| c.id != ok)
        .map(|c| Failure {
            lease: lease(c),
            class: FailureClass::Retry,
            message: format!("no card for user{}@example.com", c.id.0),
            retry_in: Some(Duration::from_secs(3600)),
        })
        .collect();
    s.fail_many("w", &fails).await.unwrap();
    let rows = s.errored_jobs(100).await.unwrap();
    let mut seen: Vec<(JobId, JobState)> = rows.iter().map(|r| (r.id, r.state)).collect();
    seen.sort_by_key(|(id, _)| *id);
    assert_eq!(
        seen,
        vec![
            (ids[0], JobState::Pending),
            (ids[1], JobState::Pending),
            (ids[2], JobState::Dead)
        ],
        "retrying and dead, and not the job that never failed"
    );
    for r in &rows {
        let last = r.last.as_ref().expect("a last error");
        assert_eq!(
            last.message,
            format!("no card for user{}@example.com", r.id.0)
        );
        assert_eq!(
            r.first.as_ref().unwrap().at,
            last.at,
            "one entry: first is last"
        );
        assert_eq!((r.queue.as_str(), r.kind.as_str()), ("e", "conformance"));
    }
    let groups = docket_core::error_groups::group(&rows);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].fingerprint, "no card for <email>");
    assert_eq!((groups[0].retrying, groups[0].dead), (2, 1));
    assert_eq!(s.errored_jobs(1).await.unwrap().len(), 2, "per state");
}

/// The job list's `retrying` and `scheduled` filters: pending jobs with an error history,
/// and pending jobs not due yet — each alone, and neither the other's nor a running job.
pub async fn search_finds_retrying_and_scheduled_jobs<H: Harness>(h: &H) {
    let s = h.store();
    let plain = put(s, job("parts")).await;
    let later = put(
        s,
        job("parts").run_at(h.now().await + chrono::Duration::hours(2)),
    )
    .await;
    put(s, job("parts")).await;
    let c = claim(s, "parts", 2, "parts", LONG).await;
    let failed = c[0].id;
    let out = s
        .fail_many(
            "parts",
            &[Failure {
                lease: c[0].lease(),
                class: FailureClass::Retry,
                message: "again".into(),
                // Due at once: retrying, not scheduled.
                retry_in: Some(Duration::ZERO),
            }],
        )
        .await
        .unwrap();
    assert!(out.lost.is_empty());
    let running = c[1].id;
    let find = |state: &'static str| async move {
        let q = JobQuery::from_fields(|k| match k {
            "state" => Some(state),
            "queue" => Some("parts"),
            _ => None,
        })
        .unwrap();
        let mut got = ids(&s.search(&q).await.unwrap());
        got.sort();
        got
    };
    assert_eq!(find("retrying").await, vec![failed]);
    assert_eq!(find("scheduled").await, vec![later]);
    let pending = find("pending").await;
    assert!(pending.contains(&plain) && pending.contains(&failed) && pending.contains(&later));
    assert!(!pending.contains(&running));
}
