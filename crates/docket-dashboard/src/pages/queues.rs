//! The queues page (the dashboard's home): per queue, counts by state (capped), the ready
//! backlog and its oldest age, leases near expiry, workers, pause and limits with their
//! actions; throughput and pickup latency over the last hour from the workers' samples.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, DurationRound, Utc};
use docket_core::{histogram, BlockedReason, DepthSample, QueueHealth, Sample, Store};
use maud::{html, Markup};

use crate::layout::{self, button, confirm_button, csrf};
use crate::pages::jobs::urlenc;
use crate::{chart, App};

/// The cap of the page's counts.
pub const CAP: i64 = 10_000;

/// Per-minute totals over the last hour: (jobs done per minute, mean wait ms) for the 60
/// complete minutes before the current one, oldest first, from `samples` (optionally one
/// queue). The current minute is left out: it is still filling, and drawn it would read as a
/// sudden drop.
fn series(samples: &[Sample], now: DateTime<Utc>, queue: Option<&str>) -> (Vec<f64>, Vec<f64>) {
    let end = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    let mut by: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| queue.is_none_or(|q| s.queue == q))
    {
        let m = (end - s.minute).num_minutes();
        if (1..=60).contains(&m) {
            let e = by.entry(60 - m).or_default();
            e.0 += s.succeeded + s.failed;
            e.1 += s.wait_ms_sum;
            e.2 += s.wait_count;
        }
    }
    let mut done = vec![0.0; 60];
    let mut wait = vec![0.0; 60];
    for (i, (n, w, c)) in by {
        done[i as usize] = n as f64;
        wait[i as usize] = if c > 0 { w as f64 / c as f64 } else { 0.0 };
    }
    (done, wait)
}

/// Wait and run-time histograms over the complete minutes of the last hour, merged
/// (optionally one queue).
fn hists(samples: &[Sample], now: DateTime<Utc>, queue: Option<&str>) -> (Vec<i64>, Vec<i64>) {
    let end = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    let (mut w, mut r) = (Vec::new(), Vec::new());
    for s in samples
        .iter()
        .filter(|s| queue.is_none_or(|q| s.queue == q) && s.minute < end)
    {
        histogram::add(&mut w, &s.wait_hist);
        histogram::add(&mut r, &s.run_hist);
    }
    (w, r)
}

/// Minutes of depth history the page draws.
pub const DEPTH_MINUTES: i64 = 180;

/// Complete minutes of a growing backlog before the page flags it.
pub const GROWING_MINUTES: usize = 5;

/// One queue's depth history (`""`: the whole database) over the [`DEPTH_MINUTES`] complete
/// minutes before the current one, oldest first: (waiting, enqueued per minute). A minute
/// without a row had nothing waiting and nothing enqueued (the sampler writes a row for
/// every queue with work); an unknown enqueue count (after a gap) reads 0.
fn depth_series(depth: &[DepthSample], now: DateTime<Utc>, queue: &str) -> (Vec<f64>, Vec<f64>) {
    let end = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    let n = DEPTH_MINUTES as usize;
    let (mut waiting, mut enqueued) = (vec![0.0; n], vec![0.0; n]);
    for d in depth.iter().filter(|d| d.queue == queue) {
        let m = (end - d.minute).num_minutes();
        if (1..=DEPTH_MINUTES).contains(&m) {
            let i = (DEPTH_MINUTES - m) as usize;
            waiting[i] = d.waiting as f64;
            enqueued[i] = d.enqueued.unwrap_or(0) as f64;
        }
    }
    (waiting, enqueued)
}

/// Jobs enqueued per minute over the last ten sampled complete minutes of `queue`, `None`
/// when no sample in them knows its count.
fn enqueue_rate(depth: &[DepthSample], now: DateTime<Utc>, queue: &str) -> Option<f64> {
    let end = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    let known: Vec<i64> = depth
        .iter()
        .filter(|d| d.queue == queue && (1..=10).contains(&(end - d.minute).num_minutes()))
        .filter_map(|d| d.enqueued)
        .collect();
    // Minutes with no row at all enqueued nothing; count them as 0 once any minute is known.
    (!known.is_empty()).then(|| known.iter().sum::<i64>() as f64 / 10.0)
}

/// Whether `queue`'s waiting count rose in each of the last [`GROWING_MINUTES`] sampled
/// complete minutes (see [`docket_core::health::backlog_growing`]).
fn growing(depth: &[DepthSample], now: DateTime<Utc>, queue: &str) -> bool {
    let end = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    let mine: Vec<DepthSample> = depth
        .iter()
        .filter(|d| d.queue == queue && d.minute < end)
        .cloned()
        .collect();
    docket_core::health::backlog_growing(&mine, GROWING_MINUTES)
}

