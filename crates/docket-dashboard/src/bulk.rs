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
    match scope {
        Some("selected") => {
            let ids: Result<Vec<JobId>, _> = form
                .all("ids")
                .iter()
                .map(|s| s.trim().parse::<i64>().map(JobId))
                .collect();
            let Ok(ids) = ids else {
                return layout::bad_request(&app, "job ids are numbers");
            };
            if ids.is_empty() {
                return layout::bad_request(&app, "no job selected");
            }
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
