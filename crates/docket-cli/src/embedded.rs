//! The embedded local PostgreSQL: a cluster under `$DOCKET_HOME` (default `./.docket`)
//! created with the system's initdb and started with pg_ctl on a private socket and port,
//! reused by later commands until `docket embedded stop`.

use std::fs::File;
use std::path::PathBuf;

use docket_localpg::{free_port, ClusterError, LocalCluster, StopMode};
use serde::Serialize;

use crate::cli::exit;
use crate::fail::CliError;

/// Where the embedded cluster lives.
pub fn home() -> PathBuf {
    std::env::var_os("DOCKET_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".docket"))
}

/// Where the cluster's files go: `home/pg`, unless this process is root and the server's
/// user (`postgres`, which the tools run as) cannot enter `home` — a project under a home
/// directory only its owner may enter, root's `/root` being the usual one. Then the cluster
/// lives under `/var/lib/docket/embedded/<hash of home>`, and `home/pg-location` says where.
fn cluster_dir() -> Result<PathBuf, CliError> {
    let home =
        std::path::absolute(home()).map_err(|e| CliError::new(exit::FAILURE, e.to_string()))?;
    if !is_root() || server_user_can_enter(&home) {
        return Ok(home.join("pg"));
    }
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    home.hash(&mut h);
    let dir = PathBuf::from("/var/lib/docket/embedded").join(format!("{:016x}", h.finish()));
    let _ = std::fs::create_dir_all(&home);
    let _ = std::fs::write(
        home.join("pg-location"),
        format!(
            "{}\n(the server's user cannot enter {}, so the cluster lives there)\n",
            dir.display(),
            home.display()
        ),
    );
    Ok(dir)
}

fn is_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe {
        libc::geteuid() == 0
    }
}

/// True when `postgres` can reach `dir` (every directory above it searchable for it).
fn server_user_can_enter(dir: &std::path::Path) -> bool {
    let probe = dir.ancestors().find(|p| p.exists()).unwrap_or(dir);
    std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", "sh", "-c", "cd \"$1\"", "_"])
        .arg(probe)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn cluster() -> Result<LocalCluster, CliError> {
    LocalCluster::at(&cluster_dir()?, 0).map_err(cluster_err)
}

fn cluster_err(e: ClusterError) -> CliError {
    match e {
        ClusterError::BinariesMissing => CliError::new(exit::UNAVAILABLE, e.to_string()),
        other => CliError::new(exit::UNAVAILABLE, format!("embedded PostgreSQL: {other}"))
            .hint("see postgres.log in the embedded cluster's directory (`docket embedded status`), or set DATABASE_URL to use another server"),
    }
}

/// Settings of the embedded server: a local development database, so commits do not wait
/// for the disk, with a buffer cache sized for a few million jobs (PostgreSQL's 128 MB default
/// holds well under a million job rows with their updated versions; measured: a 1M-job drain
/// ran at half the rate of a 200k one until the table fit). A crash of the machine or of PostgreSQL itself may lose the last few
/// hundred milliseconds of commits (a completion or an enqueue); use a real server with the
/// default `synchronous_commit = on` for anything that matters.
const SETTINGS: &[(&str, &str)] = &[
    ("max_connections", "200"),
    ("shared_buffers", "'1GB'"),
    ("synchronous_commit", "off"),
];

/// Creates and starts the cluster if needed; returns its URL. Serialised across processes by
/// a file lock so concurrent commands do not race to initdb.
pub fn ensure_running() -> Result<String, CliError> {
    let home = home();
    std::fs::create_dir_all(&home).map_err(|e| {
        CliError::new(
            exit::FAILURE,
            format!("cannot create {}: {e}", home.display()),
        )
    })?;
    let lock = File::create(home.join("lock"))
        .map_err(|e| CliError::new(exit::FAILURE, format!("cannot create lock file: {e}")))?;
    lock.lock().map_err(|e| {
        CliError::new(
            exit::FAILURE,
            format!("cannot lock {}: {e}", home.display()),
        )
    })?;
    let mut c = cluster()?;
    if !c.is_initialized() {
        eprintln!(
            "docket: creating the embedded PostgreSQL in {} ...",
            home.display()
        );
        let port = free_port().map_err(cluster_err)?;
        c = LocalCluster::at(&cluster_dir()?, port).map_err(cluster_err)?;
        c.init(SETTINGS).map_err(cluster_err)?;
    }
    if !c.is_running() {
        if std::net::TcpStream::connect(("127.0.0.1", c.port())).is_ok() {
            // Someone else took our port meanwhile.
            c.set_port(free_port().map_err(cluster_err)?)
                .map_err(cluster_err)?;
        }
        c.start().map_err(cluster_err)?;
    }
    Ok(c.url("postgres"))
}

/// `docket embedded status` output.
#[derive(Debug, Serialize)]
pub struct Status {
    /// `DOCKET_HOME` (default `.docket`).
    pub home: String,
    /// Where the cluster's files are (under home, or elsewhere when root's home is closed).
    pub cluster_dir: String,
    /// Whether the cluster was created.
    pub initialized: bool,
    /// Whether it runs now.
    pub running: bool,
    /// Its port, once created.
    pub port: Option<u16>,
    /// Its URL, while it runs.
    pub url: Option<String>,
}

/// Where the embedded PostgreSQL is and whether it runs.
pub fn status() -> Result<Status, CliError> {
    let c = cluster()?;
    let running = c.is_initialized() && c.is_running();
    Ok(Status {
        home: home().display().to_string(),
        cluster_dir: cluster_dir()?.display().to_string(),
        initialized: c.is_initialized(),
        running,
        port: c.is_initialized().then(|| c.port()),
        url: running.then(|| c.url("postgres")),
    })
}

/// Stops the embedded PostgreSQL; false when it was not running.
pub fn stop() -> Result<bool, CliError> {
    let c = cluster()?;
    if c.is_initialized() && c.is_running() {
        c.stop(StopMode::Fast).map_err(cluster_err)?;
        Ok(true)
    } else {
        Ok(false)
    }
}
