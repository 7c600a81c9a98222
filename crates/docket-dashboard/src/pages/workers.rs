//! Live workers (with the leader), cron definitions with their next and last ticks, and the
//! audit log of operator actions.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::{Store, WorkerStatus};
use maud::html;

use crate::layout::{self, button, confirm_button};
use crate::pages::jobs::urlenc;
use crate::App;

/// How long gone workers stay on the page.
pub const GONE_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// A time with its zone and, relative to `now`, how long ago or how soon.
fn at(t: &chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> maud::Markup {
    let d = (now - *t).num_milliseconds() as f64 / 1000.0;
    let rel = if d >= 0.0 {
        format!("{} ago", layout::age(d))
    } else {
        format!("in {}", layout::age(-d))
    };
    html! { (layout::time(t)) " UTC " span.muted { "(" (rel) ")" } }
}

/// `GET /workers`: live workers, the leadership's lease (also when its holder is gone), and
/// the workers gone in the last hour with how they ended.
pub async fn page<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let reg = match app.store.registry(GONE_WINDOW).await {
        Ok(r) => r,
        Err(e) => return layout::error(&app, &e),
    };
    let now = reg.now;
    let (live, gone): (Vec<_>, Vec<_>) = reg
        .workers
        .iter()
        .partition(|w| w.status(now) == WorkerStatus::Live);
    let holder = reg
        .leader
        .as_ref()
        .map(|l| (l, reg.workers.iter().find(|w| w.beat.owner == l.owner)));
    let body = html! {
        h1 { "Workers" }
        p #leader {
            "Leader (reaper, pruner, cron): "
            @match &holder {
                None => { span.muted { "none has led yet" } }
                Some((l, w)) => {
                    code { (l.owner) } " — lease "
                    @if l.expires_at > now { "until " } @else { "ran out " }
                    (at(&l.expires_at, now))
                    @match w.map(|w| w.status(now)) {
                        Some(WorkerStatus::Live) => { " · its worker reports" }
                        Some(WorkerStatus::Stopped(t)) => { " · " span.flag { "its worker stopped" } " " (at(&t, now)) }
                        Some(WorkerStatus::Expired(t)) => { " · " span.flag { "its worker is gone" } " (no report since " (at(&t, now)) "); another worker takes over when the lease runs out" }
                        None => { " · its worker is not in the registry" }
                    }
                }
            }
        }
        table #workers {
            thead { tr {
                th { "owner" } th { "host" } th.n { "pid" } th { "queues" } th.n { "slots" }
                th.n { "executing" } th.n { "buffered" } th { "started" } th { "last report" } th { "leader" }
            } }
            tbody {
                @for w in &live {
                    tr data-owner=(w.beat.owner) {
                        td { code { (w.beat.owner) } }
                        td { (w.beat.host) }
                        td.n { (w.beat.pid) }
                        // Each queue with its buffered jobs, where it has any.
                        td.queues { @for (i, q) in w.beat.queues.iter().enumerate() {
                            @if i > 0 { ", " }
                            (q)
                            @let b = w.beat.buffered_in(q);
                            @if b > 0 { " " small.buf title="claimed ahead of a free slot, not started" { "(" (b) " buffered)" } }
                        } }
                        td.n { (w.beat.concurrency) }
                        td.n { (w.beat.in_flight.saturating_sub(w.beat.buffered)) }
                        td.n { (w.beat.buffered) }
                        td { (at(&w.started_at, now)) }
                        td { (at(&w.seen_at, now)) }
                        td { @if w.leader { "★ leader" } }
                    }
                }
                @if live.is_empty() { tr { td colspan="10" .muted { "No live worker." } } }
            }
        }
        h2 { "Gone in the last hour" }
        table #gone {
            thead { tr {
                th { "owner" } th { "host" } th.n { "pid" } th { "queues" } th { "how it ended" }
                th { "last report" } th.n { "jobs held then" }
            } }
            tbody {
                @for w in &gone {
                    tr data-owner=(w.beat.owner) {
                        td { code { (w.beat.owner) } }
                        td { (w.beat.host) }
                        td.n { (w.beat.pid) }
                        td { (w.beat.queues.join(", ")) }
                        @match w.status(now) {
                            WorkerStatus::Stopped(t) => { td { "stopped " (at(&t, now)) } }
                            WorkerStatus::Expired(t) => { td { span.flag { "no report" } " since " (at(&t, now)) " — killed, frozen or cut off; its leases go to the reaper" } }
                            WorkerStatus::Live => { td {} }
                        }
                        td { (at(&w.seen_at, now)) }
                        td.n { (w.beat.in_flight) }
                    }
                }
                @if gone.is_empty() { tr { td colspan="7" .muted { "None." } } }
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
                th { "next tick" } th { "last tick" } th { "last job" } th { "paused" }
                @if !app.opts.read_only { th { "actions" } }
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
                        td { @if let Some(t) = &d.paused_at { span.paused { "paused" } " " (layout::time(t)) } }
                        @if !app.opts.read_only {
                            @let enc = urlenc(&d.def.name);
                            td {
                                @if d.paused_at.is_some() { (button(&app, &format!("/cron/{enc}/resume"), "Resume", "")) }
                                @else { (confirm_button(&app, &format!("/cron/{enc}/pause"), "Pause", "danger", &format!("Pause {}? Its ticks pass without a job until it is resumed.", d.def.name))) }
                                " "
                                (confirm_button(&app, &format!("/cron/{enc}/run"), "Run now", "", &format!("Enqueue one run of {} now? Its schedule stays as it is.", d.def.name)))
                            }
                        }
                    }
                }
                @if defs.is_empty() { tr { td colspan="10" .muted { "No periodic job is defined." } } }
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
