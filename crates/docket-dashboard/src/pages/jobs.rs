//! The jobs page: every filter of [`JobQuery`], keyset pages, and bulk actions on the
//! selected rows or on everything the filter matches.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::{FieldEq, JobQuery, Store};
use maud::html;

use crate::layout::{self, csrf};
use crate::App;

const STATES: &[&str] = &[
    "pending",
    "retrying",
    "scheduled",
    "running",
    "succeeded",
    "dead",
    "cancelled",
];

/// The search a form or query string describes: [`JobQuery::from_fields`], shared with the
/// CLI's `jobs list`.
pub fn query_from<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<JobQuery, String> {
    JobQuery::from_fields(get)
}

/// The query string of `q` (without its cursor), for links and redirects.
pub fn query_string(q: &JobQuery) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            s.append_pair(k, &v);
        }
    };
    put("queue", q.queue.clone());
    put("kind", q.kind.clone());
    // A part of the pending jobs is named by itself (state=retrying), as the form sends it.
    put(
        "state",
        match q.pending {
            Some(p) => Some(p.as_str().to_string()),
            None => q.state.map(|s| s.to_string()),
        },
    );
    put("priority", q.priority.map(|p| p.to_string()));
    put("since", q.since.map(|t| t.to_rfc3339()));
    put("until", q.until.map(|t| t.to_rfc3339()));
    put("ordering_key", q.ordering_key.clone());
    put("concurrency_key", q.concurrency_key.clone());
    put("field", q.field.as_ref().map(FieldEq::display));
    put("error", q.last_error.clone());
    if q.limit != 0 {
        put("limit", Some(q.limit.to_string()));
    }
    s.finish()
}

/// Hidden inputs carrying `q`'s filter (for the bulk form).
/// The filter as hidden inputs, so a form posts it back.
pub fn hidden_filter(q: &JobQuery) -> maud::Markup {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query_string(q).as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    html! { @for (k, v) in &pairs { input type="hidden" name=(k) value=(v); } }
}

/// The filter form, holding what was asked (also when it was refused, so it can be fixed).
fn filter_form<S: Store>(app: &App<S>, v: &dyn Fn(&str) -> String) -> maud::Markup {
    html! {
        form.filters method="get" action=(app.href("/jobs")) {
            label { "Queue" input name="queue" value=(v("queue")) size="10"; }
            label { "Kind" input name="kind" value=(v("kind")) size="12"; }
            label { "State" select name="state" {
                option value="" { "any" }
                @for s in STATES { option value=(s) selected[v("state") == *s] { (s) } }
            } }
            label { "Priority" input name="priority" value=(v("priority")) size="4"; }
            label { "Created since (UTC)" input name="since" value=(v("since")) placeholder="2026-12-01T10:00" size="16"; }
            label { "until" input name="until" value=(v("until")) size="16"; }
            label { "Ordering key" input name="ordering_key" value=(v("ordering_key")) size="10"; }
            label { "Concurrency key" input name="concurrency_key" value=(v("concurrency_key")) size="10"; }
            label { "Args / metadata" input name="field" value=(v("field")) placeholder="args.user_id = 42" size="18"; }
            @if !v("error").is_empty() { input type="hidden" name="error" value=(v("error")); }
            button type="submit" { "Filter" }
            a href=(app.href("/jobs")) { "clear" }
        }
    }
}

/// `GET /jobs`.
pub async fn page<S: Store>(
    State(app): State<Arc<App<S>>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let v = |k: &str| params.get(k).cloned().unwrap_or_default();
    let q = match query_from(|k| params.get(k).map(String::as_str)) {
        Ok(q) => q,
        Err(msg) => {
            // The form stays, with what was typed, above the reason.
            let body = html! {
                h1 { "Jobs" }
                (filter_form(&app, &v))
                p.error #filter-error role="alert" { (msg) }
            };
            let mut r = layout::page(&app, "Jobs", "/jobs", body, layout::fragment(&headers));
            *r.status_mut() = axum::http::StatusCode::BAD_REQUEST;
            return r;
        }
    };
    let page = match app.store.search(&q).await {
        Ok(p) => p,
        Err(e) => return layout::error(&app, &e),
    };
    let ro = app.opts.read_only;
    let table = html! {
    table #jobs {
        thead { tr {
            @if !ro { th { input #select-all type="checkbox" title="select all" aria-label="select every job on this page"; } }
            th.n { "id" } th { "queue" } th { "kind" } th { "state" } th.n { "attempt" }
            th.n { "prio" } th { "run at" } th { "created" } th { "finished" } th { "last error" } th { "args" }
        } }
        tbody {
            @for j in &page.jobs {
                tr data-id=(j.id) {
                    @if !ro { td { input type="checkbox" name="ids" value=(j.id) aria-label=(format!("select job {}", j.id)); } }
                    td.n { a href=(app.href(&format!("/jobs/{}", j.id))) { (j.id) } }
                    td { a href=(app.href(&format!("/jobs?queue={}", urlenc(&j.queue)))) { (j.queue) } }
                    td { (j.kind) }
                    td { span class={"state " (j.state)} { (j.state) } }
                    td.n { (j.runs()) "/" (j.max_runs()) }
                    td.n { (j.priority) }
                    td { (layout::time(&j.run_at)) }
                    td { (layout::time(&j.created_at)) }
                    td { (layout::opt_time(&j.finished_at)) }
                    td.last-error {
                        @if let Some(e) = j.errors.last() {
                            span title=(layout::cut(&e.message, 2000)) { (layout::cut(&e.message, 80)) }
                        }
                    }
                    td { code { (layout::cut(&j.args.to_string(), 80)) } }
                }
            }
            @if page.jobs.is_empty() { tr { td colspan="12" .muted { "No job matches." } } }
        }
    }
    };
    let body = html! {
        h1 { "Jobs" }
        (filter_form(&app, &v))
        @if ro { (table) } @else {
        form #bulk method="post" action=(app.href("/bulk")) {
                (csrf(&app))
                (hidden_filter(&q))
                @if !ro {
                    div.bar {
                        span.muted { "Selected:" }
                        button type="submit" name="op" value="retry:selected" { "Retry…" }
                        button.danger type="submit" name="op" value="cancel:selected" { "Cancel…" }
                        span.muted { "All matching this filter:" }
                        button type="submit" name="op" value="retry:matching" { "Retry all…" }
                        button.danger type="submit" name="op" value="cancel:matching" { "Cancel all…" }
                    }
                }
                (table)
            }
        }
        @if let Some(n) = page.scanned {
            p.muted #scanned {
                "No index serves this filter, so each page looks at the next " (n)
                " jobs (by id) and shows the matches among them (" (page.jobs.len()) " here)."
            }
        }
        div.pager {
            @if q.before.is_some() { a href=(app.href(&format!("/jobs?{}", query_string(&q)))) { "← newest" } " " }
            @if let Some(n) = page.next {
                @let at = page.next_finished_at.map(|t| format!("&before_at={}", urlenc(&t.to_rfc3339()))).unwrap_or_default();
                a #older href=(app.href(&format!("/jobs?{}&before={}{at}", query_string(&q), n))) {
                    @if page.scanned.is_some() { "search further →" } @else { "older →" }
                }
            }
        }
    };
    layout::page_timed(
        &app,
        "Jobs",
        "/jobs",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// Percent-encodes a query value.
pub fn urlenc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
