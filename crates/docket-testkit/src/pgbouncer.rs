//! A real PgBouncer (Debian's `pgbouncer`) in front of a test server, on a private port, in
//! transaction pooling mode unless told otherwise. Stopped on drop (and, should the test
//! process die first, by its parent-death signal).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use docket_localpg::free_port;

/// A running PgBouncer.
pub struct PgBouncer {
    child: Child,
    dir: tempfile_dir::Dir,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

mod tempfile_dir {
    /// A directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The pgbouncer binary: on PATH or Debian's /usr/sbin.
pub fn binary() -> Option<PathBuf> {
    let candidates = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("pgbouncer"))
                    .find(|p| p.is_file())
            })
        })
}

impl PgBouncer {
    /// Starts PgBouncer in front of the server at `upstream` (a `postgres://` URL) with
    /// `pool_mode` (`transaction`, `session`) and at most `pool_size` server connections.
    /// Panics with a clear message when pgbouncer is not installed (`.ci/run` installs it).
    pub fn start(upstream: &str, pool_mode: &str, pool_size: u32) -> PgBouncer {
        Self::start_with(upstream, pool_mode, pool_size, "")
    }

    /// [`PgBouncer::start`] with more `[pgbouncer]` settings (`key = value` lines), e.g.
    /// `ignore_startup_parameters = extra_float_digits`, which deployments often set.
    pub fn start_with(upstream: &str, pool_mode: &str, pool_size: u32, extra: &str) -> PgBouncer {
        let bin = binary().expect("pgbouncer is not installed (apt-get install pgbouncer)");
        let (host, up_port) = crate::host_port(upstream);
        let dir = std::env::temp_dir().join(format!("docket-pgbouncer-{}", crate::fresh_schema()));
        std::fs::create_dir_all(&dir).expect("pgbouncer dir");
        let dir = tempfile_dir::Dir(dir);
        let port = free_port().expect("port");
        let users = dir.0.join("userlist.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n\"docket_app\" \"\"\n").expect("userlist");
        let ini = dir.0.join("pgbouncer.ini");
        let log = dir.0.join("pgbouncer.log");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={up_port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {users}\npool_mode = {pool_mode}\n\
                 default_pool_size = {pool_size}\nmax_client_conn = 1000\n\
                 server_reset_query =\nlogfile = {log}\nadmin_users = postgres\n{extra}\n",
                users = users.display(),
                log = log.display(),
            ),
        )
        .expect("pgbouncer.ini");
        crate::chown_to_server(&[&dir.0, &users, &ini]);
        let mut cmd = Command::new(bin);
        #[allow(unsafe_code)]
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // PgBouncer refuses to run as root; -u drops to the server's user.
            cmd.args(["-u", "postgres"]);
        }
        cmd.arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[allow(unsafe_code)]
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start pgbouncer");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            // Readiness is only observable by connecting (PgBouncer has no ready signal).
            std::thread::sleep(Duration::from_millis(20));
        }
        PgBouncer { child, dir, port }
    }

    /// The URL of `upstream`'s user and database through this PgBouncer, with `params`
    /// appended (e.g. `pooler=transaction`).
    pub fn url_for(&self, upstream: &str, params: &str) -> String {
        let o: sqlx::postgres::PgConnectOptions = upstream.parse().expect("upstream URL");
        let q = if params.is_empty() {
            String::new()
        } else {
            format!("?{params}")
        };
        format!(
            "postgres://{}@127.0.0.1:{}/{}{q}",
            o.get_username(),
            self.port,
            o.get_database().unwrap_or("postgres")
        )
    }

    /// Its log (for assertions and failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("pgbouncer.log")).unwrap_or_default()
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
