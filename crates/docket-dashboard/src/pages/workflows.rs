//! Workflows: the newest ones with their state and nodes by state, and one workflow's page —
//! its graph drawn server-side as SVG (columns by depth, nodes coloured by state, each a
//! link to its job; live like every page), the same nodes as a table, and cancel / retry of
//! the whole workflow (parents first, through the seam, audited). A batch (a workflow
//! without edges) shows its counts and callbacks there too, and can be closed; the list
//! page lists the newest batches.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use docket_core::workflow::WorkflowDetail;
use docket_core::Store;
use maud::{html, Markup};

use crate::layout::{self, confirm_button};
use crate::App;

/// Workflows listed at most.
pub const MAX_LISTED: i64 = 200;
/// Nodes drawn at most: past this the page shows the table alone (a drawing of thousands
/// of boxes says nothing the counts do not).
pub const MAX_DRAWN: usize = 300;

/// `GET /workflows`.
pub async fn list<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let list = match app.store.workflows(MAX_LISTED).await {
        Ok(l) => l,
        Err(e) => return layout::error(&app, &e),
    };
    let batches = match app.store.batches(MAX_BATCHES).await {
        Ok(l) => l,
        Err(e) => return layout::error(&app, &e),
    };
    let body = html! {
        h1 { "Workflows" }
        p.muted { "The newest " (MAX_LISTED) ": a workflow is running while a node waits, is pending or runs; then succeeded, failed (a node dead) or cancelled." }
        table #workflows {
            thead { tr { th.n { "id" } th { "name" } th { "state" } th.n { "nodes" } th { "by state" } th { "created" } } }
            tbody {
                @for w in &list {
                    tr data-workflow=(w.id) {
                        td.n { a href=(app.href(&format!("/workflows/{}", w.id))) { (w.id) } }
                        td { (docket_core::validate::visible(&w.name)) }
                        td { span class={"state " (w.state)} { (w.state) } }
                        td.n { (w.nodes) }
                        td { (w.counts_text()) }
                        td { (layout::time(&w.created_at)) }
                    }
                }
                @if list.is_empty() { tr { td colspan="6" .muted { "No workflow yet." } } }
            }
        }
        h2 { "Batches" }
        p.muted { "The newest " (MAX_BATCHES) ": a batch is open while members may be added; once closed and every member ended, its callbacks fire, each once." }
        table #batches {
            thead { tr { th.n { "id" } th { "name" } th { "state" } th.n { "members" } th { "by end" } th { "callbacks" } th { "created" } } }
            tbody {
                @for b in &batches {
                    tr data-batch=(b.id) {
                        td.n { a href=(app.href(&format!("/workflows/{}", b.id))) { (b.id) } }
                        td { (docket_core::validate::visible(&b.name)) }
                        td { span class={"state " (b.state())} { (b.state()) } }
                        td.n { (b.total) }
                        td { (b.counts_text()) }
                        td { (callbacks(&app, b)) }
                        td { (layout::time(&b.created_at)) }
                    }
                }
                @if batches.is_empty() { tr { td colspan="7" .muted { "No batch yet." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        "Workflows",
        "/workflows",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// A held edge an operator may skip: still waiting, its parent ended without success (or
/// pruned after it ended).
fn held(w: &WorkflowDetail, e: &docket_core::workflow::WorkflowEdge) -> bool {
    e.state == "waiting"
        && w.nodes.iter().find(|n| n.id == e.parent).is_none_or(|p| {
            matches!(
                p.state,
                docket_core::JobState::Dead | docket_core::JobState::Cancelled
            )
        })
}

/// Batches listed at most.
pub const MAX_BATCHES: i64 = 100;

/// A batch's callbacks: each fired one a link to its job.
fn callbacks<S: Store>(app: &App<S>, b: &docket_core::BatchStatus) -> Markup {
    html! {
        @for (k, (c, job)) in b.callbacks.iter().enumerate() {
            @if k > 0 { ", " }
            @match job {
                Some(j) => { (c) " " a href=(app.href(&format!("/jobs/{}", j.0))) { "(job " (j.0) ")" } }
                None => { (c) " (not fired)" }
            }
        }
        @if b.callbacks.is_empty() { span.muted { "none" } }
    }
}

/// The graph as SVG: a column per depth, nodes in enqueue order within it, edges as lines
/// (dashed while not yet consumed), each node a link to its job. Names come from job data:
/// maud escapes them.
fn graph<S: Store>(app: &App<S>, w: &WorkflowDetail) -> Markup {
    let (box_w, box_h, col, row, pad) = (150.0, 34.0, 190.0, 48.0, 8.0);
    let depth = w.depths();
    let mut rows = vec![0usize; depth.iter().max().map_or(1, |d| d + 1)];
    let mut at = Vec::with_capacity(w.nodes.len());
    for &d in &depth {
        at.push((pad + d as f64 * col, pad + rows[d] as f64 * row));
        rows[d] += 1;
    }
    let width = pad * 2.0 + (rows.len() - 1) as f64 * col + box_w;
    let height =
        pad * 2.0 + (rows.iter().max().copied().unwrap_or(1).max(1) - 1) as f64 * row + box_h;
    let index = |id: docket_core::JobId| w.nodes.iter().position(|n| n.id == id);
    let label = |s: &str| -> String {
        let v = docket_core::validate::visible(s);
        if v.chars().count() > 18 {
            format!("{}…", v.chars().take(17).collect::<String>())
        } else {
            v
        }
    };
    html! {
        div.graph {
            svg #graph width=(width) height=(height) viewBox={"0 0 " (width) " " (height)}
                role="group" aria-label={"the graph of workflow " (w.summary.id)} {
                @for e in &w.edges {
                    @if let (Some(p), Some(c)) = (index(e.parent), index(e.child)) {
                        line x1=(at[p].0 + box_w) y1=(at[p].1 + box_h / 2.0)
                            x2=(at[c].0) y2=(at[c].1 + box_h / 2.0)
                            class={"edge " (e.state)} {}
                    }
                }
                @for (i, n) in w.nodes.iter().enumerate() {
                    a href=(app.href(&format!("/jobs/{}", n.id.0))) {
                        rect x=(at[i].0) y=(at[i].1) width=(box_w) height=(box_h) rx="4"
                            class={"node " (n.state)} {}
                        text x=(at[i].0 + 8.0) y=(at[i].1 + 21.0) {
                            (label(&n.name)) " · " (n.state)
                        }
                    }
                }
            }
        }
    }
}

/// `GET /workflows/{id}`.
pub async fn page<S: Store>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let Ok(id) = id.parse::<i64>() else {
        return layout::bad_request(&app, "a workflow id is a number");
    };
    let w = match app.store.workflow(id).await {
        Ok(w) => w,
        Err(docket_core::StoreError::NotFound(_)) => {
            let body = html! { h1 { "Not found" } p.error { "No workflow " (id) " (or every node of it was pruned)." } };
            let mut r = layout::page(&app, "Not found", "/workflows", body, false);
            *r.status_mut() = axum::http::StatusCode::NOT_FOUND;
            return r;
        }
        Err(e) => return layout::error(&app, &e),
    };
    let batch = match app.store.batch(id).await {
        Ok(b) => Some(b),
        Err(docket_core::StoreError::Invalid(_)) => None,
        Err(e) => return layout::error(&app, &e),
    };
    let depth = w.depths();
    let name = |job: docket_core::JobId| {
        w.nodes
            .iter()
            .find(|n| n.id == job)
            .map(|n| docket_core::validate::visible(&n.name))
            .unwrap_or_else(|| format!("job {job}"))
    };
    let act = |a: &str| format!("/workflows/{id}/{a}");
    let body = html! {
        @match &batch {
            Some(b) => { h1 { "Batch " (id) " " span #state class={"state " (b.state())} { (b.state()) } } }
            None => { h1 { "Workflow " (id) " " span #state class={"state " (w.summary.state)} { (w.summary.state) } } }
        }
        p { (docket_core::validate::visible(&w.summary.name)) " · " (w.summary.nodes) " nodes · " (w.summary.counts_text()) " · created " (layout::time(&w.summary.created_at)) }
        @if let Some(b) = &batch {
            p #batch {
                "A batch, " (b.state()) ": " (b.total) " members (" (b.counts_text()) ") · "
                @match &b.closed_at {
                    Some(t) => { "closed " (layout::time(t)) }
                    None => { "open: members may still be added" }
                }
                " · callbacks: " (callbacks(&app, b))
            }
        }
        @if !app.opts.read_only {
            div.bar #actions {
                @if batch.as_ref().is_some_and(|b| b.closed_at.is_none()) {
                    (confirm_button(&app, &act("close"), "Close batch", "", &format!("Close batch {id}? Nothing more can be added; its callbacks fire once every member has ended.")))
                    " "
                }
                (confirm_button(&app, &act("retry"), "Retry failed nodes", "", &format!("Retry every dead or cancelled node of workflow {id}? Each waits again for its parents.")))
                " "
                (confirm_button(&app, &act("cancel"), "Cancel workflow", "danger", &format!("Cancel every unfinished node of workflow {id}?")))
            }
        }
        @if w.nodes.len() <= MAX_DRAWN {
            (graph(&app, &w))
        } @else {
            p.muted { (w.nodes.len()) " nodes: too many to draw; the table lists them." }
        }
        table #nodes {
            thead { tr { th { "node" } th.n { "job" } th { "state" } th { "kind" } th.n { "depth" } th { "after (policy, edge)" } } }
            tbody {
                @for (i, n) in w.nodes.iter().enumerate() {
                    tr data-node=(n.name) {
                        td { (docket_core::validate::visible(&n.name)) }
                        td.n { a href=(app.href(&format!("/jobs/{}", n.id.0))) { (n.id.0) } }
                        td { span class={"state " (n.state)} { (n.state) } }
                        td { (docket_core::validate::visible(&n.kind)) }
                        td.n { (depth[i]) }
                        td {
                            @for (k, e) in w.edges.iter().filter(|e| e.child == n.id).enumerate() {
                                @if k > 0 { ", " }
                                (name(e.parent)) " (" (e.on_failure) ", " (e.state) ")"
                                @if held(&w, e) {
                                    " "
                                    (confirm_button(&app, &format!("/workflows/{id}/edges/{}/{}/skip", e.parent.0, e.child.0), "Skip edge", "", &format!("Skip the held edge from job {} to job {}? The child then runs once its other parents allow.", e.parent.0, e.child.0)))
                                }
                            }
                        }
                    }
                }
                @if w.nodes.is_empty() { tr { td colspan="6" .muted { "Every node was pruned." } } }
            }
        }
    };
    layout::page_timed(
        &app,
        &format!("Workflow {id}"),
        "/workflows",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}
