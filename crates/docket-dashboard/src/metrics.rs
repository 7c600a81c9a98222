//! The Prometheus text endpoint (`GET /metrics`) of the dashboard server and of
//! `docket work --metrics-listen`, built on `metrics-exporter-prometheus`.
//!
//! Two sources: the counters and histograms the worker runtime records through the
//! `metrics` facade (see `docket_worker::telemetry`), and gauges read from the database at
//! scrape time (at most once per [`GAUGE_TTL`]) with the dashboard's bounded reads: depth by
//! state, oldest ready age, leases near expiry, dead jobs, live workers, table and index
//! size, dead tuples, last (auto)vacuum. Every name is documented in docs/metrics.md.

use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use docket_core::Store;
use metrics::{describe_counter, describe_gauge, describe_histogram, gauge, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::App;

/// Database gauges are read at most this often, however often Prometheus scrapes.
pub const GAUGE_TTL: Duration = Duration::from_secs(5);

/// Counts stop at this many rows per queue and state (the gauge then reads the cap).
pub const GAUGE_CAP: i64 = 100_000;

/// Installs the Prometheus recorder for this process (once; later calls return the same
/// handle) with histogram buckets for run time, queue wait and claim time.
pub fn install() -> Result<PrometheusHandle, String> {
    static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);
    let mut h = HANDLE.lock().expect("poisoned");
    if let Some(h) = &*h {
        return Ok(h.clone());
    }
    let buckets = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        300.0, 1800.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    describe();
    *h = Some(handle.clone());
    Ok(handle)
}

fn describe() {
    describe_counter!(
        "docket_jobs_enqueued_total",
        "Jobs enqueued, by queue and kind."
    );
    describe_counter!("docket_jobs_claimed_total", "Jobs claimed by this worker.");
    describe_counter!(
        "docket_jobs_completed_total",
        "Runs ended, by outcome: succeeded, retried, dead, cancelled, snoozed, released."
    );
    describe_counter!(
        "docket_jobs_failed_total",
        "Runs that failed (retried, dead or cancelled by the handler)."
    );
    describe_counter!(
        "docket_leases_lost_total",
        "Leases found lost (heartbeat refused, or ran out before a renewal)."
    );
    describe_counter!(
        "docket_fenced_writes_total",
        "Outcome writes refused by the fence (another attempt owns the job)."
    );
    describe_counter!(
        "docket_jobs_reaped_total",
        "Expired leases reaped by this process as leader."
    );
    describe_histogram!("docket_job_run_seconds", Unit::Seconds, "Handler run time.");
    describe_histogram!(
        "docket_job_queue_wait_seconds",
        Unit::Seconds,
        "Queue wait: claim time minus run_at, by the database's clock."
    );
    describe_histogram!(
        "docket_workflow_dependency_wait_seconds",
        Unit::Seconds,
        "A workflow node's wait for its parents: enqueued to ready, by the database's clock."
    );
    describe_histogram!(
        "docket_claim_duration_seconds",
        Unit::Seconds,
        "Claim statement round trip."
    );
    describe_gauge!(
        "docket_worker_jobs_executing",
        "Jobs holding one of this process's run slots."
    );
    describe_gauge!(
        "docket_worker_jobs_buffered",
        "Jobs claimed ahead of a free slot and not started."
    );
    describe_gauge!(
        "docket_build_info",
        "1, labelled with the version and commit of the running build."
    );
}

/// Records `docket_build_info{version, commit} 1` for this process (the `docket` binary
/// calls it with its version and commit; an application may with its own).
pub fn build_info(version: &str, commit: &str) {
    gauge!("docket_build_info", "version" => version.to_string(), "commit" => commit.to_string())
        .set(1.0);
}

/// Workflows the `docket_workflows` gauge counts: the newest, one bounded read.
pub const MAX_WORKFLOWS_COUNTED: i64 = 1000;

/// Queues with series of their own at most: whoever can enqueue can create queues, and each
/// costs a handful of series; the rest are counted in `docket_queue_series_dropped`.
pub const MAX_QUEUE_SERIES: usize = 500;

