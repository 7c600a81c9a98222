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

/// The text of the page at `base` + `path` (any status).
pub async fn page_text(base: &str, path: &str) -> String {
    client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The HTML from the element whose start contains `marker` (e.g. `id="gone"` or
/// `data-queue="mail"`) to the first `end` after it (`</tr>`, `</table>`, `</div>`).
pub fn section(page: &str, marker: &str, end: &str) -> String {
    let at = page
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not on the page"));
    let len = page[at..].find(end).unwrap_or(page.len() - at);
    page[at..at + len].to_string()
}

/// Claims up to `limit` ready jobs of `queue` for owner "test".
pub async fn claim_ready(s: &PgStore, queue: &str, limit: i32) -> Vec<ClaimedJob> {
    s.claim(&ClaimRequest {
        queue: queue.into(),
        limit,
        owner: "test".into(),
        lease: Duration::from_secs(600),
        starvation: None,
        controlled: None,
    })
    .await
    .unwrap()
}

/// Fails `jobs` (claimed by "test") as `class`, each with the message `message` gives it; a
/// retry comes back in an hour.
pub async fn fail_each(
    s: &PgStore,
    jobs: &[ClaimedJob],
    class: FailureClass,
    message: impl Fn(&ClaimedJob) -> String,
) {
    let f: Vec<Failure> = jobs
        .iter()
        .map(|j| Failure {
            lease: j.lease(),
            class,
            message: message(j),
            retry_in: (class == FailureClass::Retry).then_some(Duration::from_secs(3600)),
        })
        .collect();
    s.fail_many("test", &f).await.unwrap();
}

/// A worker's report: `owner` on host web-1 serving `queues`.
pub fn beat(owner: &str, queues: &[&str]) -> WorkerBeat {
    WorkerBeat {
        owner: owner.into(),
        host: "web-1".into(),
        pid: 7,
        queues: queues.iter().map(|q| q.to_string()).collect(),
        concurrency: 4,
        in_flight: 3,
        buffered: 1,
        buffered_by_queue: queues
            .iter()
            .enumerate()
            .map(|(i, _)| u32::from(i == 0))
            .collect(),
    }
}

/// Claims every ready job of `queue` (up to 1000) and fails them for good with `message`.
pub async fn kill_all(s: &PgStore, queue: &str, message: &str) -> Vec<JobId> {
    let c = claim_ready(s, queue, 1000).await;
    fail_each(s, &c, FailureClass::Discard, |_| message.into()).await;
    c.iter().map(|j| j.id).collect()
}
