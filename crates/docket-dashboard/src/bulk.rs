//! Bulk retry and cancel: on the selected jobs of a page, or on every job a filter matches.
//!
//! "Every job the filter matches" walks the filter's keyset pages newest first, [`BATCH`]
//! ids at a time, applying the action to each page through [`Store::bulk`] — so no
//! statement holds more than one batch of rows, other work goes on in between, and the task
//! page shows how far it got. The walk is by id below a cursor: a job the action changed
//! (a replayed dead job is pending now) is never visited twice, and jobs enqueued after the
//! start are not included.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use docket_core::{BulkAction, JobId, JobQuery, Store};

use crate::actions::{audit, FormData};
use crate::auth::Actor;
use crate::layout;
use crate::pages::jobs::{query_from, query_string};
use crate::{App, TaskState};

/// Jobs per batch of a bulk action over a filter.
pub const BATCH: i64 = 200;

/// Tasks kept for their progress pages (the oldest finished ones are forgotten).
const KEEP_TASKS: usize = 100;

fn action_of(s: Option<&str>) -> Option<BulkAction> {
    match s {
        Some("retry") => Some(BulkAction::Retry),
        Some("cancel") => Some(BulkAction::Cancel),
        _ => None,
    }
}

/// `POST /bulk`: `op` = `retry|cancel` `:` `selected|matching`, `ids`, and the filter.
pub async fn start<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form = match FormData::checked(&app, &headers, &body) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    // `op` is ACTION:SCOPE (the form's buttons), or `action` and `scope` given apart.
    let (action, scope) = match form.get("op").and_then(|o| o.split_once(':')) {
        Some((a, s)) => (Some(a), Some(s)),
        None => (form.get("action"), form.get("scope")),
    };
    let Some(action) = action_of(action) else {
        return layout::bad_request(&app, "action must be retry or cancel");
    };
    let query = match query_from(|k| form.get(k)) {
        Ok(q) => q,
        Err(msg) => return layout::bad_request(&app, &msg),
    };
    let ids: Result<Vec<JobId>, _> = form
        .all("ids")
        .iter()
        .map(|s| s.trim().parse::<i64>().map(JobId))
        .collect();
    let Ok(ids) = ids else {
        return layout::bad_request(&app, "job ids are numbers");
    };
    if !matches!(scope, Some("selected" | "matching")) {
        return layout::bad_request(&app, "scope must be selected or matching");
    }
    let matching = scope == Some("matching");
    if !matching && ids.is_empty() {
        return layout::bad_request(&app, "no job selected");
    }
    // Nothing happens before the operator has seen how many jobs it touches: the first post
    // answers with a confirmation naming the count; only the post from that page (carrying
    // `confirm`) acts. Done on the server, so it holds without JavaScript too.
    let unconfirmed = docket_core::mutants::active(docket_core::mutants::Mutant::BulkUnconfirmed);
    if form.get("confirm").is_none() && !unconfirmed {
        let count = if matching {
            match count_matching(&app, &query).await {
                Ok(c) => c,
                Err(e) => return layout::error(&app, &e),
            }
        } else {
            Counted::Exactly(ids.len() as u64)
        };
        return confirm_page(&app, action, &query, &ids, matching, count);
    }
    match scope {
        Some("selected") => {
            let report = match app.store.bulk(&ids, action).await {
                Ok(r) => r,
                Err(e) => return layout::error(&app, &e),
            };
            let target = ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",");
            audit(
                &app,
                &actor,
                &format!("bulk.{}", action.as_str()),
                format!("jobs {target}"),
                serde_json::json!({"changed": report.changed, "skipped": report.skipped}),
            )
            .await;
            app.poke();
            Redirect::to(&app.href(&format!("/jobs?{}", query_string(&query)))).into_response()
        }
        Some("matching") => {
            let id = app.next_task.fetch_add(1, Ordering::Relaxed);
            let filter = query_string(&query);
            {
                let mut tasks = app.tasks.lock().expect("poisoned");
                if tasks.len() >= KEEP_TASKS {
                    let oldest = tasks.iter().filter(|(_, t)| t.done).map(|(k, _)| *k).min();
                    if let Some(k) = oldest {
                        tasks.remove(&k);
                    }
                }
                tasks.insert(
                    id,
                    TaskState {
                        action: action.as_str().into(),
                        filter: filter.clone(),
                        ..Default::default()
                    },
                );
            }
            tokio::spawn(run(app.clone(), id, action, query, actor));
            Redirect::to(&app.href(&format!("/tasks/{id}"))).into_response()
        }
        _ => layout::bad_request(&app, "scope must be selected or matching"),
    }
}

/// Counting stops here: the confirmation says "at least" beyond it (a page of 1,000 at a
/// time, so at most [`COUNT_PAGES`] searches).
pub const COUNT_CAP: u64 = 10_000;
const COUNT_PAGES: usize = 20;

/// How many jobs a bulk action will touch, as far as it was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// All of them.
    Exactly(u64),
    /// Counting stopped (the cap, or a filter no index serves that needed more pages).
    AtLeast(u64),
}

