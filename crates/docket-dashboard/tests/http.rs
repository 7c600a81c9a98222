//! The dashboard over HTTP against a real PostgreSQL: every page renders and escapes hostile
//! job data, actions need the CSRF token and leave an audit entry, read-only refuses them,
//! authentication closes it, a bulk action walks a whole filter in batches, and it mounts
//! under a path of its own.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_dashboard::{Auth, Options};
use docket_testkit::TestDb;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_renders_and_escapes_hostile_job_data() {
    let db = TestDb::new().await;
    let s = &db.store;
    let evil = "<script>alert(1)</script>";
    let j = s
        .enqueue(
            &NewJob::new("mail", "send", json!({"html": evil, "user_id": 42}))
                .metadata(json!({"x": "<img src=x onerror=alert(2)>"}))
                .ordering_key("<b>key</b>"),
        )
        .await
        .unwrap()
        .id;
    kill_all(s, "mail", "<script>alert(3)</script>").await;
    let p = s
        .enqueue(&NewJob::new("mail", "send", json!({})).delay(Duration::from_secs(600)))
        .await
        .unwrap()
        .id;
    s.upsert_periodic(&Periodic::new(
        "nightly",
        "0 3 * * *",
        "mail",
        "send",
        json!({}),
    ))
    .await
    .unwrap();
    // A succeeded job whose output is hostile too (and holds a terminal escape).
    let o = s
        .enqueue(&NewJob::new("done", "send", json!({})))
        .await
        .unwrap()
        .id;
    let c = s
        .claim(&ClaimRequest {
            queue: "done".into(),
            limit: 1,
            owner: "w".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let out = s
        .complete_outputs(
            "w",
            &[Output {
                lease: c[0].lease(),
                value: json!({"receipt": "<b>key</b>", "esc": "\u{9b}2J"}),
            }],
        )
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    // A workflow whose names are hostile.
    let wf = s
        .enqueue_workflow(&docket_core::workflow::Graph {
            name: "<script>alert(9)</script>".into(),
            nodes: vec![
                docket_core::workflow::Node {
                    name: "<b>key</b>".into(),
                    queue: "wfq".into(),
                    kind: "send".into(),
                    args: json!({}),
                    metadata: json!({}),
                    priority: 0,
                    max_attempts: 3,
                    backoff_base_ms: None,
                    backoff_cap_ms: None,
                    after: vec![],
                },
                docket_core::workflow::Node {
                    name: "<img src=x>".into(),
                    queue: "wfq".into(),
                    kind: "send".into(),
                    args: json!({}),
                    metadata: json!({}),
                    priority: 0,
                    max_attempts: 3,
                    backoff_base_ms: None,
                    backoff_cap_ms: None,
                    after: vec!["<b>key</b>".into()],
                },
            ],
        })
        .await
        .unwrap();
    // A running job with hostile progress.
    let running = s
        .enqueue(&NewJob::new("prog", "send", json!({})))
        .await
        .unwrap()
        .id;
    let c = s
        .claim(&ClaimRequest {
            queue: "prog".into(),
            limit: 1,
            owner: "w".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let out = s
        .progress_many(
            "w",
            &[Progress {
                lease: c[0].lease(),
                percent: 42.0,
                message: "<b>key</b> \u{202e}gnp.exe".into(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    let rec = s
        .record_step(
            "w",
            c[0].lease(),
            "<i>charge</i>",
            &json!({"id": "<script>x"}),
        )
        .await
        .unwrap();
    assert!(rec.written);
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    for path in [
        "/".to_string(),
        "/jobs".into(),
        format!("/jobs/{o}"),
        format!("/jobs/{running}"),
        format!("/jobs/{j}"),
        format!("/jobs/{p}"),
        "/jobs?field=args.user_id%20%3D%2042".into(),
        "/dead".into(),
        "/errors".into(),
        "/errors?sort=count".into(),
        "/keys".into(),
        "/errors/group?queue=mail&kind=send&fp=x".into(),
        "/workers".into(),
        "/cron".into(),
        "/audit".into(),
        "/workflows".into(),
        format!("/workflows/{}", wf.id),
    ] {
        let r = c.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.headers().contains_key("server-timing"), "{path}");
        let body = r.text().await.unwrap();
        for raw in ["<script>alert", "<img src=x", "<b>key</b>"] {
            assert!(!body.contains(raw), "{path} renders {raw:?} unescaped");
        }
        if path == format!("/jobs/{j}") {
            assert!(
                body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "args shown, escaped"
            );
            assert!(
                body.contains("&lt;script&gt;alert(3)"),
                "the error shown, escaped"
            );
        }
        if path == format!("/workflows/{}", wf.id) {
            assert!(body.contains("<svg id=\"graph\""), "the graph is drawn");
            assert!(
                body.contains("&lt;b&gt;key&lt;/b&gt;"),
                "a node's name, escaped"
            );
            assert!(body.contains("waiting"), "the second node waits");
            assert!(
                body.contains(&format!("/jobs/{}", wf.job("<b>key</b>").unwrap().0)),
                "a node links to its job"
            );
        }
        if path == "/workflows" {
            assert!(body.contains("&lt;script&gt;alert(9)"), "the name, escaped");
        }
        if path == format!("/jobs/{o}") {
            assert!(body.contains("<h2>Output</h2>"), "the output is shown");
            assert!(body.contains("&lt;b&gt;key&lt;/b&gt;"), "escaped");
            assert!(!body.contains('\u{9b}'), "no C1 control reaches the page");
        }
        if path == format!("/jobs/{running}") {
            assert!(body.contains("42.0%"), "progress is shown");
            assert!(body.contains("<h2>Steps</h2>"), "steps are shown");
            assert!(
                body.contains("&lt;i&gt;charge&lt;/i&gt;"),
                "a step's name, escaped"
            );
            assert!(
                !body.contains('\u{202e}'),
                "no bidi override reaches the page"
            );
        }
        if path == format!("/jobs/{p}") {
            assert!(!body.contains("<h2>Output</h2>"), "a pending job has none");
            assert!(body.contains("scheduled for"), "why names the schedule");
            assert!(body.contains("Run now"));
        }
        if path.contains("field=") {
            assert!(body.contains(&format!("data-id=\"{j}\"")));
            assert!(
                !body.contains(&format!("data-id=\"{p}\"")),
                "the filter filters"
            );
        }
        if path == "/cron" {
            assert!(body.contains("nightly"));
        }
    }
    // A fragment request (the live refresh) is the main content alone.
    let frag = c
        .get(format!("{base}/"))
        .header("x-docket-fragment", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        frag.starts_with("<h1>Queues</h1>"),
        "{}",
        &frag[..60.min(frag.len())]
    );
    // Bad input is a clear 400, not a panic or a partial search.
    for bad in [
        "/jobs?state=nope",
        "/jobs?field=user_id",
        "/jobs?limit=5000",
        "/jobs/abc",
    ] {
        let r = c.get(format!("{base}{bad}")).send().await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
    // A refused filter keeps the form with what was typed, above the reason.
    let r = c
        .get(format!("{base}/jobs?queue=mail&field=user_id"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("name=\"queue\" value=\"mail\""), "{text}");
    assert!(text.contains("name=\"field\" value=\"user_id\""), "{text}");
    assert!(text.contains("id=\"filter-error\""), "{text}");
    let r = c.get(format!("{base}/jobs/999999")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("completed with delete") && text.contains("retention"),
        "a missing job's page says why it may be gone: {text}"
    );
    let js = c
        .get(format!("{base}/assets/live.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.text().await.unwrap().contains("EventSource"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_need_the_csrf_token_and_leave_an_audit_entry() {
    let db = TestDb::new().await;
    let s = &db.store;
    s.enqueue(&NewJob::new("q", "k", json!({}))).await.unwrap();
    let dead = kill_all(s, "q", "boom").await[0];
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    let page = c
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let token = csrf_of(&page);
    let paused = || async {
        s.queue_controls()
            .await
            .unwrap()
            .iter()
            .any(|q| q.paused_at.is_some())
    };

    let r = post(&c, format!("{base}/queues/q/pause"), "").await;
    assert_eq!(r.status(), 403, "no token");
    let r = c
        .post(format!("{base}/queues/q/pause"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("_csrf={}", "0".repeat(64)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "wrong token");
    let r = c
        .post(format!("{base}/queues/q/pause"))
        .header("origin", "http://evil.example")
        .body(format!("_csrf={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "another origin");
    let r = c
        .post(format!("{base}/queues/q/pause"))
        .header("sec-fetch-site", "cross-site")
        .body(format!("_csrf={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a cross-site request");
    assert!(!paused().await, "nothing refused was written");
    assert!(s.audit_log(10).await.unwrap().is_empty());

    let r = post(
        &c,
        format!("{base}/queues/q/pause"),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert!(paused().await);
    let r = post(
        &c,
        format!("{base}/queues/q/limits"),
        format!("_csrf={token}&max_running=3&rate_limit=10&rate_period=1s"),
    )
    .await;
    assert_eq!(r.status(), 303);
    let ctl = s.queue_controls().await.unwrap();
    assert_eq!(ctl[0].limits.max_running, Some(3));
    assert_eq!(ctl[0].limits.rate.unwrap().limit, 10);
    let r = post(
        &c,
        format!("{base}/queues/q/limits"),
        format!("_csrf={token}&max_running=-1"),
    )
    .await;
    assert_eq!(r.status(), 400, "a bad limit");
    assert_eq!(
        s.queue_controls().await.unwrap()[0].limits.max_running,
        Some(3)
    );

    let r = post(
        &c,
        format!("{base}/jobs/{dead}/retry"),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert_eq!(s.get(dead).await.unwrap().state, JobState::Pending);
    let r = post(
        &c,
        format!("{base}/jobs/{dead}/skip"),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 409, "skip applies to dead jobs only");

    // A signal: its payload must be JSON; sent, it is kept for the job's wait.
    let r = post(
        &c,
        format!("{base}/jobs/{dead}/signal"),
        format!("_csrf={token}&name=approved&payload=%7Bnot%20json"),
    )
    .await;
    assert_eq!(r.status(), 400, "a payload that is not JSON");
    assert_eq!(s.job_signal(dead, "approved").await.unwrap(), None);
    let r = post(
        &c,
        format!("{base}/jobs/{dead}/signal"),
        format!("_csrf={token}&name=approved&payload=%7B%22by%22%3A%22ann%22%7D"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        s.job_signal(dead, "approved").await.unwrap(),
        Some(json!({"by": "ann"}))
    );

    let log = s.audit_log(10).await.unwrap();
    let actions: Vec<&str> = log.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        vec!["job.signal", "job.retry", "queue.limits", "queue.pause"]
    );
    assert!(log.iter().all(|e| e.actor == "local"));
    assert_eq!(log[0].target, format!("job {dead}"));
    assert_eq!(log[0].detail, json!({"name": "approved"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_hides_every_action_and_refuses_them() {
    let db = TestDb::new().await;
    let s = &db.store;
    s.enqueue(&NewJob::new("q", "k", json!({}))).await.unwrap();
    let dead = kill_all(s, "q", "boom").await[0];
    let opts = Options {
        read_only: true,
        ..Default::default()
    };
    let base = serve(s.clone(), opts).await;
    let c = client();
    for path in [
        "/".to_string(),
        "/jobs".into(),
        format!("/jobs/{dead}"),
        "/dead".into(),
    ] {
        let body = c
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!body.contains("method=\"post\""), "{path} shows a form");
        assert!(body.contains("read-only"));
    }
    for path in [
        "/queues/q/pause".to_string(),
        format!("/jobs/{dead}/retry"),
        "/bulk".into(),
    ] {
        let r = post(&c, format!("{base}{path}"), "").await;
        assert!(r.status().is_client_error(), "{path}: {}", r.status());
    }
    assert_eq!(s.get(dead).await.unwrap().state, JobState::Dead);
    assert!(s.queue_controls().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_closes_the_dashboard() {
    let db = TestDb::new().await;
    let c = client();
    let token = "t0ken-for-the-test-0123456789";
    let base = serve(
        db.store.clone(),
        Options {
            auth: Auth::Token(token.into()),
            ..Default::default()
        },
    )
    .await;
    let r = c.get(format!("{base}/jobs")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    let r = c.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 303, "metrics are behind the same door");
    let r = c
        .get(format!("{base}/jobs"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let r = c
        .get(format!("{base}/jobs"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post(&c, format!("{base}/login"), "token=wrong").await;
    assert_eq!(r.status(), 401);
    let r = post(&c, format!("{base}/login"), format!("token={token}")).await;
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let r = c
        .get(format!("{base}/jobs"))
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let base = serve(
        db.store.clone(),
        Options {
            auth: Auth::Basic {
                user: "ops".into(),
                password: "correct horse".into(),
            },
            ..Default::default()
        },
    )
    .await;
    let r = c.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic"));
    let r = c
        .get(format!("{base}/"))
        .basic_auth("ops", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .get(format!("{base}/"))
        .basic_auth("ops", Some("correct horse"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let anywhere: SocketAddr = "0.0.0.0:8080".parse().unwrap();
    assert!(docket_dashboard::check_exposure(anywhere, &Auth::Open).is_err());
    assert!(docket_dashboard::check_exposure(anywhere, &Auth::Token(token.into())).is_ok());
    assert!(
        docket_dashboard::check_exposure("127.0.0.1:8080".parse().unwrap(), &Auth::Open).is_ok()
    );
    let l = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = docket_dashboard::serve(l, db.store.clone(), Options::default(), async {}).await;
    assert!(
        matches!(
            refused,
            Err(docket_dashboard::DashboardError::OpenBeyondLoopback(_))
        ),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_walks_everything_a_filter_matches_in_batches() {
    let db = TestDb::new().await;
    let s = &db.store;
    let jobs: Vec<NewJob> = (0..450)
        .map(|i| NewJob::new("b", "big", json!({"i": i})))
        .collect();
    s.enqueue_many(&jobs).await.unwrap();
    kill_all(s, "b", "flaky upstream").await;
    s.enqueue(&NewJob::new("b", "other", json!({})))
        .await
        .unwrap();
    let other = kill_all(s, "b", "flaky upstream").await[0];
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    let page = c
        .get(format!("{base}/dead"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("flaky upstream") && page.contains(">450<"),
        "the group and its size"
    );
    let token = csrf_of(&page);
    let filter = "kind=big&state=dead&error=flaky%20upstream";
    // The first post only asks: the count it will touch, and nothing changed.
    let r = post(
        &c,
        format!("{base}/bulk"),
        format!("_csrf={token}&op=retry%3Amatching&{filter}"),
    )
    .await;
    assert_eq!(r.status(), 200);
    let ask = r.text().await.unwrap();
    assert!(ask.contains("Retry <strong>450 jobs</strong>"), "{ask}");
    assert!(ask.contains(r#"name="confirm" value="450""#), "{ask}");
    assert_eq!(s.get(other).await.unwrap().state, JobState::Dead);
    let dead_now = s
        .search(&JobQuery {
            kind: Some("big".into()),
            state: Some(JobState::Dead),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(dead_now.jobs.len(), 450, "asking changed nothing");
    let r = post(
        &c,
        format!("{base}/bulk"),
        format!("_csrf={token}&op=retry%3Amatching&confirm=450&{filter}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    let task = r.headers()["location"].to_str().unwrap().to_string();
    assert!(task.starts_with("/tasks/"), "{task}");
    // Waits on the task's own progress report (the same the page shows), not on time.
    let progress = || async {
        c.get(format!("{base}{task}"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    };
    docket_testkit::eventually(Duration::from_secs(30), "the bulk task ends", || async {
        progress().await["done"] == true
    })
    .await;
    let done = progress().await;
    assert_eq!(done["done"], true, "{done}");
    assert_eq!(done["changed"], 450, "{done}");
    assert_eq!(done["scanned"], 450);
    let pending = s
        .search(&JobQuery {
            kind: Some("big".into()),
            state: Some(JobState::Pending),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(pending.jobs.len(), 450);
    assert_eq!(
        s.get(other).await.unwrap().state,
        JobState::Dead,
        "outside the filter"
    );
    let log = s.audit_log(1).await.unwrap();
    assert_eq!(log[0].action, "bulk.retry");
    assert_eq!(log[0].detail["changed"], 450);

    // The selection: only the ids given.
    let ids = &pending.jobs[..2];
    let body = format!(
        "_csrf={token}&op=cancel%3Aselected&ids={}&ids={}",
        ids[0].id, ids[1].id
    );
    let r = post(&c, format!("{base}/bulk"), body.clone()).await;
    assert_eq!(r.status(), 200);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("Cancel <strong>2 jobs</strong>"));
    assert_eq!(s.get(ids[0].id).await.unwrap().state, JobState::Pending);
    let r = post(&c, format!("{base}/bulk"), format!("{body}&confirm=2")).await;
    assert_eq!(r.status(), 303);
    for j in ids {
        assert_eq!(s.get(j.id).await.unwrap().state, JobState::Cancelled);
    }
    let r = post(
        &c,
        format!("{base}/bulk"),
        format!("_csrf={token}&op=explode%3Aselected&ids=1"),
    )
    .await;
    assert_eq!(r.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_mounts_under_a_path_of_the_application() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap();
    let opts = Options {
        base_path: "/admin/jobs".into(),
        ..Default::default()
    };
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "the application" }))
        .nest(
            "/admin/jobs",
            docket_dashboard::router(db.store.clone(), opts).unwrap(),
        );
    let base = serve_router(app).await;
    let c = client();
    assert_eq!(
        c.get(format!("{base}/"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "the application"
    );
    let body = c
        .get(format!("{base}/admin/jobs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("href=\"/admin/jobs/jobs?queue=q\""),
        "links carry the base path"
    );
    let r = c
        .get(format!("{base}/admin/jobs/assets/style.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(docket_dashboard::router(
        db.store.clone(),
        Options {
            base_path: "admin/".into(),
            ..Default::default()
        }
    )
    .is_err());
}

/// "Is anything stuck?" in one look: a queue with ready work and no live worker, and one
/// whose oldest waiting job (held by its key here) is older than `stuck_after`, are flagged
/// in words; a paused queue with no worker and a fresh queue with a worker are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_flags_what_is_stuck() {
    let db = TestDb::new().await;
    let s = &db.store;
    for q in ["orphan", "served", "held", "resting"] {
        s.enqueue(&NewJob::new(q, "k", json!({}))).await.unwrap();
    }
    let held = s
        .enqueue(&NewJob::new("held", "k", json!({})).ordering_key("tenant-1"))
        .await
        .unwrap()
        .id;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET blocked = true, run_at = now() - interval '10 minutes' \
         WHERE id = {held}"
    ))
    .await;
    s.pause_queue("resting").await.unwrap();
    s.worker_beat(&beat("w-1", &["served", "held"]), Duration::from_secs(600))
        .await
        .unwrap();
    let opts = Options {
        stuck_after: Duration::from_secs(60),
        ..Default::default()
    };
    let page = page_text(&serve(s.clone(), opts).await, "/").await;
    let row = |q: &str| section(&page, &format!("data-queue=\"{q}\""), "</tr>");
    assert!(
        row("orphan").contains("no live worker"),
        "{}",
        row("orphan")
    );
    assert!(
        !row("served").contains("class=\"flag\""),
        "{}",
        row("served")
    );
    assert!(
        !row("resting").contains("no live worker"),
        "{}",
        row("resting")
    );
    let h = row("held");
    assert!(h.contains("waiting 10m"), "{h}");
    assert!(!h.contains("no live worker"), "{h}");
}

/// The database says `running` for a job a worker executes and for one it claimed ahead of a
/// free slot: the queues page splits each queue's running jobs by the live workers' reports
/// (a gone worker's last report counts for nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_tells_executing_from_buffered_jobs() {
    let db = TestDb::new().await;
    let s = &db.store;
    for _ in 0..5 {
        s.enqueue(&NewJob::new("mail", "k", json!({})))
            .await
            .unwrap();
    }
    s.enqueue(&NewJob::new("sms", "k", json!({})))
        .await
        .unwrap();
    assert_eq!(claim_ready(s, "mail", 10).await.len(), 5);
    assert_eq!(claim_ready(s, "sms", 10).await.len(), 1);
    let ttl = Duration::from_secs(600);
    let mut a = beat("w-a", &["mail", "sms"]);
    a.buffered_by_queue = vec![2, 0];
    a.buffered = 2;
    let mut b = beat("w-b", &["mail"]);
    b.buffered_by_queue = vec![1];
    let mut gone = beat("w-gone", &["mail"]);
    gone.buffered_by_queue = vec![4];
    for w in [&a, &b, &gone] {
        s.worker_beat(w, ttl).await.unwrap();
    }
    s.worker_gone("w-gone").await.unwrap();
    let page = page_text(&serve(s.clone(), Options::default()).await, "/").await;
    let row = |q: &str| section(&page, &format!("data-queue=\"{q}\""), "</tr>");
    let mail = row("mail");
    assert!(mail.contains("2 exec · 3 buf"), "{mail}");
    let sms = row("sms");
    assert!(sms.contains("1 exec · 0 buf"), "{sms}");
    let card = section(&page, "id=\"running\"", "</div>");
    assert!(card.contains("6: 3 executing, 3 buffered"), "{card}");
    // Per worker and queue on the workers page.
    let page = page_text(&serve(s.clone(), Options::default()).await, "/workers").await;
    let live = section(&page, "id=\"workers\"", "</table>");
    let wa = section(&live, "data-owner=\"w-a\"", "</tr>");
    assert!(wa.contains("(2 buffered)</small>, sms</td>"), "{wa}");
    let wb = section(&live, "data-owner=\"w-b\"", "</tr>");
    assert!(wb.contains("(1 buffered)"), "{wb}");
}

/// "Which error is new?": a cause spread over e-mail addresses and customer ids is one group
/// counting its retrying and dead jobs, newest cause first, its text escaped; the group's
/// page lists its jobs and its retry goes through the count confirmation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_errors_page_groups_retrying_and_dead_jobs_by_fingerprint() {
    let db = TestDb::new().await;
    let s = &db.store;
    // An old cause: dead, first seen an hour ago.
    s.enqueue(&NewJob::new("billing", "charge", json!({})))
        .await
        .unwrap();
    let old = kill_all(s, "billing", "gateway <b>timeout</b> after 30s").await;
    db.exec(
        "UPDATE {schema}.jobs SET errors = jsonb_set(errors, '{0,at}', \
         to_jsonb(now() - interval '1 hour')) WHERE queue = 'billing'",
    )
    .await;
    // A new cause: retrying for three customers, dead for one.
    for i in 0..4 {
        let job = NewJob::new("mail", "send", json!({"i": i}));
        s.enqueue(&job.max_attempts(if i == 3 { 1 } else { 5 }))
            .await
            .unwrap();
    }
    let c = claim_ready(s, "mail", 10).await;
    fail_each(s, &c, FailureClass::Retry, |j| {
        format!(
            "no card for customer {} (user{}@example.com)",
            1000 + j.id.0,
            j.id.0
        )
    })
    .await;

    let base = serve(s.clone(), Options::default()).await;
    let page = page_text(&base, "/errors").await;
    let new_at = page
        .find("no card for customer &lt;n&gt; (&lt;email&gt;)")
        .expect("the new cause, normalised and escaped");
    let old_at = page
        .find("gateway &lt;b&gt;timeout&lt;/b&gt; after &lt;n&gt;s")
        .expect("the old cause, escaped");
    assert!(new_at < old_at, "the newest cause first");
    assert!(!page.contains("<b>timeout"), "job data is escaped");
    let row = section(
        page[..new_at].rfind("<tr").map_or("", |i| &page[i..]),
        "<tr",
        "</tr>",
    );
    assert!(
        row.contains(">3<") && row.contains(">1<"),
        "3 retrying, 1 dead: {row}"
    );
    assert!(row.contains("4 jobs"), "{row}");

    // The group's jobs, and retrying them confirms the count first.
    let href = row
        .split("href=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .replace("&amp;", "&");
    let g = page_text(&base, &href).await;
    assert!(g.contains("4 (3 retrying, 1 dead)"), "{g}");
    for j in &c {
        assert!(
            g.contains(&format!("/jobs/{}\"", j.id.0)),
            "job {} listed",
            j.id.0
        );
    }
    assert!(
        !g.contains(&format!("/jobs/{}\"", old[0].0)),
        "not the other cause's"
    );
    let ids: String = c.iter().map(|j| format!("&ids={}", j.id.0)).collect();
    let body = format!("_csrf={}&op=retry%3Aselected{ids}", csrf_of(&g));
    let r = post(&client(), format!("{base}/bulk"), body).await;
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("Retry <strong>4 jobs</strong>"));
}

/// "Which worker is dead?": a worker that vanished (its report expired) and one that stopped
/// stay on the workers page for an hour, each with how it ended, and the leader's lease is
/// shown with its holder gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_page_shows_gone_workers_and_a_gone_leader() {
    let db = TestDb::new().await;
    let s = &db.store;
    for o in ["w-killed", "w-stopped", "w-live"] {
        s.worker_beat(&beat(o, &["mail"]), Duration::from_secs(600))
            .await
            .unwrap();
    }
    assert!(s
        .leader_try("w-killed", Duration::from_secs(60))
        .await
        .unwrap());
    db.exec(
        "UPDATE {schema}.workers SET seen_at = now() - interval '10 minutes', \
         expires_at = now() - interval '5 minutes' WHERE owner = 'w-killed'",
    )
    .await;
    db.exec("UPDATE {schema}.leader SET expires_at = now() - interval '4 minutes'")
        .await;
    s.worker_gone("w-stopped").await.unwrap();
    let page = page_text(&serve(s.clone(), Options::default()).await, "/workers").await;
    let live = section(&page, "id=\"workers\"", "</table>");
    assert!(
        live.contains("w-live") && !live.contains("w-killed") && !live.contains("w-stopped"),
        "{live}"
    );
    let gone = section(&page, "id=\"gone\"", "</table>");
    let killed = section(&gone, "data-owner=\"w-killed\"", "</tr>");
    assert!(killed.contains("no report"), "{killed}");
    assert!(
        killed.contains("5m 0s ago") || killed.contains("4m 59s ago"),
        "{killed}"
    );
    let stopped = section(&gone, "data-owner=\"w-stopped\"", "</tr>");
    assert!(stopped.contains("stopped"), "{stopped}");
    let leader = section(&page, "id=\"leader\"", "</p>");
    assert!(
        leader.contains("w-killed")
            && leader.contains("ran out")
            && leader.contains("its worker is gone"),
        "{leader}"
    );
}

/// "What is the p95 wait?": read from the workers' per-minute histograms (not a mean), over
/// the complete minutes of the last hour — the current minute, still filling, is left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_shows_wait_percentiles_from_histograms() {
    let db = TestDb::new().await;
    let s = &db.store;
    s.enqueue(&NewJob::new("mail", "send", json!({})))
        .await
        .unwrap();
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let this_minute =
        chrono::DurationRound::duration_trunc(now, chrono::Duration::minutes(1)).unwrap();
    let hist = |pairs: &[(i64, i64)]| {
        let mut h = vec![0; docket_core::histogram::BUCKETS];
        for &(ms, n) in pairs {
            h[docket_core::histogram::bucket(ms)] += n;
        }
        h
    };
    let sample = |minute, wait_hist: Vec<i64>| Sample {
        queue: "mail".into(),
        minute,
        succeeded: 100,
        failed: 0,
        wait_ms_sum: 0,
        wait_count: 100,
        run_ms_sum: 0,
        wait_hist,
        run_hist: hist(&[(300, 100)]),
    };
    s.record_samples(&[
        sample(
            this_minute - chrono::Duration::minutes(1),
            hist(&[(10, 90), (2_000, 10)]),
        ),
        // The minute still filling: a burst of very slow waits that must not show.
        sample(this_minute, hist(&[(600_000, 1_000)])),
    ])
    .await
    .unwrap();
    let page = page_text(&serve(s.clone(), Options::default()).await, "/").await;
    let wait = section(&page, "id=\"wait-percentiles\"", "</div>");
    assert!(wait.contains("≤ 10ms / ≤ 2.5s / ≤ 2.5s"), "{wait}");
    let run = section(&page, "id=\"run-percentiles\"", "</div>");
    assert!(run.contains("≤ 500ms / ≤ 500ms / ≤ 500ms"), "{run}");
    let row = section(&page, "data-queue=\"mail\"", "</tr>");
    assert!(row.contains("≤ 10ms / ≤ 2.5s / ≤ 2.5s"), "{row}");
    assert!(
        !page.contains("&gt; 1 min"),
        "the current minute is left out"
    );
}

/// A page of ordering keys held by a dead head: the key, its head one click away, how many
/// wait behind it, and skip (which asks first) lets them run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_page_lists_keys_held_by_a_dead_head() {
    let db = TestDb::new().await;
    let s = &db.store;
    for _ in 0..3 {
        s.enqueue(&NewJob::new("o", "k", json!({})).ordering_key("order-9"))
            .await
            .unwrap();
    }
    let c = claim_ready(s, "o", 1).await;
    fail_each(s, &c, FailureClass::Discard, |_| "bad order".into()).await;
    let base = serve(s.clone(), Options::default()).await;
    let row = section(
        &page_text(&base, "/keys").await,
        "data-key=\"order-9\"",
        "</tr>",
    );
    assert!(row.contains(&format!("/jobs/{}\"", c[0].id.0)), "{row}");
    assert!(row.contains(">2<"), "two wait behind it: {row}");
    assert!(row.contains("data-confirm"), "skip asks first: {row}");
    let job = page_text(&base, &format!("/jobs/{}", c[0].id.0)).await;
    assert!(
        job.contains("/jobs?ordering_key=order-9"),
        "the job links its key"
    );
}

/// "Which queue is backing up, and since when?" and "how fast are we enqueuing?": from the
/// leader's depth samples, a queue whose backlog rose every minute for five is flagged, its
/// enqueue rate sits beside its completion rate, and its blocked jobs are split by reason in
/// words; retrying jobs are counted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_shows_a_growing_backlog_rates_and_why_jobs_are_blocked() {
    let db = TestDb::new().await;
    let s = &db.store;
    for q in ["grow", "flat"] {
        s.enqueue(&NewJob::new(q, "k", json!({}))).await.unwrap();
    }
    let j = || NewJob::new("grow", "k", json!({})).ordering_key("acct-9");
    let dead = s.enqueue(&j()).await.unwrap().id;
    let behind = s.enqueue(&j()).await.unwrap().id;
    let retry = s
        .enqueue(&NewJob::new("grow", "k", json!({})))
        .await
        .unwrap()
        .id;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET state = 'dead', finished_at = now(), attempt = 1 WHERE id = {dead}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET blocked = true WHERE id = {behind}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET errors = '[{{\"message\": \"x\", \"attempt\": 1}}]' WHERE id = {retry}"
    ))
    .await;
    // Six complete minutes: "grow" rises by 20 each, "flat" stays; 30 enqueued a minute.
    for m in 1..=6 {
        db.exec(&format!(
            "INSERT INTO {{schema}}.queue_depth (minute, queue, waiting, running, enqueued, hwm)
             VALUES (date_trunc('minute', now()) - interval '{m} minutes', 'grow', {}, 0, 30, 0),
                    (date_trunc('minute', now()) - interval '{m} minutes', 'flat', 50, 0, 0, 0),
                    (date_trunc('minute', now()) - interval '{m} minutes', '', {}, 0, 30, 0)",
            220 - 20 * m,
            270 - 20 * m
        ))
        .await;
    }
    let page = page_text(&serve(s.clone(), Options::default()).await, "/").await;
    let row = |q: &str| section(&page, &format!("data-queue=\"{q}\""), "</tr>");
    let g = row("grow");
    assert!(g.contains("backlog growing"), "{g}");
    assert!(!row("flat").contains("backlog growing"), "{}", row("flat"));
    assert!(g.contains("behind a dead job of its key 1"), "{g}");
    // 30 a minute in the last ten minutes' samples (six of them): 180 / 10.
    let in_out = section(&g, "class=\"n in-out\"", "</td>");
    assert!(in_out.contains("18 / 0"), "{in_out}");
    let retrying = section(&g, "class=\"n retrying\"", "</td>");
    assert!(retrying.contains(">1<"), "{retrying}");
    let rates = section(&page, "id=\"rates\"", "</div>");
    assert!(rates.contains("18 in"), "{rates}");
    assert!(page.contains("waiting jobs (backlog)"));
}

/// The job list answers "which jobs are failing now?": a `retrying` filter (pending after a
/// failed attempt) and a `scheduled` one, and a last-error column, escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_list_filters_retrying_and_scheduled_jobs_and_shows_the_last_error() {
    let db = TestDb::new().await;
    let s = &db.store;
    for _ in 0..2 {
        s.enqueue(&NewJob::new("jl", "k", json!({}))).await.unwrap();
    }
    let later = s
        .enqueue(
            &NewJob::new("jl", "k", json!({}))
                .run_at(chrono::Utc::now() + chrono::Duration::hours(3)),
        )
        .await
        .unwrap()
        .id;
    let c = claim_ready(s, "jl", 1).await;
    fail_each(s, &c, FailureClass::Retry, |_| "<b>smtp</b> refused".into()).await;
    let base = serve(s.clone(), Options::default()).await;
    let retrying = page_text(&base, "/jobs?queue=jl&state=retrying").await;
    assert_eq!(retrying.matches("<tr data-id=").count(), 1, "{retrying}");
    assert!(retrying.contains(&format!("data-id=\"{}\"", c[0].id)));
    let cell = section(&retrying, "class=\"last-error\"", "</td>");
    assert!(cell.contains("&lt;b&gt;smtp&lt;/b&gt; refused"), "{cell}");
    assert!(
        retrying.contains("<option value=\"retrying\" selected"),
        "the filter form keeps the choice"
    );
    let scheduled = page_text(&base, "/jobs?queue=jl&state=scheduled").await;
    // The retry waits out its backoff (an hour here): it is scheduled too; the two due
    // jobs are not.
    assert_eq!(scheduled.matches("<tr data-id=").count(), 2, "{scheduled}");
    assert!(scheduled.contains(&format!("data-id=\"{later}\"")));
    assert!(scheduled.contains(&format!("data-id=\"{}\"", c[0].id)));
}

/// The cron page pauses, resumes and runs a schedule now: each through the CSRF check, each
/// in the audit log; an unknown schedule is a 404 that writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cron_page_pauses_resumes_and_runs_a_schedule_now() {
    let db = TestDb::new().await;
    let s = &db.store;
    s.upsert_periodic(&Periodic::new(
        "nightly",
        "0 3 * * *",
        "reports",
        "render",
        json!({}),
    ))
    .await
    .unwrap();
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    let token = csrf_of(&page_text(&base, "/cron").await);
    let form = format!("_csrf={token}");
    assert_eq!(
        post(&c, format!("{base}/cron/nightly/pause"), "")
            .await
            .status(),
        403
    );
    assert!(s.list_periodic().await.unwrap()[0].paused_at.is_none());
    assert_eq!(
        post(&c, format!("{base}/cron/nightly/pause"), form.clone())
            .await
            .status(),
        303
    );
    assert!(s.list_periodic().await.unwrap()[0].paused_at.is_some());
    let page = page_text(&base, "/cron").await;
    assert!(page.contains("/cron/nightly/resume"), "{page}");
    assert_eq!(
        post(&c, format!("{base}/cron/nightly/run"), form.clone())
            .await
            .status(),
        303
    );
    let jobs = s.search(&JobQuery::default()).await.unwrap().jobs;
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].queue.as_str(), jobs[0].kind.as_str()),
        ("reports", "render")
    );
    assert_eq!(
        post(&c, format!("{base}/cron/nightly/resume"), form.clone())
            .await
            .status(),
        303
    );
    assert!(s.list_periodic().await.unwrap()[0].paused_at.is_none());
    assert_eq!(
        post(&c, format!("{base}/cron/nope/run"), form.clone())
            .await
            .status(),
        404
    );
    let actions: Vec<String> = s
        .audit_log(10)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.action)
        .collect();
    assert_eq!(actions, ["cron.resume", "cron.run", "cron.pause"]);
}

/// A workflow's page cancels and retries the whole workflow: refused without the CSRF token,
/// then applied parents first, audited, and shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_cancelled_and_retried_from_its_page() {
    use docket_core::workflow::Workflow;
    let db = TestDb::new().await;
    let s = &db.store;
    let g = Workflow::new("ops")
        .add("a", NewJob::new("wfq", "k", json!({})))
        .add_after("b", NewJob::new("wfq", "k", json!({})), ["a"])
        .graph(&docket_core::Limits::default())
        .unwrap()
        .clone();
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    let page = page_text(&base, &format!("/workflows/{}", wf.id)).await;
    assert!(
        page.contains("Cancel workflow") && page.contains("data-confirm"),
        "{page}"
    );
    let token = csrf_of(&page);
    let state = |n: &'static str| {
        let id = wf.job(n).unwrap();
        async move { s.get(id).await.unwrap().state }
    };
    let r = post(&c, format!("{base}/workflows/{}/cancel", wf.id), "").await;
    assert_eq!(r.status(), 403, "no token");
    assert_eq!(
        state("a").await,
        JobState::Pending,
        "nothing refused was written"
    );
    let r = post(
        &c,
        format!("{base}/workflows/{}/cancel", wf.id),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert_eq!(state("a").await, JobState::Cancelled);
    assert_eq!(state("b").await, JobState::Cancelled);
    assert_eq!(s.audit_log(1).await.unwrap()[0].action, "workflow.cancel");
    let page = page_text(&base, &format!("/workflows/{}", wf.id)).await;
    assert!(page.contains("class=\"state cancelled\""), "{page}");
    let r = post(
        &c,
        format!("{base}/workflows/{}/retry", wf.id),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert_eq!(state("a").await, JobState::Pending);
    assert_eq!(state("b").await, JobState::Waiting, "b waits again for a");
    assert_eq!(s.audit_log(1).await.unwrap()[0].action, "workflow.retry");
    let r = c
        .get(format!("{base}/workflows/999999"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = c.get(format!("{base}/workflows/x")).send().await.unwrap();
    assert_eq!(r.status(), 400);
}
