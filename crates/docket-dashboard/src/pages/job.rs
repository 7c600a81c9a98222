//! One job: every field as stored, args and metadata pretty and escaped, each attempt's
//! error with its owner and time, the lease, "why is it not running?" for a pending job, the
//! output its handler recorded (a succeeded job's), and the actions its state allows.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::{JobId, JobState, Store};
use maud::html;

use crate::layout::{self, button, confirm_button};
use crate::pages::jobs::urlenc;
use crate::App;

/// `GET /jobs/{id}`.
pub async fn page<S: Store>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let Ok(id) = id.parse::<i64>().map(JobId) else {
        return layout::bad_request(&app, "a job id is a number");
    };
    let j = match app.store.get(id).await {
        Ok(j) => j,
        Err(docket_core::StoreError::NotFound(_)) => return gone(&app, id),
        Err(e) => return layout::error(&app, &e),
    };
    let why = if j.state == JobState::Pending {
        match app.store.why(id).await {
            Ok(w) => Some(w),
            Err(e) => return layout::error(&app, &e),
        }
    } else {
        None
    };
    let output = if j.state == JobState::Succeeded {
        match app.store.job_output(id).await {
            Ok(o) => o.output,
            Err(e) => return layout::error(&app, &e),
        }
    } else {
        None
    };
    let steps = match app.store.job_steps(id).await {
        Ok(s) => s,
        Err(e) => return layout::error(&app, &e),
    };
    let scheduled = j.state == JobState::Pending
        && why.as_ref().is_some_and(|w| {
            w.gates.iter().any(|g| {
                matches!(
                    g,
                    docket_core::Gate::ScheduledLater { .. }
                        | docket_core::Gate::Sleeping { .. }
                        | docket_core::Gate::WaitingForSignal { .. }
                )
            })
        });
    let act = |a: &str| format!("/jobs/{}/{a}", j.id);
    let body = html! {
        h1 { "Job " (j.id) " " span #state class={"state " (j.state)} { (j.state) } }
        div.bar #actions {
            @if matches!(j.state, JobState::Dead | JobState::Cancelled) { (button(&app, &act("retry"), "Retry", "")) }
            @if scheduled { (button(&app, &act("run-now"), "Run now", "")) }
            @if matches!(j.state, JobState::Waiting | JobState::Pending | JobState::Running) && j.cancel_requested_at.is_none() {
                (confirm_button(&app, &act("cancel"), "Cancel", "danger", &format!("Cancel job {}?", j.id.0)))
            }
            @if j.state == JobState::Dead { (confirm_button(&app, &act("skip"), "Skip (release its ordering key)", "danger", &format!("Skip dead job {} and let the next job of its ordering key run?", j.id.0))) }
        }
        @if !j.invalid.is_empty() {
            p.error { "This row was written around Docket's checks: " (j.invalid.join("; ")) }
        }
        @if matches!(j.state, JobState::Pending | JobState::Running) && !app.opts.read_only {
            @let waiting = why.as_ref().and_then(|w| w.gates.iter().find_map(|g| match g {
                docket_core::Gate::WaitingForSignal { name, .. } => Some(name.clone()),
                _ => None,
            }));
            details #signal open[waiting.is_some()] {
                summary { "Send a signal" }
                form method="post" action=(app.href(&act("signal"))) {
                    (layout::csrf(&app))
                    label { "name " input name="name" required maxlength="128" value=(waiting.unwrap_or_default()); }
                    label { " payload (JSON) " input name="payload" value="null"; }
                    " " button type="submit" { "Send" }
                }
            }
        }
        @if let Some(w) = &why {
            h2 { "Why is it not running?" }
            @if w.next_up() {
                p #why { "Nothing holds it: the next claim of queue " (w.queue) " takes it." }
            } @else {
                ul.gates #why { @for g in &w.gates { li {
                    (docket_core::validate::visible(&g.describe(&w.queue)))
                    // One click to the jobs that hold it: which queues fill the key, which
                    // job is ahead in the ordering.
                    @match g {
                        docket_core::Gate::KeyFull { key, .. } => {
                            " — " a href=(app.href(&format!("/jobs?concurrency_key={}&state=running", urlenc(key)))) { "its running jobs" }
                        }
                        docket_core::Gate::OrderingBehind { job, .. } => {
                            " — " a href=(app.href(&format!("/jobs/{job}"))) { "job " (job) }
                        }
                        docket_core::Gate::NoLiveWorker => {
                            " — " a href=(app.href("/workers")) { "workers" }
                        }
                        _ => {}
                    }
                } } }
            }
        }
        h2 { "Job" }
        dl.kv {
            dt { "queue" } dd { a href=(app.href(&format!("/jobs?queue={}", super::jobs::urlenc(&j.queue)))) { (j.queue) } }
            dt { "kind" } dd { (j.kind) }
            dt { "attempt" } dd { (j.runs()) " of " (j.max_runs()) }
            dt { "priority" } dd { (j.priority) }
            dt { "run at" } dd { (layout::time(&j.run_at)) }
            dt { "created" } dd { (layout::time(&j.created_at)) }
            dt { "last claimed" } dd { (layout::opt_time(&j.attempted_at)) }
            dt { "finished" } dd { (layout::opt_time(&j.finished_at)) }
            @if let Some(p) = &j.progress {
                dt { "progress" } dd #progress {
                    progress max="100" value=(p.percent) { (p.percent) "%" }
                    " " (format!("{:.1}%", p.percent)) " " (docket_core::validate::visible(&p.message))
                    " " span.muted { "(" (layout::time(&p.at)) ")" }
                }
            }
            dt { "lease" } dd {
                @if let Some(o) = &j.lease_owner {
                    a href=(app.href("/workers")) title="the worker registry" { (o) } " until " (layout::opt_time(&j.lease_expires_at))
                }
                @else { "–" }
            }
            dt { "cancel requested" } dd { (layout::opt_time(&j.cancel_requested_at)) }
            dt { "unique key" } dd { (shown(&j.unique_key)) }
            dt { "ordering key" } dd {
                @if let Some(k) = &j.ordering_key {
                    a #ordering-key href=(app.href(&format!("/jobs?ordering_key={}", super::jobs::urlenc(k)))) title="every job of this key" { (shown(&j.ordering_key)) }
                } @else { "–" }
            }
            dt { "concurrency key" } dd {
                @if let Some(k) = &j.concurrency_key {
                    a #concurrency-key href=(app.href(&format!("/jobs?concurrency_key={}", super::jobs::urlenc(k)))) title="every job of this key" { (shown(&j.concurrency_key)) }
                } @else { "–" }
            }
            dt { "blocked" } dd { (j.blocked) }
        }
        @if let Some(v) = &output {
            h2 { "Output" }
            @let text = layout::pretty(v);
            @if text.len() > OUTPUT_SHOWN {
                pre #output { (layout::cut(&text, OUTPUT_SHOWN)) }
                p.muted { (text.len()) " bytes; " code { "docket jobs output " (j.id) } " prints all of it." }
            } @else {
                pre #output { (docket_core::validate::visible_lines(&text)) }
            }
        }
        @if !steps.is_empty() {
            h2 { "Steps" }
            table #steps {
                thead { tr { th { "step" } th.n { "run" } th { "recorded" } th { "output" } } }
                tbody {
                    @for s in &steps {
                        tr {
                            td { (docket_core::validate::visible(&s.name)) }
                            td.n { (s.attempt) }
                            td { (layout::time(&s.recorded_at)) }
                            td { code { (layout::cut(&s.output.to_string(), 200)) } }
                        }
                    }
                }
            }
        }
        h2 { "Args" }
        pre #args { (layout::pretty(&j.args)) }
        h2 { "Metadata" }
        pre #metadata { (layout::pretty(&j.metadata)) }
        h2 { "Attempts and errors" }
        table #errors {
            thead { tr { th.n { "attempt" } th { "at" } th { "class" } th { "owner" } th { "message" } } }
            tbody {
                @for e in &j.errors {
                    tr {
                        td.n { (e.attempt) }
                        td { (layout::time(&e.at)) }
                        td { (e.class) }
                        td { (e.owner.as_deref().unwrap_or("–")) }
                        td.error { (e.message) }
                    }
                }
                @if j.errors.is_empty() { tr { td colspan="5" .muted { "No error recorded." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        &format!("Job {}", j.id),
        "/jobs",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// Characters of an output shown on the page (outputs may be up to 16 MiB).
const OUTPUT_SHOWN: usize = 64 * 1024;

/// A key as shown: control characters and bidi overrides visible, "–" for none.
fn shown(k: &Option<String>) -> String {
    k.as_deref()
        .map_or_else(|| "–".to_string(), docket_core::validate::visible)
}

/// The 404 of a job with no row, saying why a job that existed may have none: a success
/// completed with delete leaves none, and finished jobs go after their retention.
fn gone<S: Store>(app: &App<S>, id: JobId) -> Response {
    let body = html! {
        h1 { "Job " (id) " is not here" }
        p #gone {
            "No job " (id) " is stored. If it existed, it has finished and is gone: a job \
             completed with delete (" code { "keep_succeeded = false" } ", or a handler that \
             deletes on success) leaves no row, and the leader prunes finished jobs once \
             their retention has passed. Its enqueue may also have rolled back."
        }
        p { a href=(app.href("/jobs")) { "Search the jobs" } " · " a href=(app.href("/audit")) { "audit log" } }
    };
    let mut r = layout::page(app, "Job not found", "/jobs", body, false);
    *r.status_mut() = axum::http::StatusCode::NOT_FOUND;
    r
}
