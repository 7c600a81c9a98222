//! Who the dashboard answers: only the host names it serves (a page on a name that resolves
//! to 127.0.0.1 — DNS rebinding — gets 421 for every page and action), only the exact login
//! path is open without authentication, and `serve` answers at the base path it prints.

mod common;

use common::*;
use docket_core::*;
use docket_dashboard::{Auth, Options};
use docket_testkit::TestDb;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_host_name_reads_and_changes_nothing() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"secret": "args"})))
        .await
        .unwrap()
        .id;
    let base = serve(db.store.clone(), Options::default()).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let c = client();
    let page = c.get(format!("{base}/jobs/{}", id.0)).send().await.unwrap();
    assert_eq!(page.status(), 200, "its own name answers");
    for host in [
        format!("rebind.example:{port}"),
        "127.0.0.1.evil.example".into(),
    ] {
        let r = c
            .get(format!("{base}/jobs/{}", id.0))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 421, "{host}");
        assert!(!r.text().await.unwrap().contains("secret"));
        // An action with the Origin the rebinding page would send (the same name).
        let r = c
            .post(format!("{base}/jobs/{}/cancel", id.0))
            .header("host", &host)
            .header("origin", format!("http://{host}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("csrf=x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 421, "{host}");
    }
    assert_eq!(db.store.get(id).await.unwrap().state, JobState::Pending);

    // A configured name answers; the rest still do not.
    let named = serve(
        db.store.clone(),
        Options {
            allowed_hosts: vec!["jobs.internal".into()],
            ..Default::default()
        },
    )
    .await;
    let port = named.rsplit(':').next().unwrap().to_string();
    let r = c
        .get(format!("{named}/"))
        .header("host", format!("jobs.internal:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c.get(format!("{named}/")).send().await.unwrap();
    assert_eq!(r.status(), 421, "127.0.0.1 is not in a configured list");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_login_page_itself_is_open() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap();
    let base = serve(
        db.store.clone(),
        Options {
            auth: Auth::Token("t0ken-for-the-test-0123456789".into()),
            ..Default::default()
        },
    )
    .await;
    let c = client();
    assert_eq!(
        c.get(format!("{base}/login"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Paths that end in /login reach no handler without authentication.
    for path in ["/queues/q/login", "/jobs/1/login"] {
        let r = post(&c, format!("{base}{path}"), "csrf=x").await;
        assert_eq!(r.status(), 303, "{path}");
        assert_eq!(r.headers()["location"], "/login", "{path}");
    }
    let r = c.get(format!("{base}/x/login")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    // Behind TLS (the proxy says so) the cookie is Secure.
    let r = c
        .post(format!("{base}/login"))
        .header("x-forwarded-proto", "https")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=t0ken-for-the-test-0123456789")
        .send()
        .await
        .unwrap();
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_at_the_base_path_it_prints() {
    let db = TestDb::new().await;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let opts = Options {
        base_path: "/docket".into(),
        ..Default::default()
    };
    let store = db.store.clone();
    tokio::spawn(
        async move { docket_dashboard::serve(l, store, opts, std::future::pending()).await },
    );
    let c = client();
    let r = c.get(format!("http://{addr}/docket")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .get(format!("http://{addr}/docket/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308, "the trailing slash leads home");
    assert_eq!(r.headers()["location"], "/docket");
    let r = c
        .get(format!("http://{addr}/docket/assets/style.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// "Replay all" of a dead group whose error has several lines: the browser sends the hidden
/// field's line breaks as CRLF, the stored message has LF; the group is replayed all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_line_error_group_is_replayed() {
    let db = TestDb::new().await;
    let s = &db.store;
    for _ in 0..3 {
        s.enqueue(&NewJob::new("m", "k", json!({}))).await.unwrap();
    }
    let dead = kill_all(s, "m", "first line\nsecond line").await;
    assert_eq!(dead.len(), 3);
    let base = serve(s.clone(), Options::default()).await;
    let c = client();
    let page = c.get(format!("{base}/dead")).send().await.unwrap();
    let token = csrf_of(&page.text().await.unwrap());
    let r = post(
        &c,
        format!("{base}/bulk"),
        format!("_csrf={token}&op=retry%3Amatching&confirm=3&kind=k&state=dead&error=first%20line%0D%0Asecond%20line"),
    )
    .await;
    assert_eq!(r.status(), 303);
    docket_testkit::eventually(
        std::time::Duration::from_secs(30),
        "the group replayed",
        || async {
            let mut n = 0;
            for id in &dead {
                if s.get(*id).await.unwrap().state == JobState::Pending {
                    n += 1;
                }
            }
            n == 3
        },
    )
    .await;
    // The walk was audited when it started, before its first change, and when it ended.
    docket_testkit::eventually(
        std::time::Duration::from_secs(30),
        "the closing audit entry",
        || async {
            s.audit_log(10)
                .await
                .unwrap()
                .iter()
                .any(|e| e.action == "bulk.retry")
        },
    )
    .await;
    let log = s.audit_log(10).await.unwrap();
    let start = log.iter().position(|e| e.action == "bulk.retry.start");
    let end = log.iter().position(|e| e.action == "bulk.retry");
    assert!(start.is_some() && end.is_some(), "{log:?}");
    assert!(end < start, "newest first: the end after the start");
}

/// Keys are shown as they are, except what would hide or reorder them: an escape sequence
/// and a right-to-left override in a key appear as visible escapes, never as raw characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_keys_are_shown_visibly() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(
            &NewJob::new("q", "k", json!({}))
                .ordering_key("ab\u{202e}cd")
                .concurrency_key("x\u{1b}[2Jy"),
        )
        .await
        .unwrap()
        .id;
    let base = serve(db.store.clone(), Options::default()).await;
    let page = client()
        .get(format!("{base}/jobs/{}", id.0))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains('\u{202e}') && !page.contains('\u{1b}'),
        "raw control characters"
    );
    assert!(page.contains("ab\\u{202e}cd"), "the override shown");
    assert!(page.contains("x\\u{1b}[2Jy"), "the escape shown");
}
