//! Serving a dashboard on a real port over a real store, for the HTTP and browser tests.

#![allow(dead_code)]

use std::time::Duration;

use docket_core::*;
use docket_dashboard::Options;
use docket_postgres::PgStore;

/// Serves `router` on 127.0.0.1 on a free port; returns the base URL.
pub async fn serve_router(router: axum::Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    format!("http://{addr}")
}

/// Serves the dashboard of `store` with `opts`.
pub async fn serve(store: PgStore, opts: Options) -> String {
    serve_router(docket_dashboard::router(store, opts).unwrap()).await
}

/// A client that does not follow redirects (tests look at them).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// POSTs `body` as a form to `url`.
pub async fn post(c: &reqwest::Client, url: String, body: impl Into<String>) -> reqwest::Response {
    c.post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.into())
        .send()
        .await
        .unwrap()
}

/// The CSRF token of a page.
pub fn csrf_of(html: &str) -> String {
    let i = html
        .find("name=\"_csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 20;
    html[i..i + 64].to_string()
}

/// Claims every ready job of `queue` (up to 1000) and fails them for good with `message`.
pub async fn kill_all(s: &PgStore, queue: &str, message: &str) -> Vec<JobId> {
    let c = s
        .claim(&ClaimRequest {
            queue: queue.into(),
            limit: 1000,
            owner: "test".into(),
            lease: Duration::from_secs(600),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let f: Vec<Failure> = c
        .iter()
        .map(|j| Failure {
            lease: j.lease(),
            class: FailureClass::Discard,
            message: message.into(),
            retry_in: None,
        })
        .collect();
    s.fail_many("test", &f).await.unwrap();
    c.iter().map(|j| j.id).collect()
}
