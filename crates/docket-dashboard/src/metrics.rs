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
        "docket_claim_duration_seconds",
        Unit::Seconds,
        "Claim statement round trip."
    );
    describe_gauge!(
        "docket_queue_jobs",
        "Jobs by queue and state (capped at 100000 per cell)."
    );
    describe_gauge!(
        "docket_queue_oldest_ready_age_seconds",
        Unit::Seconds,
        "Age of the oldest ready job (due, not held by a key)."
    );
    describe_gauge!(
        "docket_queue_oldest_waiting_age_seconds",
        Unit::Seconds,
        "Age of the oldest due job not started, held by a key or not: alert on this one."
    );
    describe_gauge!(
        "docket_queue_leases_near_expiry",
        "Running jobs whose lease ends within 10 s."
    );
    describe_gauge!("docket_queue_paused", "1 while the queue is paused.");
    describe_gauge!("docket_queue_workers", "Live workers serving the queue.");
    describe_gauge!(
        "docket_queue_series_dropped",
        "Queues beyond the first 500 of the overview, which get no series of their own."
    );
    describe_gauge!("docket_workers_live", "Live worker processes.");
    describe_gauge!("docket_table_live_tuples", "Live rows of the jobs table.");
    describe_gauge!(
        "docket_table_dead_tuples",
        "Dead rows of the jobs table (vacuum's backlog)."
    );
    describe_gauge!(
        "docket_table_bytes",
        Unit::Bytes,
        "Jobs table size with indexes and TOAST."
    );
    describe_gauge!(
        "docket_table_index_bytes",
        Unit::Bytes,
        "Size of the jobs table's indexes."
    );
    describe_gauge!(
        "docket_table_last_autovacuum_timestamp_seconds",
        Unit::Seconds,
        "When autovacuum last finished on the jobs table (Unix time)."
    );
    describe_gauge!(
        "docket_table_last_vacuum_timestamp_seconds",
        Unit::Seconds,
        "When a manual VACUUM last finished on the jobs table (Unix time)."
    );
}

/// Queues with series of their own at most: whoever can enqueue can create queues, and each
/// costs a handful of series; the rest are counted in `docket_queue_series_dropped`.
pub const MAX_QUEUE_SERIES: usize = 500;

/// The queues whose database gauges this process last set, so that a queue that emptied
/// and left the overview reads 0 rather than its last value for ever.
static REPORTED: Mutex<Option<std::collections::BTreeSet<String>>> = Mutex::new(None);

fn zero_queue_gauges(name: &str) {
    for state in ["pending", "ready", "blocked", "running", "dead"] {
        gauge!("docket_queue_jobs", "queue" => name.to_string(), "state" => state).set(0.0);
    }
    gauge!("docket_queue_oldest_ready_age_seconds", "queue" => name.to_string()).set(0.0);
    gauge!("docket_queue_oldest_waiting_age_seconds", "queue" => name.to_string()).set(0.0);
    gauge!("docket_queue_leases_near_expiry", "queue" => name.to_string()).set(0.0);
    gauge!("docket_queue_paused", "queue" => name.to_string()).set(0.0);
    gauge!("docket_queue_workers", "queue" => name.to_string()).set(0.0);
}