/// The blocked jobs of `h` by reason, in words ("key limit full 3, …").
fn blocked_words(h: Option<&QueueHealth>) -> String {
    let Some(h) = h else { return String::new() };
    let mut parts: Vec<String> = BlockedReason::ALL
        .into_iter()
        .filter_map(|r| {
            let n = h.blocked_by(r);
            (n > 0).then(|| format!("{} {n}", r.label()))
        })
        .collect();
    if h.blocked_more {
        parts.push("(more not classified)".into());
    }
    parts.join(", ")
}

/// p50 / p95 / p99 of a histogram, each as the bound of its bucket.
pub fn percentiles(h: &[i64]) -> String {
    let one = |q| match histogram::quantile(h, q) {
        None => "–".to_string(),
        Some(v) if v.is_infinite() => format!(
            "> {}",
            layout::ms(*histogram::BOUNDS_MS.last().unwrap_or(&0) as f64)
        ),
        Some(v) => format!("≤ {}", layout::ms(v)),
    };
    format!("{} / {} / {}", one(0.5), one(0.95), one(0.99))
}

/// The total of `f` over the last hour's samples of `queue` (succeeded and failed jobs: the
/// finished states are not counted from the table, which may hold millions).
fn hour(samples: &[Sample], queue: &str, f: fn(&Sample) -> i64) -> i64 {
    samples.iter().filter(|s| s.queue == queue).map(f).sum()
}

fn limits_form<S: Store>(app: &App<S>, q: &docket_core::QueueSummary) -> Markup {
    let l = q.control.as_ref().map(|c| c.limits).unwrap_or_default();
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
    html! {
        form.inline.limits method="post" action=(app.href(&format!("/queues/{}/limits", urlenc(&q.queue)))) {
            (csrf(app))
            input name="max_running" placeholder="max running" title="max running" value=(opt(l.max_running));
            input name="key_max_running" placeholder="per key" title="max running per concurrency key" value=(opt(l.key_max_running));
            input name="rate_limit" placeholder="rate" title="claims per period" value=(opt(l.rate.as_ref().map(|r| r.limit)));
            input name="rate_period" placeholder="per (1s)" title="rate period" value=(l.rate.as_ref().map(|r| humantime::format_duration(r.period).to_string()).unwrap_or_default());
            button type="submit" { "Set limits" }
        }
    }
}

/// Queue rows the page shows at most.
const MAX_ROWS: usize = 200;

