//! Ordering keys held by a dead job at their head: nothing of such a key runs until its head
//! is retried or skipped, and the queue's counts only say "blocked". One row per key, the
//! head one click away, retry and skip here (through the job actions, audited).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::Store;
use maud::html;

use crate::layout::{self, button, confirm_button};
use crate::pages::jobs::urlenc;
use crate::App;

/// Keys listed at most.
pub const MAX_KEYS: i64 = 500;

/// `GET /keys`.
pub async fn page<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let keys = match app.store.blocked_keys(MAX_KEYS).await {
        Ok(k) => k,
        Err(e) => return layout::error(&app, &e),
    };
    let body = html! {
        h1 { "Ordering keys held by a dead job" }
        p.muted { "The jobs of each key run one at a time, in order; a dead job at the head holds all that follow until it is retried or skipped (skip: it becomes cancelled and the next job of the key runs)." }
        table #keys {
            thead { tr {
                th { "ordering key" } th { "queue" } th { "kind" } th { "dead head" } th { "dead since" } th.n { "waiting behind" }
                @if !app.opts.read_only { th { "actions" } }
            } }
            tbody {
                @for k in &keys {
                    tr data-key=(k.key) {
                        td { a href=(app.href(&format!("/jobs?ordering_key={}", urlenc(&k.key)))) { (docket_core::validate::visible(&k.key)) } }
                        td { a href=(app.href(&format!("/jobs?queue={}", urlenc(&k.queue)))) { (k.queue) } }
                        td { (k.kind) }
                        td { a href=(app.href(&format!("/jobs/{}", k.head.0))) { (k.head.0) } }
                        td { (layout::opt_time(&k.dead_since)) " UTC" }
                        td.n { (k.waiting) }
                        @if !app.opts.read_only {
                            td {
                                (button(&app, &format!("/jobs/{}/retry", k.head.0), "Retry head", ""))
                                " "
                                (confirm_button(&app, &format!("/jobs/{}/skip", k.head.0), "Skip head", "danger",
                                    &format!("Skip dead job {} and let the {} waiting job(s) of its key run?", k.head.0, k.waiting)))
                            }
                        }
                    }
                }
                @if keys.is_empty() { tr { td colspan="7" .muted { "No ordering key is held by a dead job." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Keys",
        "/keys",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}
