//! Every action a person takes on one job or one queue. Each is a POST from a dashboard form:
//! authenticated (the guard), CSRF-checked, validated before anything is written, applied
//! through the seam with the single-job operation's own rules, kept in the audit log, and
//! answered with a redirect back to the page it came from.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use docket_core::{AuditEntry, JobId, QueueLimits, RateLimit, Store};

use crate::auth::{check_csrf, Actor};
use crate::layout;
use crate::App;

/// A parsed `application/x-www-form-urlencoded` body (repeated keys kept, in order).
pub struct FormData(pub Vec<(String, String)>);

impl FormData {
    /// Parses a form body; malformed percent-escapes are kept as they are.
    pub fn parse(body: &str) -> FormData {
        FormData(
            form_urlencoded::parse(body.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The form of an action: parsed, and refused (403) without this process's CSRF token or
    /// from another site.
    pub fn checked<S: Store>(
        app: &App<S>,
        headers: &HeaderMap,
        body: &str,
    ) -> Result<FormData, Box<Response>> {
        let form = FormData::parse(body);
        check_csrf(app, headers, form.get("_csrf"))?;
        Ok(form)
    }

    /// The first value of `key`, trimmed; `None` when absent or empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every value of `key`.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Keeps an action in the audit log; a failure to keep it is logged (the action is done).
pub(crate) async fn audit<S: Store>(
    app: &App<S>,
    actor: &str,
    action: &str,
    target: String,
    detail: serde_json::Value,
) {
    let e = AuditEntry {
        at: None,
        actor: actor.to_string(),
        action: action.to_string(),
        target: layout::cut(&target, 2000),
        detail,
    };
    if let Err(err) = app.store.audit(&e).await {
        tracing::warn!(error = %err, action, "could not keep the audit entry");
    }
}

/// `POST /jobs/{id}/{retry|cancel|skip|run-now|signal}` (a signal's form carries `name`
/// and `payload`, JSON).
pub async fn job<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form = match FormData::checked(&app, &headers, &body) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    let Ok(id) = id.parse::<i64>().map(JobId) else {
        return layout::bad_request(&app, "a job id is a number");
    };
    let s = &app.store;
    let mut detail = serde_json::json!({});
    if action == "signal" {
        let Some(name) = form.get("name") else {
            return layout::bad_request(&app, "a signal needs a name");
        };
        let payload = match form
            .get("payload")
            .map(serde_json::from_str::<serde_json::Value>)
        {
            None => serde_json::Value::Null,
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                return layout::bad_request(&app, &format!("the payload is not JSON: {e}"))
            }
        };
        if let Err(e) = s.signal(id, name, &payload).await {
            return layout::error(&app, &e);
        }
        detail = serde_json::json!({ "name": name });
    }
    let done = match action.as_str() {
        "signal" => Ok(()),
        "retry" => s.retry(id, 1).await.map(|_| ()),
        "cancel" => s.cancel(id).await.map(|_| ()),
        "skip" => s.skip(id).await.map(|_| ()),
        "run-now" => s.run_now(id).await.map(|_| ()),
        _ => return layout::bad_request(&app, "unknown action"),
    };
    if let Err(e) = done {
        return layout::error(&app, &e);
    }
    audit(
        &app,
        &actor,
        &format!("job.{action}"),
        format!("job {id}"),
        detail,
    )
    .await;
    app.poke();
    Redirect::to(&app.href(&format!("/jobs/{id}"))).into_response()
}

/// `POST /workflows/{id}/{retry|cancel|close}`: the whole workflow, parents first; `close`
/// closes a batch (its callbacks fire once every member has ended).
pub async fn workflow<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(r) = FormData::checked(&app, &headers, &body) {
        return *r;
    }
    let Ok(id) = id.parse::<i64>() else {
        return layout::bad_request(&app, "a workflow id is a number");
    };
    let done = match action.as_str() {
        "retry" => app.store.retry_workflow(id).await,
        "cancel" => app.store.cancel_workflow(id).await,
        "close" => app
            .store
            .close_batch(id)
            .await
            .map(|b| u64::try_from(b.unfinished).unwrap_or(0)),
        _ => return layout::bad_request(&app, "unknown action"),
    };
    let n = match done {
        Ok(n) => n,
        Err(e) => return layout::error(&app, &e),
    };
    audit(
        &app,
        &actor,
        &if action == "close" {
            "batch.close".to_string()
        } else {
            format!("workflow.{action}")
        },
        format!("workflow {id}"),
        serde_json::json!({ "nodes": n }),
    )
    .await;
    app.poke();
    Redirect::to(&app.href(&format!("/workflows/{id}"))).into_response()
}

/// `POST /workflows/{id}/edges/{parent}/{child}/skip`: an operator's skip of a held edge.
pub async fn skip_edge<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    Path((id, parent, child)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(r) = FormData::checked(&app, &headers, &body) {
        return *r;
    }
    let (Ok(id), Ok(parent), Ok(child)) = (
        id.parse::<i64>(),
        parent.parse::<i64>(),
        child.parse::<i64>(),
    ) else {
        return layout::bad_request(&app, "a workflow's and its jobs' ids are numbers");
    };
    if let Err(e) = app
        .store
        .skip_edge(docket_core::JobId(parent), docket_core::JobId(child))
        .await
    {
        return layout::error(&app, &e);
    }
    audit(
        &app,
        &actor,
        "workflow.skip_edge",
        format!("job {child}"),
        serde_json::json!({ "workflow": id, "parent": parent, "child": child }),
    )
    .await;
    app.poke();
    Redirect::to(&app.href(&format!("/workflows/{id}"))).into_response()
}

fn parse_limits(form: &FormData) -> Result<QueueLimits, String> {
    let int = |k: &str| -> Result<Option<i32>, String> {
        form.get(k)
            .map(|v| {
                v.parse::<i32>()
                    .map_err(|_| format!("{k} must be a whole number"))
            })
            .transpose()
    };
    let rate = match (int("rate_limit")?, form.get("rate_period")) {
        (None, None) => None,
        (Some(limit), Some(p)) => Some(RateLimit {
            limit,
            period: docket_core::duration::parse_bounded(
                "rate period",
                p,
                Duration::from_millis(1),
                Duration::from_secs(86_400),
            )
            .map_err(|e| e.to_string())?,
        }),
        _ => return Err("a rate needs both a limit and a period (e.g. 100 per 1s)".into()),
    };
    let limits = QueueLimits {
        max_running: int("max_running")?,
        key_max_running: int("key_max_running")?,
        rate,
    };
    limits.validate().map_err(|e| e.to_string())?;
    Ok(limits)
}

/// `POST /queues/{queue}/{pause|resume|limits}`.
pub async fn queue<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    Path((queue, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form = match FormData::checked(&app, &headers, &body) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    if let Err(e) = docket_core::validate::queue(&queue) {
        return layout::bad_request(&app, &e.to_string());
    }
    let s = &app.store;
    let (done, detail) = match action.as_str() {
        "pause" => (s.pause_queue(&queue).await, serde_json::json!({})),
        "resume" => (s.resume_queue(&queue).await, serde_json::json!({})),
        "limits" => match parse_limits(&form) {
            Ok(l) => {
                let detail = serde_json::to_value(l).unwrap_or_default();
                (s.set_queue_limits(&queue, &l).await, detail)
            }
            Err(msg) => return layout::bad_request(&app, &msg),
        },
        _ => return layout::bad_request(&app, "unknown action"),
    };
    if let Err(e) = done {
        return layout::error(&app, &e);
    }
    audit(
        &app,
        &actor,
        &format!("queue.{action}"),
        format!("queue {queue}"),
        detail,
    )
    .await;
    app.poke();
    Redirect::to(&app.href("/")).into_response()
}

/// `POST /cron/{name}/{pause|resume|run}`: pause or resume a periodic schedule, or enqueue
/// one run of it now (its schedule stays as it is).
pub async fn cron<S: Store>(
    State(app): State<Arc<App<S>>>,
    Extension(Actor(actor)): Extension<Actor>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(r) = FormData::checked(&app, &headers, &body) {
        return *r;
    }
    let s = &app.store;
    let not_found = || {
        let mut r = layout::bad_request(&app, &format!("no periodic job named {name}"));
        *r.status_mut() = axum::http::StatusCode::NOT_FOUND;
        r
    };
    let detail = match action.as_str() {
        "pause" | "resume" => match s.pause_periodic(&name, action == "pause").await {
            Ok(true) => serde_json::json!({}),
            Ok(false) => return not_found(),
            Err(e) => return layout::error(&app, &e),
        },
        "run" => match docket_core::periodic::run_now(s, &name, chrono::Utc::now()).await {
            Ok(Some(e)) => serde_json::json!({ "job": e.id, "duplicate": e.duplicate }),
            Ok(None) => return not_found(),
            Err(e) => return layout::error(&app, &e),
        },
        _ => return layout::bad_request(&app, "unknown action"),
    };
    audit(
        &app,
        &actor,
        &format!("cron.{action}"),
        format!("periodic {name}"),
        detail,
    )
    .await;
    app.poke();
    Redirect::to(&app.href("/cron")).into_response()
}
