//! Docket's dashboard: server-rendered pages over the storage seam ([`docket_core::Store`]),
//! live over server-sent events, every asset embedded, and a Prometheus endpoint.
//!
//! Two ways to run it:
//! - `docket dashboard [--listen 127.0.0.1:8080] [--read-only]`, or [`serve`];
//! - [`router`], an axum [`Router`] an application mounts under a path of its own
//!   (`Router::new().nest("/admin/jobs", docket_dashboard::router(store, opts))`, with
//!   `opts.base_path = "/admin/jobs"`), behind its own authentication if it likes.
//!
//! Layout: [`auth`] (token or basic auth, CSRF), [`layout`] (the page shell and helpers),
//! `pages/` (one module per page), [`actions`] (every POST, each audited), [`bulk`] (bulk
//! actions over everything a filter matches, in bounded batches with progress), [`live`]
//! (the event stream), [`chart`] (inline SVG), [`metrics`] (the Prometheus text endpoint).
//!
//! Every value from job data reaches the page through maud's escaping (`(value)` in a
//! template); nothing is inserted with `PreEscaped` but the embedded assets and SVG built
//! from numbers.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use docket_core::Store;
use tokio::sync::broadcast;

pub mod actions;
pub mod auth;
pub mod bulk;
pub mod chart;
pub mod layout;
pub mod live;
pub mod metrics;
mod pages;
pub mod tls;

pub use auth::Auth;

/// How the dashboard is served.
#[derive(Clone)]
pub struct Options {
    /// Hide and refuse every action (pause, retry, cancel, bulk, limits).
    pub read_only: bool,
    /// Who may look (and act). [`Auth::Open`] only makes sense on loopback; [`serve`] refuses
    /// it on any other address.
    pub auth: Auth,
    /// The path the router is mounted under ("" at the root), for the links it renders.
    pub base_path: String,
    /// How often open pages refresh when no notification arrives.
    pub refresh: Duration,
    /// The Prometheus handle `/metrics` renders (see [`metrics::install`]); `None` serves
    /// no `/metrics`.
    pub prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Host names (the `Host` header without its port) the dashboard answers to; any other
    /// gets 421. Empty: the loopback names (`localhost`, `127.0.0.1`, `::1`) while
    /// [`Auth::Open`] — so a page on a name that resolves to 127.0.0.1 (DNS rebinding) cannot
    /// read or act — and any name once requests authenticate.
    pub allowed_hosts: Vec<String>,
    /// Mark the login cookie `Secure` (serve behind a TLS-terminating proxy). Also set for a
    /// request that says `X-Forwarded-Proto: https`.
    pub secure_cookie: bool,
    /// A queue whose oldest waiting job (due, not started, held by a key or not) is older
    /// than this is flagged on the queues page.
    pub stuck_after: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            read_only: false,
            auth: Auth::Open,
            base_path: String::new(),
            refresh: Duration::from_secs(2),
            prometheus: None,
            allowed_hosts: Vec::new(),
            secure_cookie: false,
            stuck_after: Duration::from_secs(300),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("read_only", &self.read_only)
            .field("auth", &self.auth)
            .field("base_path", &self.base_path)
            .field("refresh", &self.refresh)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("secure_cookie", &self.secure_cookie)
            .field("stuck_after", &self.stuck_after)
            .finish_non_exhaustive()
    }
}

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// An address beyond loopback with no credentials configured (the address).
    #[error("refusing to listen on {0} without authentication: set DOCKET_DASHBOARD_TOKEN, or DOCKET_DASHBOARD_USER and DOCKET_DASHBOARD_PASSWORD, or listen on a loopback address")]
    OpenBeyondLoopback(SocketAddr),
    /// A `--base-path` that is not "" or `/a/path` without a trailing slash (the value).
    #[error("invalid base path {0:?}: use \"\" or a path like /admin/jobs (no trailing slash)")]
    BasePath(String),
    /// Binding or serving failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A bulk action running in the background.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TaskState {
    /// `retry` or `cancel`.
    pub action: String,
    /// The search it applies to, as the jobs page's query string.
    pub filter: String,
    /// Jobs changed so far.
    pub changed: u64,
    /// Jobs the action leaves alone (another state, gone, or a unique key taken).
    pub skipped: u64,
    /// Jobs looked at so far.
    pub scanned: u64,
    /// Whether it has finished.
    pub done: bool,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

/// What every handler shares.
pub struct App<S: Store> {
    pub(crate) store: S,
    pub(crate) opts: Options,
    /// The CSRF token forms carry: random per process, shown only on authenticated pages.
    pub(crate) csrf: String,
    /// Refresh hints for the open pages (from LISTEN, from our own actions).
    pub(crate) live: broadcast::Sender<()>,
    pub(crate) listening: AtomicBool,
    pub(crate) tasks: Mutex<HashMap<u64, TaskState>>,
    pub(crate) next_task: AtomicU64,
    /// The database gauges `/metrics` last read, and when (see [`metrics::GAUGE_TTL`]).
    pub(crate) gauges: tokio::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl<S: Store> App<S> {
    /// A link to `path` (starting with '/') under the base path.
    pub(crate) fn href(&self, path: &str) -> String {
        format!("{}{path}", self.opts.base_path)
    }

    /// Tells open pages to refresh now.
    pub(crate) fn poke(&self) {
        let _ = self.live.send(());
    }
}

/// Checks a base path ("" or like `/admin/jobs`).
pub fn check_base_path(p: &str) -> Result<(), DashboardError> {
    if valid_base(p) {
        Ok(())
    } else {
        Err(DashboardError::BasePath(p.to_string()))
    }
}

fn valid_base(p: &str) -> bool {
    p.is_empty()
        || (p.starts_with('/')
            && !p.ends_with('/')
            && p.len() <= 200
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b)))
}