/// The database gauges, in the Prometheus text format.
///
/// Written here rather than through the `metrics` recorder: these are a snapshot of the
/// database at the scrape, and a recorder cannot forget a series — a queue that emptied would
/// keep its last value (or a 0) for ever. Rendered per scrape, a vanished queue's series
/// are simply gone. Label values (queue names are anyone's input) are escaped as the format
/// requires.
pub async fn db_gauges<S: Store>(store: &S) -> Result<String, docket_core::StoreError> {
    let (o, health, workers, table, flows, batches, outbox) = tokio::try_join!(
        store.overview(GAUGE_CAP),
        store.queue_health(GAUGE_CAP),
        store.workers(),
        store.table_health(),
        store.workflows(MAX_WORKFLOWS_COUNTED),
        store.batches(MAX_WORKFLOWS_COUNTED),
        store.outbox_stats()
    )?;
    let health: std::collections::BTreeMap<&str, &docket_core::QueueHealth> =
        health.iter().map(|h| (h.queue.as_str(), h)).collect();
    let mut t = Text::default();
    let mut o = o;
    if docket_core::mutants::active(docket_core::mutants::Mutant::GaugesKeepVanished) {
        static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let mut seen = SEEN.lock().expect("poisoned");
        for q in &o.queues {
            if !seen.contains(&q.queue) {
                seen.push(q.queue.clone());
            }
        }
        for q in seen.iter() {
            if !o.queues.iter().any(|x| &x.queue == q) {
                o.queues.push(docket_core::QueueSummary {
                    queue: q.clone(),
                    ..Default::default()
                });
            }
        }
    }
    let queues: Vec<_> = o.queues.iter().take(MAX_QUEUE_SERIES).collect();
    t.family(
        "docket_queue_jobs",
        "Jobs by queue and state (capped at 100000 per cell).",
    );
    for q in &queues {
        for (state, v) in [
            ("pending", q.pending.n),
            ("ready", q.ready.n),
            ("blocked", q.blocked.n),
            ("running", q.running),
            ("dead", q.dead.n),
        ] {
            t.sample(&[("queue", &q.queue), ("state", state)], v as f64);
        }
    }
    t.family(
        "docket_workflows",
        "Workflows by state (running, succeeded, failed, cancelled), of the newest 1000.",
    );
    for st in [
        docket_core::workflow::WorkflowState::Running,
        docket_core::workflow::WorkflowState::Succeeded,
        docket_core::workflow::WorkflowState::Failed,
        docket_core::workflow::WorkflowState::Cancelled,
    ] {
        let n = flows.iter().filter(|w| w.state == st).count();
        t.sample(&[("state", st.as_str())], n as f64);
    }
    t.family(
        "docket_batches",
        "Batches by state (open, running, succeeded, failed), of the newest 1000.",
    );
    for st in ["open", "running", "succeeded", "failed"] {
        let n = batches.iter().filter(|b| b.state() == st).count();
        t.sample(&[("state", st)], n as f64);
    }
    for (name, help, v) in [
        (
            "docket_outbox_unpublished",
            "Outbox messages not yet published (the relay's backlog).",
            outbox.unpublished as f64,
        ),
        (
            "docket_outbox_in_flight",
            "Outbox messages a relay holds (claimed, being published).",
            outbox.in_flight as f64,
        ),
        (
            "docket_outbox_failing",
            "Unpublished outbox messages whose last publish failed.",
            outbox.failing as f64,
        ),
        (
            "docket_outbox_oldest_unpublished_seconds",
            "Age of the oldest unpublished outbox message: the relay's lag.",
            outbox.oldest_age_ms as f64 / 1000.0,
        ),
    ] {
        t.family(name, help);
        t.sample(&[], v);
    }
    t.family(
        "docket_queue_retrying_jobs",
        "Pending jobs that failed before and wait for another attempt.",
    );
    for q in &queues {
        let n = health.get(q.queue.as_str()).map_or(0, |h| h.retrying.n);
        t.sample(&[("queue", &q.queue)], n as f64);
    }
    t.family(
        "docket_queue_blocked_jobs",
        "Blocked jobs by the reason they wait: key_limit, ordering_behind, dead_head, awaiting_sweep.",
    );
    for q in &queues {
        let h = health.get(q.queue.as_str());
        for r in docket_core::BlockedReason::ALL {
            let n = h.map_or(0, |h| h.blocked_by(r));
            t.sample(&[("queue", &q.queue), ("reason", r.as_str())], n as f64);
        }
    }
    t.family(
        "docket_queue_oldest_ready_age_seconds",
        "Age of the oldest ready job (due, not held by a key); 0 when none.",
    );
    for q in &queues {
        t.sample(&[("queue", &q.queue)], q.oldest_ready_age_s.unwrap_or(0.0));
    }
    t.family(
        "docket_queue_oldest_waiting_age_seconds",
        "Age of the oldest due job not started, held by a key or not: alert on this one.",
    );
    for q in &queues {
        t.sample(
            &[("queue", &q.queue)],
            q.oldest_waiting_age_s.unwrap_or(0.0),
        );
    }
    t.family(
        "docket_queue_oldest_running_age_seconds",
        "Age of the oldest running job, since its attempt began; 0 when none.",
    );
    for q in &queues {
        let age = health
            .get(q.queue.as_str())
            .and_then(|h| h.oldest_running_age_s);
        t.sample(&[("queue", &q.queue)], age.unwrap_or(0.0));
    }
    t.family(
        "docket_queue_leases_near_expiry",
        "Running jobs whose lease ends within 10 s.",
    );
    for q in &queues {
        t.sample(&[("queue", &q.queue)], q.near_expiry as f64);
    }
    t.family("docket_queue_paused", "1 while the queue is paused.");
    for q in &queues {
        t.sample(&[("queue", &q.queue)], if q.paused { 1.0 } else { 0.0 });
    }
    t.family("docket_queue_workers", "Live workers serving the queue.");
    for q in &queues {
        t.sample(&[("queue", &q.queue)], q.workers as f64);
    }
    t.family(
        "docket_queue_series_dropped",
        "Queues beyond the first 500 of the overview, which get no series of their own.",
    );
    t.sample(&[], o.queues.len().saturating_sub(MAX_QUEUE_SERIES) as f64);
    t.family("docket_workers_live", "Live worker processes.");
    t.sample(&[], workers.len() as f64);
    if let Some(h) = table {
        let one = |t: &mut Text, name: &str, help: &str, v: f64| {
            t.family(name, help);
            t.sample(&[], v);
        };
        one(
            &mut t,
            "docket_table_live_tuples",
            "Live rows of the jobs table.",
            h.live_tuples as f64,
        );
        one(
            &mut t,
            "docket_table_dead_tuples",
            "Dead rows of the jobs table (vacuum's backlog).",
            h.dead_tuples as f64,
        );
        one(
            &mut t,
            "docket_table_bytes",
            "Jobs table size with indexes and TOAST, bytes.",
            h.total_bytes as f64,
        );
        one(
            &mut t,
            "docket_table_index_bytes",
            "Size of the jobs table's indexes, bytes.",
            h.index_bytes as f64,
        );
        if let Some(v) = h.last_autovacuum {
            one(
                &mut t,
                "docket_table_last_autovacuum_timestamp_seconds",
                "When autovacuum last finished on the jobs table (Unix time).",
                v.timestamp() as f64,
            );
        }
        if let Some(v) = h.last_vacuum {
            one(
                &mut t,
                "docket_table_last_vacuum_timestamp_seconds",
                "When a manual VACUUM last finished on the jobs table (Unix time).",
                v.timestamp() as f64,
            );
        }
    }
    Ok(t.out)
}

