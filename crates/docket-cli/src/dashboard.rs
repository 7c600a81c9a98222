//! `docket dashboard` and the worker's `--metrics-listen`: the web dashboard and the
//! Prometheus endpoint of `docket-dashboard`, with their secrets from the environment only.

use std::net::SocketAddr;
use std::time::Duration;

use docket_dashboard::{Auth, Options};

use crate::cli::DashboardArgs;
use crate::engine::Open;
use crate::fail::CliError;

pub(crate) fn addr(what: &str, s: &str) -> Result<SocketAddr, CliError> {
    s.trim().parse().map_err(|_| {
        CliError::invalid(format!(
            "{what} {s:?} is not an address (use HOST:PORT with an IP, e.g. 127.0.0.1:8080)"
        ))
    })
}

/// The authentication the environment asks for. Secrets come from the environment (never
/// argv, where `ps` shows them to every user) and are checked like any other input.
fn auth_from_env() -> Result<Auth, CliError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let token = var("DOCKET_DASHBOARD_TOKEN");
    let user = var("DOCKET_DASHBOARD_USER");
    let password = var("DOCKET_DASHBOARD_PASSWORD");
    match (token, user, password) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(CliError::invalid(
            "set DOCKET_DASHBOARD_TOKEN or DOCKET_DASHBOARD_USER/PASSWORD, not both",
        )),
        (Some(t), None, None) => {
            if t.len() < 16
                || t.len() > 512
                || t.chars()
                    .any(|c| c.is_control() || c.is_whitespace() || c == ';' || c == ',')
            {
                return Err(CliError::invalid(
                    "DOCKET_DASHBOARD_TOKEN must be 16 to 512 characters without spaces, ';' or ','",
                ));
            }
            Ok(Auth::Token(t))
        }
        (None, Some(user), Some(password)) => {
            if user.contains(':') || user.len() > 200 || user.chars().any(char::is_control) {
                return Err(CliError::invalid(
                    "DOCKET_DASHBOARD_USER must be at most 200 characters without ':'",
                ));
            }
            if password.len() < 8 || password.len() > 512 {
                return Err(CliError::invalid(
                    "DOCKET_DASHBOARD_PASSWORD must be 8 to 512 characters",
                ));
            }
            Ok(Auth::Basic { user, password })
        }
        (None, Some(_), None) | (None, None, Some(_)) => Err(CliError::invalid(
            "basic auth needs both DOCKET_DASHBOARD_USER and DOCKET_DASHBOARD_PASSWORD",
        )),
        (None, None, None) => Ok(Auth::Open),
    }
}

/// SIGTERM or Ctrl-C.
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

pub async fn run(ctx: &impl Open, a: DashboardArgs) -> anyhow::Result<()> {
    let addr = addr("--listen", &a.listen)?;
    let refresh = docket_core::duration::parse_bounded(
        "refresh",
        &a.refresh,
        Duration::from_millis(200),
        Duration::from_secs(3600),
    )
    .map_err(|e| CliError::invalid(e.to_string()))?;
    let stuck_after = docket_core::duration::parse_bounded(
        "stuck-after",
        &a.stuck_after,
        Duration::from_secs(1),
        Duration::from_secs(30 * 86_400),
    )
    .map_err(|e| CliError::invalid(e.to_string()))?;
    let auth = auth_from_env()?;
    docket_dashboard::check_exposure(addr, &auth).map_err(|e| CliError::invalid(e.to_string()))?;
    let prometheus = docket_dashboard::metrics::install().map_err(CliError::invalid)?;
    docket_dashboard::metrics::build_info(env!("CARGO_PKG_VERSION"), env!("DOCKET_COMMIT"));
    let opts = Options {
        read_only: a.read_only,
        auth,
        base_path: a.base_path.clone(),
        refresh,
        prometheus: Some(prometheus),
        allowed_hosts: a.allowed_hosts.clone(),
        secure_cookie: a.secure_cookie,
        stuck_after,
    };
    for h in &opts.allowed_hosts {
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
        if !ok {
            return Err(CliError::invalid(format!(
                "--allowed-host {:?}: a host name, an IP address or `loopback`",
                crate::output::safe(&h.chars().take(80).collect::<String>())
            ))
            .into());
        }
    }
    // Checked before connecting: a bad base path or certificate writes nothing.
    docket_dashboard::check_base_path(&opts.base_path)
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(
            docket_dashboard::tls::server_config(cert, key)
                .map_err(|e| CliError::invalid(crate::output::safe(&e.to_string())))?,
        ),
        _ => None,
    };
    // An operator command: it never creates or migrates a schema (`docket migrate` does).
    let store = ctx.existing(8).await?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "docket: dashboard on {}://{}{}{}",
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?,
        if a.base_path.is_empty() {
            "/"
        } else {
            &a.base_path
        },
        if a.read_only { " (read-only)" } else { "" }
    );
    match tls {
        Some(config) => {
            docket_dashboard::serve_tls(listener, config, store, opts, stop_signal()).await?
        }
        None => docket_dashboard::serve(listener, store, opts, stop_signal()).await?,
    }
    Ok(())
}

/// Starts `/metrics` for a worker process on `addr` (in the background, for as long as the
/// process runs).
pub async fn serve_metrics<S: docket_core::Store>(addr_text: &str, store: S) -> anyhow::Result<()> {
    serve_metrics_of(addr_text, Some(store)).await
}

/// [`serve_metrics`] for a process without a database (`docket consume`): its own counters.
pub async fn serve_process_metrics(addr_text: &str) -> anyhow::Result<()> {
    serve_metrics_of::<docket_postgres::PgStore>(addr_text, None).await
}

async fn serve_metrics_of<S: docket_core::Store>(
    addr_text: &str,
    store: Option<S>,
) -> anyhow::Result<()> {
    let addr = addr("--metrics-listen", addr_text)?;
    // Beyond loopback, like the dashboard: closed without a secret (from the environment).
    let token = std::env::var("DOCKET_METRICS_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    if token.is_none() && !addr.ip().is_loopback() {
        return Err(CliError::invalid(format!(
            "refusing to serve /metrics on {addr} without authentication: set DOCKET_METRICS_TOKEN (scrapers send it as a bearer token) or listen on a loopback address"
        ))
        .into());
    }
    let handle = docket_dashboard::metrics::install().map_err(CliError::invalid)?;
    docket_dashboard::metrics::build_info(env!("CARGO_PKG_VERSION"), env!("DOCKET_COMMIT"));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "docket: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    let app = match store {
        Some(store) => docket_dashboard::metrics::router_with_token(store, handle, token),
        None => docket_dashboard::metrics::process_router(handle, token),
    };
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(())
}