impl std::fmt::Display for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Counted::Exactly(1) => write!(f, "1 job"),
            Counted::Exactly(n) => write!(f, "{n} jobs"),
            Counted::AtLeast(n) => write!(f, "at least {n} jobs"),
        }
    }
}

/// Counts what `query` matches now, newest first, by the same keyset pages the action walks.
async fn count_matching<S: Store>(app: &App<S>, query: &JobQuery) -> docket_core::Result<Counted> {
    let mut q = query.clone();
    q.limit = docket_core::MAX_PAGE;
    q.before = None;
    q.before_finished_at = None;
    let mut n = 0u64;
    for _ in 0..COUNT_PAGES {
        let page = app.store.search(&q).await?;
        n += page.jobs.len() as u64;
        if n >= COUNT_CAP {
            return Ok(Counted::AtLeast(COUNT_CAP));
        }
        match page.next {
            Some(next) => {
                q.before = Some(next);
                q.before_finished_at = page.next_finished_at;
            }
            None => return Ok(Counted::Exactly(n)),
        }
    }
    Ok(Counted::AtLeast(n))
}

/// The confirmation: the action, the count and the filter, one button that repeats the post
/// with `confirm`, and a way back that changes nothing.
fn confirm_page<S: Store>(
    app: &App<S>,
    action: BulkAction,
    query: &JobQuery,
    ids: &[JobId],
    matching: bool,
    count: Counted,
) -> Response {
    use maud::html;
    let verb = match action {
        BulkAction::Retry => "Retry",
        BulkAction::Cancel => "Cancel",
    };
    let scope = if matching { "matching" } else { "selected" };
    let filter = query_string(query);
    let n = match count {
        Counted::Exactly(n) | Counted::AtLeast(n) => n,
    };
    let what = if matching {
        if filter.is_empty() {
            "every job".to_string()
        } else {
            format!("every job matching {filter}")
        }
    } else {
        "the selected jobs".to_string()
    };
    let body = html! {
        h1 { "Confirm: " (verb) " " (count) }
        p #confirm-count { (verb) " " strong { (count) } " — " (what) "." }
        @if matching {
            p.muted { "Counted just now; jobs that start matching before the action walks them are included, and retry or cancel skips jobs whose state does not allow it." }
        }
        @if n == 0 {
            p { "Nothing to do." }
        }
        form #confirm method="post" action=(app.href("/bulk")) {
            (layout::csrf(app))
            input type="hidden" name="op" value=(format!("{}:{scope}", action.as_str()));
            input type="hidden" name="confirm" value=(n);
            @for id in ids { input type="hidden" name="ids" value=(id.0); }
            (crate::pages::jobs::hidden_filter(query))
            @if n > 0 {
                button type="submit" class=(if action == BulkAction::Cancel { "danger" } else { "" }) {
                    (verb) " " (count)
                }
                " "
            }
            a #back href=(app.href(&format!("/jobs?{filter}"))) { "Go back, change nothing" }
        }
    };
    layout::page(app, "Confirm", "/jobs", body, false)
}

/// The walk over every job `query` matches.
async fn run<S: Store>(
    app: Arc<App<S>>,
    id: u64,
    action: BulkAction,
    mut query: JobQuery,
    actor: String,
) {
    query.limit = BATCH;
    query.before = None;
    // Recorded before the first change: a walk that dies part way (the process killed, the
    // database gone) still leaves who started what in the audit log; the closing entry
    // below adds what it did.
    let filter = app
        .tasks
        .lock()
        .expect("poisoned")
        .get(&id)
        .map(|t| t.filter.clone())
        .unwrap_or_default();
    audit(
        &app,
        &actor,
        &format!("bulk.{}.start", action.as_str()),
        format!("matching {filter}"),
        serde_json::json!({"task": id}),
    )
    .await;
    let update = |f: &dyn Fn(&mut TaskState)| {
        if let Some(t) = app.tasks.lock().expect("poisoned").get_mut(&id) {
            f(t);
        }
    };
    let mut error = None;
    loop {
        let page = match app.store.search(&query).await {
            Ok(p) => p,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        let ids: Vec<JobId> = page.jobs.iter().map(|j| j.id).collect();
        // A windowed page (a filter no index serves) may hold no match and still go on.
        if !ids.is_empty() {
            match app.store.bulk(&ids, action).await {
                Ok(r) => update(&|t| {
                    t.changed += r.changed;
                    t.skipped += r.skipped;
                    t.scanned += ids.len() as u64;
                }),
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        app.poke();
        match page.next {
            Some(n) => {
                query.before = Some(n);
                query.before_finished_at = page.next_finished_at;
            }
            None => break,
        }
    }
    let state = {
        let mut tasks = app.tasks.lock().expect("poisoned");
        let t = tasks.entry(id).or_default();
        t.done = true;
        t.error = error;
        t.clone()
    };
    audit(
        &app,
        &actor,
        &format!("bulk.{}", action.as_str()),
        format!("matching {}", state.filter),
        serde_json::json!({"task": id, "changed": state.changed, "skipped": state.skipped,
                           "scanned": state.scanned, "error": state.error}),
    )
    .await;
    app.poke();
}
