//! A private PostgreSQL cluster built from the system's binaries (`initdb`, `pg_ctl`,
//! `postgres`) on its own port and socket directory.
//!
//! Used by the CLI's embedded mode (a cluster under `.docket/` reused across commands) and by
//! tests that need a server of their own to stop, kill or restart. No crate manages a system
//! PostgreSQL this way (the embedded-postgres crates download binaries, which this project's
//! machines cannot), so it is written here: a thin wrapper over the official tools.
//!
//! PostgreSQL refuses to run as root; when this process is root, the tools run as the
//! `postgres` system user (via `runuser`) and the data directory is handed to that user.

#![warn(missing_docs)]

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Failures of cluster management, each with a hint a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// initdb / pg_ctl / postgres are not installed.
    #[error("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin; install them, e.g. `apt-get install postgresql` (Debian/Ubuntu) or `brew install postgresql` (macOS), or set DATABASE_URL")]
    BinariesMissing,
    /// A tool ran and failed.
    #[error("{tool} failed: {detail}")]
    Tool {
        /// Which tool (initdb, pg_ctl, ...).
        tool: String,
        /// What it said.
        detail: String,
    },
    /// Filesystem trouble.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How to stop a server (pg_ctl's modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Wait for clients to disconnect.
    Smart,
    /// Disconnect clients, shut down cleanly.
    Fast,
    /// Abort without a checkpoint (crash recovery on next start).
    Immediate,
}

