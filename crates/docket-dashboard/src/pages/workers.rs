//! Live workers (with the leader), cron definitions with their next and last ticks, and the
//! audit log of operator actions.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::Store;
use maud::html;

use crate::layout;
use crate::App;

/// `GET /workers`.
pub async fn page<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let workers = match app.store.workers().await {
        Ok(w) => w,
        Err(e) => return layout::error(&app, &e),
    };
    let body = html! {
        h1 { "Workers" }
        table #workers {
            thead { tr {
                th { "owner" } th { "host" } th.n { "pid" } th { "queues" } th.n { "slots" }
                th.n { "executing" } th.n { "buffered" } th { "started" } th { "last report" } th { "leader" }
            } }
            tbody {
                @for w in &workers {
                    tr {
                        td { code { (w.beat.owner) } }
                        td { (w.beat.host) }
                        td.n { (w.beat.pid) }
                        td { (w.beat.queues.join(", ")) }
                        td.n { (w.beat.concurrency) }
                        td.n { (w.beat.in_flight.saturating_sub(w.beat.buffered)) }
                        td.n { (w.beat.buffered) }
                        td { (layout::time(&w.started_at)) }
                        td { (layout::time(&w.seen_at)) }
                        td { @if w.leader { "★ leader" } }
                    }
                }
                @if workers.is_empty() { tr { td colspan="10" .muted { "No live worker." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Workers",
        "/workers",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// `GET /cron`.
pub async fn cron<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let defs = match app.store.list_periodic().await {
        Ok(d) => d,
        Err(e) => return layout::error(&app, &e),
    };
    let body = html! {
        h1 { "Cron" }
        table #cron {
            thead { tr {
                th { "name" } th { "schedule" } th { "time zone" } th { "queue" } th { "kind" }
                th { "next tick" } th { "last tick" } th { "last job" }
            } }
            tbody {
                @for d in &defs {
                    tr {
                        td { (d.def.name) }
                        td { code { (d.def.cron) } }
                        td { (d.def.timezone) }
                        td { (d.def.queue) }
                        td { (d.def.kind) }
                        td { (layout::time(&d.next_tick_at)) }
                        td { (layout::opt_time(&d.last_tick_at)) }
                        td { @if let Some(j) = d.last_job { a href=(app.href(&format!("/jobs/{j}"))) { (j) } } @else { "–" } }
                    }
                }
                @if defs.is_empty() { tr { td colspan="8" .muted { "No periodic job is defined." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Cron",
        "/cron",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// `GET /audit`.
pub async fn audit<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let log = match app.store.audit_log(200).await {
        Ok(l) => l,
        Err(e) => return layout::error(&app, &e),
    };
    let body = html! {
        h1 { "Audit log" }
        table #audit {
            thead { tr { th { "at" } th { "who" } th { "action" } th { "on" } th { "detail" } } }
            tbody {
                @for e in &log {
                    tr {
                        td { (layout::opt_time(&e.at)) }
                        td { (e.actor) }
                        td { (e.action) }
                        td { (layout::cut(&e.target, 200)) }
                        td { code { (e.detail.to_string()) } }
                    }
                }
                @if log.is_empty() { tr { td colspan="5" .muted { "No action taken yet." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Audit",
        "/audit",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}
