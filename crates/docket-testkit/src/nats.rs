//! NATS with JetStream for tests: `NATS_URL` when set (a server the tests may create streams
//! on), otherwise a throw-away `nats-server -js` of this test process's own — its own port
//! and store directory, stopped when the process exits by any means (`PR_SET_PDEATHSIG`, as
//! the database servers). Each test gets its own stream ([`stream_name`]) and subjects
//! ([`subject_prefix`]), so tests run in parallel. Tests that kill or restart a server start
//! a [`PrivateNats`] of their own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docket_localpg::free_port;

/// A private `nats-server` with JetStream: port and store directory of its own.
pub struct PrivateNats {
    /// Its directory (store, log).
    pub dir: PathBuf,
    /// Its client port.
    pub port: u16,
    /// Extra arguments (a cluster's routes).
    pub extra: Vec<String>,
    child: Option<Child>,
}

fn binary() -> String {
    for d in ["/usr/sbin", "/usr/bin", "/usr/local/bin"] {
        let p = Path::new(d).join("nats-server");
        if p.exists() {
            return p.display().to_string();
        }
    }
    "nats-server".to_string()
}

impl PrivateNats {
    /// Starts a server with JetStream under `dir` on a free port.
    pub fn start(dir: &Path) -> PrivateNats {
        Self::start_with(dir, free_port().expect("free port"), Vec::new())
    }

    /// Starts a server on `port` with `extra` arguments (a cluster node: `--cluster`,
    /// `--routes`, `--server_name`).
    pub fn start_with(dir: &Path, port: u16, extra: Vec<String>) -> PrivateNats {
        std::fs::create_dir_all(dir).expect("nats dir");
        let mut s = PrivateNats {
            dir: dir.to_path_buf(),
            port,
            extra,
            child: None,
        };
        s.run();
        s
    }

    /// Its client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts (again) the server process and waits until it accepts connections. It dies
    /// with the *thread* that starts it (PR_SET_PDEATHSIG).
    pub fn run(&mut self) {
        let log = std::fs::File::create(self.dir.join("server.log")).expect("log file");
        let mut cmd = Command::new(binary());
        cmd.args([
            "-js".to_string(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            self.port.to_string(),
            "-sd".into(),
            self.dir.join("store").display().to_string(),
        ])
        .args(&self.extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
        crate::dies_with_spawning_thread(&mut cmd);
        self.child = Some(cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "no NATS_URL and nats-server cannot run: {e} (Debian: apt-get install nats-server)"
            )
        }));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start: {}",
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
            // Polling a port that is not open yet: nothing to wait on but time.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL: a crash, no shutdown).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server the NATS tests use: `NATS_URL` or this process's private server.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("NATS_URL") {
        Ok(u) if !u.trim().is_empty() => u.trim().to_string(),
        _ => {
            let dir = std::env::temp_dir().join(format!(
                "docket-nats-{}-{}",
                std::process::id(),
                crate::fresh_schema()
            ));
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let server = PrivateNats::start(&dir);
                let _ = tx.send(server.url());
                loop {
                    std::thread::park();
                }
            });
            rx.recv().expect("the NATS test server started")
        }
    })
    .clone()
}

/// A stream name of a test's own (`T_<pid>_<random>`).
pub fn stream_name() -> String {
    format!("T{}", crate::fresh_schema().to_uppercase())
}

/// A subject prefix of a test's own (`t_<pid>_<random>`): its stream captures `<prefix>.>`.
pub fn subject_prefix() -> String {
    format!("t{}", crate::fresh_schema())
}

/// A [`PrivateNats`] owned by a thread of its own that lives until this is dropped, so the
/// server (which dies with the thread that forked it) survives restarts asked for from any
/// thread — a tokio worker that runs the test body may be retired and replaced mid-test.
pub struct NatsProcess {
    url: String,
    tx: std::sync::mpsc::Sender<(NatsCommand, std::sync::mpsc::Sender<()>)>,
}

enum NatsCommand {
    Kill,
    Run,
}

impl NatsProcess {
    /// Starts a server under `dir` on its owner thread.
    pub fn start(dir: &Path) -> NatsProcess {
        Self::start_with(dir, free_port().expect("free port"), Vec::new())
    }

    /// Starts a server on `port` with `extra` arguments (a cluster node) on its owner thread.
    pub fn start_with(dir: &Path, port: u16, extra: Vec<String>) -> NatsProcess {
        let dir = dir.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel::<(NatsCommand, std::sync::mpsc::Sender<()>)>();
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut server = PrivateNats::start_with(&dir, port, extra);
            let _ = url_tx.send(server.url());
            // Ends when the NatsProcess is dropped (its sender gone): the server goes with it.
            while let Ok((cmd, done)) = rx.recv() {
                match cmd {
                    NatsCommand::Kill => server.kill(),
                    NatsCommand::Run => server.run(),
                }
                let _ = done.send(());
            }
        });
        NatsProcess {
            url: url_rx.recv().expect("the NATS server started"),
            tx,
        }
    }

    fn ask(&self, cmd: NatsCommand) {
        let (done, wait) = std::sync::mpsc::channel();
        self.tx
            .send((cmd, done))
            .expect("the NATS owner thread runs");
        wait.recv().expect("the NATS owner thread answered");
    }

    /// Its client URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// SIGKILL, then a new server on the same port and store (waits until it listens).
    pub fn kill_and_restart(&self) {
        self.kill();
        self.restart();
    }

    /// SIGKILL (a crash, no shutdown).
    pub fn kill(&self) {
        self.ask(NatsCommand::Kill);
    }

    /// Starts the server again on the same port and store (waits until it listens).
    pub fn restart(&self) {
        self.ask(NatsCommand::Run);
    }
}

/// A three-node JetStream cluster on loopback, each node with its own port, route port and
/// store directory under `dir`.
pub fn cluster(dir: &Path) -> Vec<NatsProcess> {
    let ports: Vec<(u16, u16)> = (0..3)
        .map(|_| (free_port().expect("port"), free_port().expect("port")))
        .collect();
    let routes = ports
        .iter()
        .map(|(_, r)| format!("nats://127.0.0.1:{r}"))
        .collect::<Vec<_>>()
        .join(",");
    ports
        .iter()
        .enumerate()
        .map(|(i, (p, r))| {
            NatsProcess::start_with(
                &dir.join(format!("n{i}")),
                *p,
                vec![
                    "--server_name".into(),
                    format!("n{i}"),
                    "--cluster_name".into(),
                    "docket".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{r}"),
                    "--routes".into(),
                    routes.clone(),
                ],
            )
        })
        .collect()
}
