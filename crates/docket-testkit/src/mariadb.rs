//! MariaDB / MySQL for tests: `MYSQL_URL` when set (a server the tests may create databases
//! on), otherwise a throw-away `mariadbd` of this test process's own — its own data
//! directory, port and socket, stopped when the process exits by any means
//! (`PR_SET_PDEATHSIG`, as the PostgreSQL cluster in `shared.rs`). Each test gets its own
//! database, so tests run in parallel; databases of earlier, killed runs are dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docket_localpg::free_port;

/// A private `mariadbd`: data directory, TCP port and socket of its own.
pub struct PrivateMariaDb {
    pub dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

fn binary(name: &str) -> String {
    for d in [
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/bin",
        "/usr/local/mysql/bin",
    ] {
        let p = Path::new(d).join(name);
        if p.exists() {
            return p.display().to_string();
        }
    }
    name.to_string()
}

impl PrivateMariaDb {
    /// Initialises a data directory under `dir` and starts the server on a free port.
    pub fn start(dir: &Path) -> PrivateMariaDb {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let out = Command::new(binary("mariadb-install-db"))
            .args([
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("no MYSQL_URL and mariadb-install-db cannot run: {e} (Debian: apt-get install mariadb-server)"));
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut db = PrivateMariaDb {
            dir: dir.to_path_buf(),
            port: free_port().expect("free port"),
            child: None,
        };
        db.run();
        db
    }

    /// The URL of database `name` on this server (root over TCP, empty password).
    pub fn url(&self, name: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{name}", self.port)
    }

    /// Starts (again) the server process and waits until it accepts connections. The server
    /// dies with the *thread* that starts it (PR_SET_PDEATHSIG), so start it from a thread
    /// that outlives its use.
    pub fn run(&mut self) {
        let data = self.dir.join("data");
        let log = std::fs::File::create(self.dir.join("server.log")).expect("log file");
        let mut cmd = Command::new(binary("mariadbd"));
        cmd.args([
            "--no-defaults".to_string(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", self.dir.join("sock").display()),
            format!("--pid-file={}", self.dir.join("pid").display()),
            format!("--port={}", self.port),
            "--bind-address=127.0.0.1".into(),
            "--user=root".into(),
            "--skip-name-resolve".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--innodb-flush-log-at-trx-commit=2".into(),
            "--max-connections=400".into(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
        crate::dies_with_spawning_thread(&mut cmd);
        self.child = Some(cmd.spawn().expect("start mariadbd"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                // With --skip-name-resolve root@localhost does not match 127.0.0.1: grant it.
                let ok = Command::new(binary("mariadb"))
                    .args([
                        "--no-defaults",
                        &format!("--socket={}", self.dir.join("sock").display()),
                        "-uroot",
                        "-e",
                        "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;",
                    ])
                    .output()
                    .is_ok_and(|o| o.status.success());
                if ok {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd did not start: {}",
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server (SIGKILL: a crash, no shutdown).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server the MySQL tests use, without a database: `MYSQL_URL` or this process's
/// private server.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("MYSQL_URL") {
        Ok(u) if !u.trim().is_empty() => u.trim_end_matches('/').to_string(),
        _ => {
            let dir = std::env::temp_dir().join(format!(
                "docket-mariadb-{}-{}",
                std::process::id(),
                crate::fresh_schema()
            ));
            // Started by a thread that lives as long as the process: the death signal fires
            // when the thread that forked the server ends, not only the process.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let server = PrivateMariaDb::start(&dir);
                let _ = tx.send(server.url(""));
                loop {
                    std::thread::park();
                }
            });
            let url = rx.recv().expect("the MariaDB test server started");
            url.trim_end_matches('/').to_string()
        }
    })
    .clone()
}

/// A new empty database on the test server; returns its URL. Databases of test processes
/// that no longer run are dropped first (once per process).
pub async fn fresh_database() -> String {
    use sqlx::Connection;
    let base = server_url();
    let mut admin = sqlx::MySqlConnection::connect(&format!("{base}/mysql"))
        .await
        .unwrap_or_else(|e| panic!("connect to the MySQL test server: {e}"));
    static CLEANED: OnceLock<()> = OnceLock::new();
    // One cleaner on the server at a time (test processes run many at once under
    // cargo-nextest); the others skip rather than drop the same databases side by side.
    let alone = CLEANED.set(()).is_ok()
        && sqlx::query_scalar::<_, Option<i64>>("SELECT GET_LOCK('docket_t_cleaner', 0)")
            .fetch_one(&mut admin)
            .await
            .ok()
            .flatten()
            == Some(1);
    if alone {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'docket\\_t\\_%'",
        )
        .fetch_all(&mut admin)
        .await
        .unwrap_or_default();
        for n in names {
            let pid = n.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let drop = format!("DROP DATABASE IF EXISTS `{n}`");
                let _ = sqlx::Executor::execute(&mut admin, drop.as_str()).await;
            }
        }
        let _ = sqlx::Executor::execute(&mut admin, "DO RELEASE_LOCK('docket_t_cleaner')").await;
    }
    let name = format!("docket_t_{}_{}", std::process::id(), crate::fresh_schema());
    let create = format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
    sqlx::Executor::execute(&mut admin, create.as_str())
        .await
        .expect("create database");
    format!("{base}/{name}")
}
