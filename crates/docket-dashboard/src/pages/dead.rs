//! Dead jobs grouped by kind and last error, each group replayable at once; and the progress
//! page of a bulk action.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use docket_core::{JobQuery, JobState, Store};
use maud::html;

use crate::layout::{self, csrf};
use crate::pages::jobs::{query_string, urlenc};
use crate::App;

/// `GET /dead`.
pub async fn page<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let groups = match app.store.dead_groups(100).await {
        Ok(g) => g,
        Err(e) => return layout::error(&app, &e),
    };
    let ro = app.opts.read_only;
    let body = html! {
        h1 { "Dead jobs" }
        p.muted { "Grouped by kind and last error, of the latest 100,000 dead jobs." }
        table #dead {
            thead { tr {
                th { "kind" } th { "last error" } th.n { "jobs" } th { "newest" } th { "example" }
                @if !ro { th { "" } }
            } }
            tbody {
                @for g in &groups {
                    @let q = JobQuery { kind: Some(g.kind.clone()), state: Some(JobState::Dead),
                                        last_error: Some(g.error.clone()), ..Default::default() };
                    tr {
                        td { a href=(app.href(&format!("/jobs?kind={}&state=dead", urlenc(&g.kind)))) { (g.kind) } }
                        td.error { (layout::cut(&g.error, 300)) }
                        td.n { a href=(app.href(&format!("/jobs?{}", query_string(&q)))) { (g.count) } }
                        td { (layout::time(&g.newest_at)) }
                        td { a href=(app.href(&format!("/jobs/{}", g.example))) { (g.example) } }
                        @if !ro {
                            td {
                                form.inline method="post" action=(app.href("/bulk")) {
                                    (csrf(&app))
                                    input type="hidden" name="kind" value=(g.kind);
                                    input type="hidden" name="state" value="dead";
                                    input type="hidden" name="error" value=(g.error);
                                    button type="submit" name="op" value="retry:matching" { "Replay all…" }
                                }
                            }
                        }
                    }
                }
                @if groups.is_empty() { tr { td colspan="6" .muted { "No dead job." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Dead",
        "/dead",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// `GET /tasks/{id}`: a bulk action's progress (JSON with `Accept: application/json`).
pub async fn task<S: Store>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    let Some(t) = app.tasks.lock().expect("poisoned").get(&id).cloned() else {
        return (StatusCode::NOT_FOUND, "no such task").into_response();
    };
    if headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
    {
        return axum::Json(t).into_response();
    }
    let body = html! {
        h1 { "Bulk " (t.action) }
        dl.kv #task data-done=(t.done) {
            dt { "filter" } dd { code { (t.filter) } }
            dt { "changed" } dd #changed { (t.changed) }
            dt { "left alone" } dd { (t.skipped) }
            dt { "looked at" } dd { (t.scanned) }
            dt { "status" } dd #status { @if t.done { "done" } @else { "running…" } }
            @if let Some(e) = &t.error { dt { "error" } dd.error { (e) } }
        }
        p { a href=(app.href(&format!("/jobs?{}", t.filter))) { "the jobs this filter matches" } }
    };
    layout::page(
        &app,
        "Bulk action",
        "/jobs",
        body,
        layout::fragment(&headers),
    )
}