/// The dashboard as a router (pages, actions unless read-only, events, assets, `/metrics`
/// when a Prometheus handle is given).
pub fn router<S: Store>(store: S, opts: Options) -> Result<Router, DashboardError> {
    if !valid_base(&opts.base_path) {
        return Err(DashboardError::BasePath(opts.base_path));
    }
    let (live, _) = broadcast::channel(16);
    let read_only = opts.read_only;
    let app = Arc::new(App {
        store,
        opts,
        csrf: auth::random_token(),
        live,
        listening: AtomicBool::new(false),
        tasks: Mutex::new(HashMap::new()),
        next_task: AtomicU64::new(1),
        gauges: Default::default(),
    });
    let mut r = Router::new()
        .route("/", get(pages::queues::page::<S>))
        .route("/jobs", get(pages::jobs::page::<S>))
        .route("/jobs/{id}", get(pages::job::page::<S>))
        .route("/workers", get(pages::workers::page::<S>))
        .route("/cron", get(pages::workers::cron::<S>))
        .route("/dead", get(pages::dead::page::<S>))
        .route("/errors", get(pages::errors::page::<S>))
        .route("/keys", get(pages::keys::page::<S>))
        .route("/workflows", get(pages::workflows::list::<S>))
        .route("/workflows/{id}", get(pages::workflows::page::<S>))
        .route("/errors/group", get(pages::errors::group_page::<S>))
        .route("/audit", get(pages::workers::audit::<S>))
        .route("/tasks/{id}", get(pages::dead::task::<S>))
        .route("/events", get(live::events::<S>))
        .route("/assets/{name}", get(layout::asset))
        .route("/login", get(auth::login_page::<S>).post(auth::login::<S>))
        .route("/metrics", get(metrics::endpoint::<S>));
    if !read_only {
        r = r
            .route("/jobs/{id}/{action}", post(actions::job::<S>))
            .route("/queues/{queue}/{action}", post(actions::queue::<S>))
            .route("/workflows/{id}/{action}", post(actions::workflow::<S>))
            .route(
                "/workflows/{id}/edges/{parent}/{child}/skip",
                post(actions::skip_edge::<S>),
            )
            .route("/cron/{name}/{action}", post(actions::cron::<S>))
            .route("/bulk", post(bulk::start::<S>));
    }
    Ok(r.layer(axum::middleware::from_fn_with_state(
        app.clone(),
        auth::guard::<S>,
    ))
    .with_state(app))
}

/// Refuses [`Auth::Open`] beyond loopback.
pub fn check_exposure(addr: SocketAddr, auth: &Auth) -> Result<(), DashboardError> {
    if matches!(auth, Auth::Open) && !addr.ip().is_loopback() {
        return Err(DashboardError::OpenBeyondLoopback(addr));
    }
    Ok(())
}

/// Serves the dashboard on `listener` (plain HTTP) until `shutdown` completes.
pub async fn serve<S: Store>(
    listener: tokio::net::TcpListener,
    store: S,
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DashboardError> {
    check_exposure(listener.local_addr()?, &opts.auth)?;
    serve_on(listener, store, opts, shutdown).await
}

/// Serves the dashboard over HTTPS on `listener` until `shutdown` completes (see [`tls`]).
/// The login cookie is `Secure`.
pub async fn serve_tls<S: Store>(
    listener: tokio::net::TcpListener,
    config: std::sync::Arc<rustls::ServerConfig>,
    store: S,
    mut opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DashboardError> {
    check_exposure(listener.local_addr()?, &opts.auth)?;
    opts.secure_cookie = true;
    let listener = tls::TlsListener::new(listener, config)?;
    serve_on(listener, store, opts, shutdown).await
}

async fn serve_on<S: Store, L>(
    listener: L,
    store: S,
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DashboardError>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    // Served under its base path, so the printed URL is the one that answers (a proxy in
    // front passes the path on unchanged).
    let base = opts.base_path.clone();
    let app = router(store, opts)?;
    let app = if base.is_empty() {
        app
    } else {
        let home = base.clone();
        Router::new().nest(&base, app).route(
            &format!("{base}/"),
            get(move || async move { axum::response::Redirect::permanent(&home) }),
        )
    };
    // Open pages hold an event stream; give requests in flight 2 s after the signal rather
    // than wait for every stream to end.
    let (fired, on_fire) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = fired.send(());
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    tokio::select! {
        r = server => r?,
        _ = async {
            let _ = on_fire.await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        } => {}
    }
    Ok(())
}