/// Gauge families in the Prometheus text format (version 0.0.4).
#[derive(Default)]
struct Text {
    out: String,
    name: String,
}

impl Text {
    fn family(&mut self, name: &str, help: &str) {
        use std::fmt::Write;
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} gauge");
        self.name = name.to_string();
    }

    fn sample(&mut self, labels: &[(&str, &str)], v: f64) {
        use std::fmt::Write;
        self.out.push_str(&self.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(val));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(v));
    }
}

/// A label value escaped for the text format: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// The database gauges read at most every [`GAUGE_TTL`]: the last text, and when.
type GaugeCache = tokio::sync::Mutex<Option<(Instant, String)>>;

/// The database gauges from `cache`, read anew when older than [`GAUGE_TTL`]. A failed read
/// is logged and answered with `docket_database_gauges_ok 0` alone (a stale snapshot would
/// look current); the recorder's own series are served either way.
async fn gauges<S: Store>(cache: &GaugeCache, store: &S) -> String {
    let mut c = cache.lock().await;
    if let Some((at, text)) = &*c {
        if at.elapsed() < GAUGE_TTL {
            return text.clone();
        }
    }
    let ok = "# HELP docket_database_gauges_ok 1 when the database gauges were read at this scrape's refresh.\n# TYPE docket_database_gauges_ok gauge\n";
    let text = match db_gauges(store).await {
        Ok(t) => format!("{ok}docket_database_gauges_ok 1\n{t}"),
        Err(e) => {
            tracing::warn!(error = %e, "metrics: could not read the database gauges");
            format!("{ok}docket_database_gauges_ok 0\n")
        }
    };
    *c = Some((Instant::now(), text.clone()));
    text
}

