//! The page shell (navigation, embedded stylesheet and script) and the small formatting
//! helpers every page uses.

use std::time::Instant;

use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use docket_core::{Count, Store, StoreError};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::App;

const STYLE: &str = include_str!("../assets/style.css");
const SCRIPT: &str = include_str!("../assets/live.js");

/// Serves an embedded asset.
pub async fn asset(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "style.css" => (STYLE, "text/css; charset=utf-8"),
        "live.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// True when the page's script asks only for the `<main>` content (a live refresh).
pub fn fragment(headers: &HeaderMap) -> bool {
    headers.contains_key("x-docket-fragment")
}

const NAV: &[(&str, &str)] = &[
    ("/", "Queues"),
    ("/jobs", "Jobs"),
    ("/errors", "Errors"),
    ("/dead", "Dead"),
    ("/keys", "Keys"),
    ("/workflows", "Workflows"),
    ("/workers", "Workers"),
    ("/cron", "Cron"),
    ("/audit", "Audit"),
];

/// A whole page, or only its main content for a live refresh. `Server-Timing` says how long
/// the server took (the benchmark reads it).
pub fn page<S: Store>(
    app: &App<S>,
    title: &str,
    active: &str,
    body: Markup,
    frag: bool,
) -> Response {
    page_timed(app, title, active, body, frag, None)
}

/// [`page`] with the time the handler started, for `Server-Timing`.
pub fn page_timed<S: Store>(
    app: &App<S>,
    title: &str,
    active: &str,
    body: Markup,
    frag: bool,
    started: Option<Instant>,
) -> Response {
    let markup = if frag {
        body
    } else {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · Docket" }
                    link rel="stylesheet" href=(app.href("/assets/style.css"));
                    script src=(app.href("/assets/live.js")) defer {}
                }
                body data-base=(app.opts.base_path) {
                    header {
                        a.brand href=(app.href("/")) { "Docket" }
                        nav {
                            @for (path, name) in NAV {
                                a href=(app.href(path)) class=[(*path == active).then_some("on")] { (name) }
                            }
                        }
                        @if app.opts.read_only { span.badge.ro { "read-only" } }
                        span #live.badge title="live updates" role="status" { "●" }
                        button #pause type="button" aria-pressed="false" title="stop live updates while you read" { "Pause updates" }
                        span #updated.muted aria-live="off" {}
                    }
                    main #main { (body) }
                }
            }
        }
    };
    let mut r = markup.into_response();
    if let Some(t) = started {
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if let Ok(v) = format!("app;dur={ms:.1}").parse() {
            r.headers_mut().insert("server-timing", v);
        }
    }
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

/// An error page for a failed store call (bad input is a 400, anything else a 500; the
/// message is escaped and carries no connection string: store errors are redacted).
pub fn error<S: Store>(app: &App<S>, e: &StoreError) -> Response {
    let status = match e {
        StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
        StoreError::NotFound(_) => StatusCode::NOT_FOUND,
        StoreError::WrongState { .. } | StoreError::UniqueConflict { .. } => StatusCode::CONFLICT,
        StoreError::Denied(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = html! { h1 { "Error" } p.error { (e.to_string()) } };
    let mut r = page(app, "Error", "", body, false);
    *r.status_mut() = status;
    r
}

/// A 400 page for bad input the dashboard itself found.
pub fn bad_request<S: Store>(app: &App<S>, msg: &str) -> Response {
    let body = html! { h1 { "Bad request" } p.error { (msg) } };
    let mut r = page(app, "Bad request", "", body, false);
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

/// A time as people read it on every page: `2026-12-01 18:00:00 UTC (3m 20s ago)`, in a
/// `<time>` element carrying the instant. One zone everywhere (the database's clock is UTC),
/// said each time, and how long ago or ahead, so nobody converts in their head at 3 a.m.
pub fn time(t: &DateTime<Utc>) -> Markup {
    let secs = (Utc::now() - *t).num_milliseconds() as f64 / 1000.0;
    let rel = if secs >= 0.0 {
        format!("{} ago", docket_core::why::human_secs(secs))
    } else {
        format!("in {}", docket_core::why::human_secs(-secs))
    };
    html! {
        time datetime=(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)) {
            (t.format("%Y-%m-%d %H:%M:%S")) " UTC " small.rel { "(" (rel) ")" }
        }
    }
}

/// An optional time, or a dash.
pub fn opt_time(t: &Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => time(t),
        None => html! { "–" },
    }
}

/// Seconds as `3.2s`, `4m 10s`, `2h 5m`, `3d 4h`.
pub fn age(s: f64) -> String {
    if !s.is_finite() {
        return "–".into();
    }
    docket_core::why::human_secs(s.max(0.0))
}

/// Milliseconds for people: `25ms` below a second, then as [`age`] does (`2.5s`, `1m 0s`).
pub fn ms(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0}ms")
    } else {
        // One duration format on every page: the one ages use.
        docket_core::why::human_secs(v / 1000.0)
    }
}

/// A capped count: `10000+` with a title saying so.
pub fn count(c: &Count) -> Markup {
    html! {
        @if c.more { span title="counted up to this cap; there are more" { (c.n) "+" } }
        @else { (c.n) }
    }
}

/// JSON, pretty, for a `<pre>` (escaped by the template).
pub fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// At most `n` characters of `s`, with an ellipsis when cut.
pub fn cut(s: &str, n: usize) -> String {
    let s = &docket_core::validate::visible(s);
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// The hidden CSRF field of a form.
pub fn csrf<S: Store>(app: &App<S>) -> Markup {
    html! { input type="hidden" name="_csrf" value=(app.csrf); }
}

/// A one-button form posting to `action` (nothing in read-only mode).
pub fn button<S: Store>(app: &App<S>, action: &str, label: &str, class: &str) -> Markup {
    if app.opts.read_only {
        return html! {};
    }
    html! {
        form.inline method="post" action=(app.href(action)) {
            (csrf(app))
            button type="submit" class=(class) { (label) }
        }
    }
}

/// [`button`] for a destructive action on one thing: the browser asks `question` first
/// (`data-confirm`, read by live.js) and nothing is posted if the operator says no.
pub fn confirm_button<S: Store>(
    app: &App<S>,
    action: &str,
    label: &str,
    class: &str,
    question: &str,
) -> Markup {
    if app.opts.read_only {
        return html! {};
    }
    html! {
        form.inline method="post" action=(app.href(action)) data-confirm=(question) {
            (csrf(app))
            button type="submit" class=(class) { (label) }
        }
    }
}

/// Raw markup built by this crate from numbers only (the charts).
pub fn trusted(s: String) -> PreEscaped<String> {
    PreEscaped(s)
}