/// Reads the database gauges now.
pub async fn record_db_gauges<S: Store>(store: &S) -> Result<(), docket_core::StoreError> {
    let o = store.overview(GAUGE_CAP).await?;
    let shown: std::collections::BTreeSet<String> = o
        .queues
        .iter()
        .take(MAX_QUEUE_SERIES)
        .map(|q| q.queue.clone())
        .collect();
    {
        let mut reported = REPORTED.lock().expect("poisoned");
        for gone in reported.iter().flatten().filter(|q| !shown.contains(*q)) {
            zero_queue_gauges(gone);
        }
        *reported = Some(shown);
    }
    gauge!("docket_queue_series_dropped")
        .set(o.queues.len().saturating_sub(MAX_QUEUE_SERIES) as f64);
    for q in o.queues.iter().take(MAX_QUEUE_SERIES) {
        let name = q.queue.clone();
        let set = |state: &'static str, v: i64| {
            gauge!("docket_queue_jobs", "queue" => name.clone(), "state" => state).set(v as f64)
        };
        set("pending", q.pending.n);
        set("ready", q.ready.n);
        set("blocked", q.blocked.n);
        set("running", q.running);
        set("dead", q.dead.n);
        gauge!("docket_queue_oldest_ready_age_seconds", "queue" => name.clone())
            .set(q.oldest_ready_age_s.unwrap_or(0.0));
        gauge!("docket_queue_oldest_waiting_age_seconds", "queue" => name.clone())
            .set(q.oldest_waiting_age_s.unwrap_or(0.0));
        gauge!("docket_queue_leases_near_expiry", "queue" => name.clone())
            .set(q.near_expiry as f64);
        gauge!("docket_queue_paused", "queue" => name.clone()).set(if q.paused {
            1.0
        } else {
            0.0
        });
        gauge!("docket_queue_workers", "queue" => name).set(q.workers as f64);
    }
    gauge!("docket_workers_live").set(store.workers().await?.len() as f64);
    if let Some(t) = store.table_health().await? {
        gauge!("docket_table_live_tuples").set(t.live_tuples as f64);
        gauge!("docket_table_dead_tuples").set(t.dead_tuples as f64);
        gauge!("docket_table_bytes").set(t.total_bytes as f64);
        gauge!("docket_table_index_bytes").set(t.index_bytes as f64);
        if let Some(v) = t.last_autovacuum {
            gauge!("docket_table_last_autovacuum_timestamp_seconds").set(v.timestamp() as f64);
        }
        if let Some(v) = t.last_vacuum {
            gauge!("docket_table_last_vacuum_timestamp_seconds").set(v.timestamp() as f64);
        }
    }
    Ok(())
}

/// Scrapes: refreshes the gauges when older than [`GAUGE_TTL`], then renders.
#[derive(Clone)]
pub struct Scraper<S: Store> {
    store: S,
    handle: PrometheusHandle,
    last: Arc<tokio::sync::Mutex<Option<Instant>>>,
}

impl<S: Store> Scraper<S> {
    /// A scraper reading `store` into the recorder behind `handle`.
    pub fn new(store: S, handle: PrometheusHandle) -> Self {
        Scraper {
            store,
            handle,
            last: Default::default(),
        }
    }

    /// The exposition text. A failed gauge read is logged and the rest still served.
    pub async fn render(&self) -> String {
        let mut last = self.last.lock().await;
        if last.is_none_or(|t| t.elapsed() >= GAUGE_TTL) {
            if let Err(e) = record_db_gauges(&self.store).await {
                tracing::warn!(error = %e, "metrics: could not read the database gauges");
            }
            *last = Some(Instant::now());
        }
        drop(last);
        self.handle.render()
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
    let scraper = {
        static CACHE: Mutex<Option<Instant>> = Mutex::new(None);
        let due = CACHE
            .lock()
            .expect("poisoned")
            .is_none_or(|t| t.elapsed() >= GAUGE_TTL);
        if due {
            if let Err(e) = record_db_gauges(&app.store).await {
                tracing::warn!(error = %e, "metrics: could not read the database gauges");
            }
            *CACHE.lock().expect("poisoned") = Some(Instant::now());
        }
        handle
    };
    exposition(scraper.render())
}

/// A router serving only `/metrics`, for a worker process or an application to mount.
pub fn router<S: Store>(store: S, handle: PrometheusHandle) -> Router {
    router_with_token(store, handle, None)
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
    let opts = crate::Options {
        auth: match token {
            Some(t) => crate::Auth::Token(t),
            None => crate::Auth::Open,
        },
        ..Default::default()
    };
    Router::new().route(
        "/metrics",
        get(move |headers: axum::http::HeaderMap| {
            let s = scraper.clone();
            let opts = opts.clone();
            async move {
                if !crate::auth::host_allowed(&opts, &headers) {
                    return (StatusCode::MISDIRECTED_REQUEST, "host not served").into_response();
                }
                if opts.auth.actor(&headers).is_none() {
                    return (StatusCode::UNAUTHORIZED, "bearer token required").into_response();
                }
                exposition(s.render().await)
            }
        }),
    )
}