/// Scrapes: the recorder's series and the database gauges (refreshed when older than
/// [`GAUGE_TTL`]).
#[derive(Clone)]
pub struct Scraper<S: Store> {
    store: S,
    handle: PrometheusHandle,
    cache: Arc<GaugeCache>,
}

impl<S: Store> Scraper<S> {
    /// A scraper reading `store` into the recorder behind `handle`.
    pub fn new(store: S, handle: PrometheusHandle) -> Self {
        Scraper {
            store,
            handle,
            cache: Default::default(),
        }
    }

    /// The exposition text.
    pub async fn render(&self) -> String {
        let db = gauges(&self.cache, &self.store).await;
        let mut out = self.handle.render();
        out.push_str(&db);
        out
    }
}

fn exposition(body: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `GET /metrics` on the dashboard.
pub async fn endpoint<S: Store>(State(app): State<Arc<App<S>>>) -> Response {
    let Some(handle) = app.opts.prometheus.clone() else {
        return (StatusCode::NOT_FOUND, "metrics are not enabled").into_response();
    };
    let db = gauges(&app.gauges, &app.store).await;
    let mut out = handle.render();
    out.push_str(&db);
    exposition(out)
}

/// A router serving only `/metrics`, for a worker process or an application to mount.
pub fn router<S: Store>(store: S, handle: PrometheusHandle) -> Router {
    router_with_token(store, handle, None)
}

/// `/metrics` for a process with no database to read (`docket consume`): its own counters
/// and histograms only, behind the same bearer token and host check.
pub fn process_router(handle: PrometheusHandle, token: Option<String>) -> Router {
    guarded(token, move || {
        let handle = handle.clone();
        async move { handle.render() }
    })
}

/// `/metrics` answering with what `render` produces, once the host and, when a token is
/// given, the bearer token were checked: the one route both routers serve.
fn guarded<F, Fut>(token: Option<String>, render: F) -> Router
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    let opts = token_options(token);
    Router::new().route(
        "/metrics",
        get(move |headers: axum::http::HeaderMap| {
            let (opts, render) = (opts.clone(), render.clone());
            async move {
                match refused(&opts, &headers) {
                    Some(r) => r,
                    None => exposition(render().await),
                }
            }
        }),
    )
}

/// Bearer-token auth when a token is given, else open (loopback host names only).
fn token_options(token: Option<String>) -> crate::Options {
    crate::Options {
        auth: match token {
            Some(t) => crate::Auth::Token(t),
            None => crate::Auth::Open,
        },
        ..Default::default()
    }
}

/// The answer to a scrape that may not be served: a host not served, or no token.
fn refused(opts: &crate::Options, headers: &axum::http::HeaderMap) -> Option<Response> {
    if !crate::auth::host_allowed(opts, headers) {
        return Some((StatusCode::MISDIRECTED_REQUEST, "host not served").into_response());
    }
    if opts.auth.actor(headers).is_none() {
        return Some((StatusCode::UNAUTHORIZED, "bearer token required").into_response());
    }
    None
}

/// [`router`], answering only requests that carry `Authorization: Bearer <token>` when a
/// token is given (Prometheus's `authorization` setting) — what `docket work
/// --metrics-listen` requires beyond loopback — and, without one, only the loopback host
/// names (a DNS-rebinding page gets 421).
pub fn router_with_token<S: Store>(
    store: S,
    handle: PrometheusHandle,
    token: Option<String>,
) -> Router {
    let scraper = Scraper::new(store, handle);
    guarded(token, move || {
        let s = scraper.clone();
        async move { s.render().await }
    })
}