/// `GET /`.
pub async fn page<S: Store>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    let (o, samples, health, depth, workers, outbox) = match tokio::try_join!(
        app.store.overview(CAP),
        app.store.samples(Duration::from_secs(3600)),
        app.store.queue_health(CAP),
        app.store
            .depth_history(Duration::from_secs(60 * (DEPTH_MINUTES as u64 + 1))),
        app.store.workers(),
        app.store.outbox_stats()
    ) {
        Ok(v) => v,
        Err(e) => return layout::error(&app, &e),
    };
    let now = o.at.unwrap_or_else(Utc::now);
    // The database says `running` for executing and buffered jobs alike; the live workers'
    // reports say how many of each queue's are buffered (claimed ahead of a free slot).
    // Summed once per queue, capped by its running count: a report a moment older than the
    // count may name a job that finished since.
    let mut reported: BTreeMap<&str, i64> = BTreeMap::new();
    for w in &workers {
        for (q, n) in w.beat.queues.iter().zip(&w.beat.buffered_by_queue) {
            *reported.entry(q.as_str()).or_default() += i64::from(*n);
        }
    }
    let buffered: BTreeMap<&str, i64> = o
        .queues
        .iter()
        .map(|q| {
            let n = reported.get(q.queue.as_str()).copied().unwrap_or(0);
            (q.queue.as_str(), n.min(q.running))
        })
        .collect();
    let all_running: i64 = o.queues.iter().map(|q| q.running).sum();
    let all_buffered: i64 = buffered.values().sum();
    let (done, wait) = series(&samples, now, None);
    let last_min = done.iter().rev().take(5).sum::<f64>() / 5.0;
    let health: BTreeMap<&str, &QueueHealth> =
        health.iter().map(|h| (h.queue.as_str(), h)).collect();
    // Grouped by queue once: each row reads its own samples, not the whole history (200
    // rows over three hours of 500 queues would otherwise walk 90,000 rows per row).
    let mut by_queue: BTreeMap<String, Vec<DepthSample>> = BTreeMap::new();
    for d in depth {
        by_queue.entry(d.queue.clone()).or_default().push(d);
    }
    let no_depth = Vec::new();
    let depth_of = |q: &str| by_queue.get(q).unwrap_or(&no_depth);
    let (all_waiting, all_enqueued) = depth_series(depth_of(""), now, "");
    let in_rate = enqueue_rate(depth_of(""), now, "");
    let done_hour: Vec<f64> = done.clone();
    let enq_hour: Vec<f64> = all_enqueued[all_enqueued.len() - 60..].to_vec();
    let (all_wait, all_run) = hists(&samples, now, None);
    let ro = app.opts.read_only;
    // Whoever can enqueue can create queues: the page shows the busiest MAX_ROWS (work
    // waiting, running or dead first), so thousands of queues cannot make it megabytes.
    let mut shown: Vec<&docket_core::QueueSummary> = o.queues.iter().collect();
    let weight = |q: &docket_core::QueueSummary| q.ready.n + q.running + q.dead.n + q.blocked.n;
    shown.sort_by(|a, b| {
        weight(b)
            .cmp(&weight(a))
            .then_with(|| a.queue.cmp(&b.queue))
    });
    let hidden = shown.len().saturating_sub(MAX_ROWS);
    shown.truncate(MAX_ROWS);
    let body = html! {
        h1 { "Queues" }
        div.cards {
            div.card #rates { h3 { "Enqueued vs done / min (last 10 / 5 min)" }
                (in_rate.map(|r| format!("{r:.0}")).unwrap_or_else(|| "–".into())) " in · " (format!("{last_min:.0}")) " out" }
            div.card { h3 { "Queues" } (o.queues.len()) }
            div.card #running { h3 { "Running" }
                (all_running) ": " (all_running - all_buffered) " executing, " (all_buffered) " buffered" }
            div.card #wait-percentiles { h3 { "Wait p50 / p95 / p99, 1 h" } (percentiles(&all_wait)) }
            div.card #run-percentiles { h3 { "Run time p50 / p95 / p99, 1 h" } (percentiles(&all_run)) }
            @if outbox.unpublished > 0 || outbox.published > 0 {
                // The transactional outbox (docs/outbox.md): what the relay has not yet
                // published, how long the oldest has waited (the relay's lag), failures.
                div.card #outbox { h3 { "Outbox" }
                    (outbox.unpublished) " unpublished · " (outbox.in_flight) " in flight · "
                    (outbox.failing) " failing"
                    br;
                    "oldest " (layout::ms(outbox.oldest_age_ms as f64))
                    @if let Some(e) = &outbox.last_error {
                        br; small title=(e) { "newest error: " (e.chars().take(120).collect::<String>()) }
                    }
                }
            }
        }
        div.bar {
            (layout::trusted(chart::lines("jobs per minute", "jobs", &[("enqueued", &enq_hour), ("done", &done_hour)], "-60 min", 520, 150)))
            (layout::trusted(chart::lines("waiting jobs (backlog)", "jobs", &[("", &all_waiting)], "-3 h", 520, 150)))
            (layout::trusted(chart::line("mean pickup latency (ms)", "ms", &wait, 520, 150)))
        }
        div.wide {
        table #queues {
            thead { tr {
                th { "queue" } th.n { "ready" } th.n { "pending" } th.n { "blocked" } th.n { "retrying" } th.n { "running" }
                th.n { "oldest running" } th.n { "done / failed, 1 h" } th.n { "dead" } th.n { "oldest waiting" } th.n { "wait p50 / p95 / p99, 1 h" } th.n { "workers" }
                th { "in / out per min, 10 min" } th { "jobs/min, 1 h" } th { "backlog, 3 h" } th { "limits" } @if !ro { th { "actions" } }
            } }
            tbody {
                @for q in &shown {
                    @let enc = urlenc(&q.queue);
                    @let h = health.get(q.queue.as_str()).copied();
                    @let depth = depth_of(&q.queue);
                    @let done = series(&samples, now, Some(&q.queue)).0;
                    tr data-queue=(q.queue) {
                        td {
                            a href=(app.href(&format!("/jobs?queue={enc}"))) { (q.queue) }
                            @if q.paused { " " span.paused { "paused" } }
                            @for f in flags(q, app.opts.stuck_after) { " " span.flag { (f) } }
                            @if growing(depth, now, &q.queue) { " " span.flag.growing { "backlog growing" } }
                        }
                        td.n { (layout::count(&q.ready)) }
                        td.n { a href=(app.href(&format!("/jobs?queue={enc}&state=pending"))) { (layout::count(&q.pending)) } }
                        td.n.blocked {
                            (layout::count(&q.blocked))
                            @let why = blocked_words(h);
                            @if !why.is_empty() { br; small.reasons { (why) } }
                        }
                        td.n.retrying { a href=(app.href(&format!("/jobs?queue={enc}&state=retrying"))) { (h.map(|h| layout::count(&h.retrying)).unwrap_or_else(|| html! { "0" })) } }
                        td.n {
                            a href=(app.href(&format!("/jobs?queue={enc}&state=running"))) { (q.running) }
                            @let b = buffered.get(q.queue.as_str()).copied().unwrap_or(0);
                            @if q.running > 0 {
                                br; small.split title="executing a handler / claimed ahead of a free slot, not started (from the workers' reports)" {
                                    (q.running - b) " exec · " (b) " buf"
                                }
                            }
                            @if q.near_expiry > 0 { br; small.near title="leases ending within 10 s" { (q.near_expiry) " near expiry" } }
                        }
                        td.n.oldest-running { (h.and_then(|h| h.oldest_running_age_s).map(layout::age).unwrap_or_else(|| "–".into())) }
                        td.n { (hour(&samples, &q.queue, |s| s.succeeded)) " / " (hour(&samples, &q.queue, |s| s.failed)) }
                        td.n { a href=(app.href(&format!("/jobs?queue={enc}&state=dead"))) { (layout::count(&q.dead)) } }
                        td.n title=(format!("oldest ready: {}", q.oldest_ready_age_s.map(layout::age).unwrap_or_else(|| "–".into()))) {
                            (q.oldest_waiting_age_s.map(layout::age).unwrap_or_else(|| "–".into()))
                        }
                        td.n.pct { (percentiles(&hists(&samples, now, Some(&q.queue)).0)) }
                        td.n { (q.workers) }
                        td.n.in-out {
                            (enqueue_rate(depth, now, &q.queue).map(|r| format!("{r:.0}")).unwrap_or_else(|| "–".into()))
                            " / " (format!("{:.0}", done.iter().rev().take(10).sum::<f64>() / 10.0))
                        }
                        td { (layout::trusted(chart::spark(&done, 110, 28))) }
                        td { (layout::trusted(chart::spark(&depth_series(depth, now, &q.queue).0, 110, 28))) }
                        td {
                            @if let Some(c) = &q.control {
                                @if let Some(m) = c.limits.max_running { "max " (m) " " }
                                @if let Some(m) = c.limits.key_max_running { "per key " (m) " " }
                                @if let Some(r) = &c.limits.rate { (r.limit) " per " (humantime::format_duration(r.period).to_string()) }
                            }
                        }
                        @if !ro {
                            td {
                                @if q.paused { (button(&app, &format!("/queues/{enc}/resume"), "Resume", "")) }
                                @else { (confirm_button(&app, &format!("/queues/{enc}/pause"), "Pause", "danger", &format!("Pause queue {}? No worker claims from it until it is resumed.", q.queue))) }
                                " " (limits_form(&app, q))
                            }
                        }
                    }
                }
                @if o.queues.is_empty() { tr { td colspan="17" .muted { "No queue has work, controls or workers yet." } } }
            }
        }
        }
        @if hidden > 0 {
            p #more-queues { (hidden) " more queues with less work are not shown; open one by name: "
                a href=(app.href("/jobs")) { "jobs" } " → queue." }
        }
        p.muted { "Counts stop at " (o.cap) " (shown as " (o.cap) "+) so this page never counts a whole table." }
    };
    layout::page_timed(
        &app,
        "Queues",
        "/",
        body,
        layout::fragment(&headers),
        Some(started),
    )
}

/// What is wrong with a queue, in words, for the operator scanning the page: ready work no
/// live worker serves (and nobody paused), or a waiting job older than `stuck_after`.
pub fn flags(q: &docket_core::QueueSummary, stuck_after: std::time::Duration) -> Vec<String> {
    let mut out = Vec::new();
    if q.ready.n > 0 && q.workers == 0 && !q.paused {
        out.push("no live worker".to_string());
    }
    if let Some(age) = q.oldest_waiting_age_s {
        if age > stuck_after.as_secs_f64() {
            out.push(format!("waiting {}", layout::age(age)));
        }
    }
    out
}