impl StopMode {
    fn as_str(self) -> &'static str {
        match self {
            StopMode::Smart => "smart",
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// A cluster directory and how to reach it.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    log_file: PathBuf,
    port: u16,
}

/// Locates the directory holding `initdb` and `pg_ctl`.
pub fn find_bin_dir() -> Result<PathBuf, ClusterError> {
    if let Ok(dir) = std::env::var("DOCKET_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            Ok(dir)
        } else {
            Err(ClusterError::BinariesMissing)
        };
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        versions.reverse();
        candidates.extend(versions);
    }
    // Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb) so
    // the sibling tools (postgres, pg_isready) are found next to it.
    candidates
        .into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .and_then(|d| std::fs::canonicalize(d.join("initdb")).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .ok_or(ClusterError::BinariesMissing)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}

/// A free TCP port on the loopback interface (the OS picks it).
///
/// Chosen below the kernel's ephemeral range when there is room: a port the kernel handed out
/// for `:0` is also what it hands the *outgoing* connections of every other process as their
/// local port, so between this check and the server's bind a client connection could take it
/// (a test suite opening hundreds of connections did). Ports below the range are only ever
/// taken by listeners.
pub fn free_port() -> Result<u16, ClusterError> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if low > 12000 {
        let (from, to) = (10000u32, u32::from(low) - 1);
        for i in 0..64u32 {
            // No RNG dependency for this: the clock and a counter spread the tries.
            let seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
                .wrapping_add(std::process::id().wrapping_mul(7919))
                .wrapping_add(i.wrapping_mul(104_729));
            let port = (from + seed % (to - from)) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl LocalCluster {
    /// Describes a cluster at `dir` (data in `dir/data`, socket in `dir/sock`); nothing is
    /// created. `port` is only used by [`LocalCluster::init`] for a new cluster; an existing
    /// one keeps the port recorded in its configuration.
    pub fn at(dir: &Path, port: u16) -> Result<Self, ClusterError> {
        let bin_dir = find_bin_dir()?;
        let data_dir = dir.join("data");
        let port = read_port(&data_dir).unwrap_or(port);
        Ok(LocalCluster {
            bin_dir,
            socket_dir: dir.join("sock"),
            log_file: dir.join("postgres.log"),
            data_dir,
            port,
        })
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The server log.
    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// A connection URL for database `db` as the `postgres` superuser (trust auth).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// True once `initdb` has run here.
    pub fn is_initialized(&self) -> bool {
        self.data_dir.join("PG_VERSION").is_file()
    }

    fn tool(&self, name: &str) -> Command {
        let path = self.bin_dir.join(name);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, mut cmd: Command, tool: &str) -> Result<(), ClusterError> {
        let out = cmd.stdin(Stdio::null()).output()?;
        if out.status.success() {
            Ok(())
        } else {
            let mut detail = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if detail.is_empty() {
                detail = String::from_utf8_lossy(&out.stdout).trim().to_string();
            }
            let _ = write!(detail, " (exit {})", out.status);
            Err(ClusterError::Tool {
                tool: tool.to_string(),
                detail,
            })
        }
    }

    /// Creates the cluster (initdb, trust auth, no fsync during init) and writes its
    /// configuration: private port and socket, loopback only, and `extra` settings lines.
    pub fn init(&self, extra: &[(&str, &str)]) -> Result<(), ClusterError> {
        let root = self.data_dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(root)?;
        std::fs::create_dir_all(&self.socket_dir)?;
        if is_root() {
            for p in [root, self.socket_dir.as_path()] {
                self.run(
                    {
                        let mut c = Command::new("chown");
                        c.arg("postgres:postgres").arg(p);
                        c
                    },
                    "chown",
                )?;
            }
        }
        let mut c = self.tool("initdb");
        c.arg("-D")
            .arg(&self.data_dir)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .arg("--locale=C");
        self.run(c, "initdb")?;
        let mut conf = format!(
            "\n# written by docket\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n",
            self.port,
            self.socket_dir.display()
        );
        for (k, v) in extra {
            let _ = writeln!(conf, "{k} = {v}");
        }
        let path = self.data_dir.join("postgresql.conf");
        let mut existing = std::fs::read_to_string(&path)?;
        existing.push_str(&conf);
        std::fs::write(&path, existing)?;
        Ok(())
    }

    /// Rewrites the port (when the recorded one is taken by someone else).
    pub fn set_port(&mut self, port: u16) -> Result<(), ClusterError> {
        let path = self.data_dir.join("postgresql.conf");
        let text = std::fs::read_to_string(&path)?;
        std::fs::write(&path, format!("{text}\nport = {port}\n"))?;
        self.port = port;
        Ok(())
    }

    /// Starts the server with pg_ctl and waits until it accepts connections.
    pub fn start(&self) -> Result<(), ClusterError> {
        let mut c = self.tool("pg_ctl");
        c.arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&self.log_file)
            .args(["-w", "-t", "60", "start"]);
        if is_root() {
            // The log file must be writable by the server's user.
            let _ = std::fs::File::create(&self.log_file);
            let _ = Command::new("chown")
                .arg("postgres:postgres")
                .arg(&self.log_file)
                .status();
        }
        self.run(c, "pg_ctl start").map_err(|e| match e {
            ClusterError::Tool { tool, detail } => ClusterError::Tool {
                tool,
                detail: format!("{detail}; server log: {}", self.log_file.display()),
            },
            other => other,
        })
    }

    /// Stops the server.
    pub fn stop(&self, mode: StopMode) -> Result<(), ClusterError> {
        let mut c = self.tool("pg_ctl");
        c.arg("-D")
            .arg(&self.data_dir)
            .args(["-w", "-t", "60", "-m", mode.as_str(), "stop"]);
        self.run(c, "pg_ctl stop")
    }

    /// True when a server is running on this data directory.
    pub fn is_running(&self) -> bool {
        let mut c = self.tool("pg_ctl");
        c.arg("-D").arg(&self.data_dir).arg("status");
        c.stdout(Stdio::null()).stderr(Stdio::null());
        matches!(c.status(), Ok(s) if s.success())
    }

    /// True when the server accepts connections (pg_isready).
    pub fn is_ready(&self) -> bool {
        Command::new(self.bin_dir.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The command line that runs the server in the foreground as a child of this process
    /// (for test harnesses that tie the server's life to their own).
    pub fn foreground_command(&self) -> Command {
        let mut c = Command::new(self.bin_dir.join("postgres"));
        c.arg("-D").arg(&self.data_dir);
        c
    }
}

fn read_port(data_dir: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(data_dir.join("postgresql.conf")).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("port = "))
        .and_then(|v| v.trim().parse().ok())
}
