//! "Which error is new?": retrying and dead jobs grouped by the fingerprint of their last
//! error (numbers, ids, e-mail addresses and UUIDs normalised: `docket_core::error_groups`),
//! newest cause first, each group one click from its jobs and from retry or cancel.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use docket_core::error_groups::{group, ErrorGroup};
use docket_core::Store;
use maud::{html, Markup};

use crate::layout::{self, csrf};
use crate::pages::jobs::urlenc;
use crate::App;

/// Errored jobs read per state: the page groups the newest this many retrying and this many
/// dead jobs (two index walks).
pub const READ_PER_STATE: i64 = 3_000;

/// Job ids listed on a group's page (its bulk actions take these).
pub const GROUP_IDS_SHOWN: usize = 500;

/// A time with its zone, and how long ago.
fn when(t: &Option<DateTime<Utc>>) -> Markup {
    match t {
        None => html! { "–" },
        Some(t) => {
            let ago = (Utc::now() - *t).num_milliseconds() as f64 / 1000.0;
            html! { (layout::time(t)) " UTC " span.muted { "(" (layout::age(ago)) " ago)" } }
        }
    }
}

fn group_href<S: Store>(app: &App<S>, g: &ErrorGroup) -> String {
    app.href(&format!(
        "/errors/group?queue={}&kind={}&fp={}",
        urlenc(&g.queue),
        urlenc(&g.kind),
        urlenc(&g.fingerprint)
    ))
}

async fn groups<S: Store>(app: &App<S>) -> Result<Vec<ErrorGroup>, Response> {
    match app.store.errored_jobs(READ_PER_STATE).await {
        Ok(rows) => Ok(group(&rows)),
        Err(e) => Err(layout::error(app, &e)),
    }
}

/// `GET /errors[?sort=count]`.
pub async fn page<S: Store>(
    State(app): State<Arc<App<S>>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let mut groups = match groups(&app).await {
        Ok(g) => g,
        Err(r) => return r,
    };
    let by_count = params.get("sort").is_some_and(|s| s == "count");
    if !by_count {
        // Newest cause first: the question is which error is new.
        groups.sort_by_key(|g| std::cmp::Reverse(g.first_seen));
    }
    groups.truncate(200);
    let body = html! {
        h1 { "Errors" }
        p.muted {
            "Retrying and dead jobs grouped by queue, kind and the fingerprint of their last error (numbers, ids, e-mail addresses and UUIDs replaced), of the newest "
            (READ_PER_STATE) " of each. "
            @if by_count { a href=(app.href("/errors")) { "Newest first" } " · largest first" }
            @else { "Newest first · " a href=(app.href("/errors?sort=count")) { "largest first" } }
        }
        table #errors {
            thead { tr {
                th { "error" } th { "queue" } th { "kind" } th.n { "retrying" } th.n { "dead" }
                th { "first seen" } th { "last seen" } th { "" }
            } }
            tbody {
                @for g in &groups {
                    tr data-fingerprint=(g.fingerprint) {
                        td.error title=(g.example_message) { (layout::cut(&g.fingerprint, 300)) }
                        td { (g.queue) }
                        td { (g.kind) }
                        td.n { (g.retrying) }
                        td.n { (g.dead) }
                        td { (when(&g.first_seen)) }
                        td { (when(&g.last_seen)) }
                        td { a href=(group_href(&app, g)) { (g.count()) " jobs →" } }
                    }
                }
                @if groups.is_empty() { tr { td colspan="8" .muted { "No job is retrying or dead." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Errors",
        "/errors",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// `GET /errors/group?queue=Q&kind=K&fp=F`: one group's jobs, with retry and cancel of them
/// (through the bulk action's confirmation).
pub async fn group_page<S: Store>(
    State(app): State<Arc<App<S>>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let get = |k: &str| params.get(k).map(String::as_str).unwrap_or("");
    let groups = match groups(&app).await {
        Ok(g) => g,
        Err(r) => return r,
    };
    let found = groups
        .into_iter()
        .find(|g| g.queue == get("queue") && g.kind == get("kind") && g.fingerprint == get("fp"));
    let ro = app.opts.read_only;
    let body = match &found {
        None => html! {
            h1 { "Error group" }
            p #gone { "No retrying or dead job has this error any more (retried, cancelled or pruned). "
                a href=(app.href("/errors")) { "All errors" } }
        },
        Some(g) => html! {
            h1 { "Error group" }
            dl.kv {
                dt { "fingerprint" } dd.error { (g.fingerprint) }
                dt { "newest message" } dd.error { (layout::cut(&g.example_message, 2000)) }
                dt { "queue / kind" } dd { (g.queue) " / " (g.kind) }
                dt { "jobs" } dd #group-count { (g.count()) " (" (g.retrying) " retrying, " (g.dead) " dead)" }
                dt { "first seen" } dd { (when(&g.first_seen)) }
                dt { "last seen" } dd { (when(&g.last_seen)) }
            }
            form #group-bulk method="post" action=(app.href("/bulk")) {
                (csrf(&app))
                @for id in g.ids.iter().take(GROUP_IDS_SHOWN) { input type="hidden" name="ids" value=(id.0); }
                @if !ro {
                    div.bar {
                        button type="submit" name="op" value="retry:selected" { "Retry these…" }
                        button.danger type="submit" name="op" value="cancel:selected" { "Cancel these…" }
                    }
                }
            }
            @if g.ids.len() > GROUP_IDS_SHOWN {
                p.muted { "The newest " (GROUP_IDS_SHOWN) " of " (g.ids.len()) " are listed and acted on." }
            }
            ul #group-jobs.ids {
                @for id in g.ids.iter().take(GROUP_IDS_SHOWN) {
                    li { a href=(app.href(&format!("/jobs/{}", id.0))) { (id.0) } }
                }
            }
        },
    };
    layout::page_timed(
        &app,
        "Error group",
        "/errors",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}
