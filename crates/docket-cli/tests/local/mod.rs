//! The `docket` binary on the engines without a server-side rule layer (SQLite, MariaDB /
//! MySQL): what every such engine must pass, run per engine (`local_cli_suite!`), and the
//! database handle each test gets ([`Db`]). The engines' own files keep what only they have
//! (SQLite's file rules; MariaDB's server restart).
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use docket_core::{JobState, Store};
use docket_testkit::checker;

use super::common::{
    self, assert_no_worker_panicked, code, err, eventually, eventually_explained, logged, ndjson,
    out, owner_of, signal, worker_log_tails, Proc,
};

/// A database of the test's own and a scratch directory for logs.
pub struct File {
    _dir: tempfile::TempDir,
    pub dir: std::path::PathBuf,
    pub url: String,
}

impl File {
    /// A fresh scratch directory and the database at `url(dir)`.
    pub fn at(url: impl FnOnce(&Path) -> String) -> File {
        let d = tempfile::tempdir().expect("tempdir");
        let dir = d.path().to_path_buf();
        let url = url(&dir);
        File { _dir: d, dir, url }
    }
}

/// A database of the test's own, reached by the `docket` binary through its URL.
pub trait Db: Sized + Send + Sync {
    type S: Store;
    /// A fresh database (and a scratch directory for logs).
    fn fresh() -> impl Future<Output = Self> + Send;
    /// Its database and scratch directory.
    fn file(&self) -> &File;
    /// The scratch directory.
    fn dir(&self) -> &Path {
        &self.file().dir
    }
    /// The database's URL.
    fn url(&self) -> &str {
        &self.file().url
    }
    /// A store on it.
    fn store(&self) -> impl Future<Output = Self::S> + Send;
    /// The one integer `sql` returns.
    fn scalar(s: &Self::S, sql: &str) -> impl Future<Output = i64> + Send;
    /// Runs `sql`.
    fn exec(s: &Self::S, sql: &str) -> impl Future<Output = ()> + Send;
    /// Running jobs whose lease has not expired by the database's clock (a count).
    const LIVE_LEASES: &'static str;
    /// The engine's name in reports.
    const NAME: &'static str;
    /// Installs the invariant checker's audit of every job write.
    fn install_audit(s: &Self::S) -> impl Future<Output = ()> + Send;
    /// The checker's verdict on the audit and the executions logged (and the end state:
    /// every job succeeded, by a run that logged its start).
    fn check(
        s: &Self::S,
        runs: &[checker::Execution],
    ) -> impl Future<Output = checker::CheckReport> + Send;

    /// `docket` on this database.
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_docket"));
        c.env("DATABASE_URL", self.url())
            .env_remove("DOCKET_SCHEMA")
            .env_remove("DOCKET_HOME");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run docket")
    }

    fn run_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut c = self.cmd();
        c.args(args);
        common::run_with_stdin(c, input)
    }

    /// `docket work ARGS`, its stderr to `stderr` when given.
    fn worker(&self, args: &[&str], stderr: Option<&Path>) -> Proc {
        let mut c = self.cmd();
        c.arg("work").args(args).stdout(Stdio::null());
        match stderr {
            Some(p) => c.stderr(std::fs::File::create(p).expect("stderr file")),
            None => c.stderr(Stdio::null()),
        };
        Proc::spawn(&mut c)
    }
}

/// Worker A is paused (SIGSTOP) past its lease; B takes the job over and completes it; A
/// resumes: its completion updates nothing and the final state is B's.
pub async fn a_paused_worker_cannot_overwrite_its_successor<D: Db>() {
    let f = D::fresh().await;
    let s = f.store().await;
    s.migrate().await.unwrap();
    D::install_audit(&s).await;
    let o = f.run(&["enqueue", "--queue", "c", "--kind", "k"]);
    assert!(o.status.success(), "{}", err(&o));
    let id = docket_core::JobId(out(&o).trim().parse().unwrap());
    D::exec(
        &s,
        "UPDATE jobs SET backoff_base_ms = 50, backoff_cap_ms = 50",
    )
    .await;
    let log = f.dir().join("exec.log");
    let a_err = f.dir().join("a.stderr");
    let mut a = f.worker(
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--no-maintenance",
            "--exec",
            &logged(&log, "sleep 1"),
        ],
        Some(&a_err),
    );
    eventually(Duration::from_secs(20), "A started the job", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start"))
    })
    .await;
    signal(a.id(), "STOP");
    eventually(Duration::from_secs(30), "the lease expired", || async {
        D::scalar(&s, D::LIVE_LEASES).await == 0
    })
    .await;
    assert_eq!(s.reap(10).await.unwrap().requeued(), 1);
    let mut b = f.worker(
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--poll",
            "100ms",
            "--no-maintenance",
            "--exec",
            &logged(&log, "true"),
        ],
        None,
    );
    eventually(Duration::from_secs(30), "B completes the job", || async {
        s.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    signal(a.id(), "CONT");
    eventually(Duration::from_secs(20), "A gives the job up", || async {
        std::fs::read_to_string(&a_err).is_ok_and(|e| e.contains("lease"))
    })
    .await;
    signal(a.id(), "TERM");
    signal(b.id(), "TERM");
    a.wait().unwrap();
    b.wait().unwrap();
    let rec = s.get(id).await.unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Succeeded, 2));
    let a_owner = owner_of(&std::fs::read_to_string(&a_err).unwrap()).expect("A's owner");
    let won = "FROM audit WHERE new_state = 'succeeded'";
    assert_eq!(D::scalar(&s, &format!("SELECT count(*) {won}")).await, 1);
    assert_eq!(
        D::scalar(&s, &format!("SELECT max(old_attempt) {won}")).await,
        2,
        "B's token won"
    );
    assert_eq!(
        D::scalar(
            &s,
            &format!("SELECT count(*) {won} AND old_owner = '{a_owner}'")
        )
        .await,
        0,
        "A's late completion updated nothing"
    );
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(runs.len(), 2, "A's run and B's run: {runs:?}");
    D::check(&s, &runs).await;
}

/// The dashboard runs unchanged: its queues page lists the queue, a job page shows the
/// job, and `/metrics` answers.
pub async fn the_dashboard_serves_this_engine<D: Db>() {
    use std::io::{BufRead, BufReader};
    let f = D::fresh().await;
    let o = f.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("dq", 5));
    assert!(o.status.success(), "{}", err(&o));
    let mut c = f.cmd();
    c.args(["dashboard", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut p = Proc::spawn(&mut c);
    let stderr = p.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(i) = line.find("docket: dashboard on http://") {
                let _ = tx.send(line[i + "docket: dashboard on http://".len()..].to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the dashboard's address");
    let hostport = addr.split(['/', ' ']).next().unwrap().to_string();
    let get = |path: &str| {
        let o = Command::new("curl")
            .args([
                "-s",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                &format!("http://{hostport}{path}"),
            ])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse::<u16>().unwrap_or(0), body.to_string())
    };
    let (status, body) = get("/");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data-queue=\"dq\""), "{body}");
    let (status, body) = get("/jobs/1");
    assert_eq!(status, 200, "{body}");
    let (status, body) = get("/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("docket_queue_jobs"), "{body}");
}

/// Everything after job `id` was enqueued to `mail`: reads, bulk enqueue (all or nothing,
/// the bad line named), controls, a drain by a real worker process, the same exit codes as
/// on PostgreSQL for bad input, and the PostgreSQL-only commands refused.
pub async fn commands_after_an_enqueue<D: Db>(f: &D, id: i64) {
    let o = f.run(&["jobs", "show", &id.to_string(), "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["args"]["to"], "a");
    // Bulk: all or nothing, with the bad line named.
    let mut lines = ndjson("bulk", 25_000);
    lines.push_str("{\"queue\":\"bad queue!\",\"kind\":\"k\",\"args\":{}}\n");
    let o = f.run_stdin(&["enqueue", "--bulk", "-"], &lines);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("line 25001"), "{}", err(&o));
    let s = f.store().await;
    assert_eq!(
        D::scalar(&s, "SELECT count(*) FROM jobs").await,
        1,
        "nothing of the file"
    );
    let o = f.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("bulk", 25_000));
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "25000");
    // Controls and a drain by a real worker process.
    let o = f.run(&["queues", "pause", "bulk"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = f.run(&["stats", "--json"]);
    assert!(
        out(&o).contains("\"paused\": true") || out(&o).contains("\"paused\":true"),
        "{}",
        out(&o)
    );
    let o = f.run(&["queues", "resume", "bulk"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = f.run(&["work", "--queue", "mail", "--drain", "--exec", "true"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        s.get(docket_core::JobId(id)).await.unwrap().state,
        JobState::Succeeded
    );
    // Bad input: the same exit codes as on PostgreSQL, nothing written.
    let o = f.run(&["enqueue", "--queue", "no spaces", "--kind", "k"]);
    assert_eq!(code(&o), 5, "{}", err(&o));
    let o = f.run(&["jobs", "show", "999999"]);
    assert_eq!(code(&o), 4, "{}", err(&o));
    for cmd in [
        &["explain", "--queue", "q"][..],
        &["lab", "naive"],
        &["grant", "--app", "a"],
    ] {
        let o = f.run(cmd);
        assert_eq!(code(&o), 5, "{cmd:?}: {}", err(&o));
        assert!(err(&o).contains("needs PostgreSQL"), "{cmd:?}: {}", err(&o));
    }
}

/// Every ~1.5 s a random one of 3 `docket work` processes on one database is SIGKILLed and
/// replaced, at most 20 times, while 4,000 jobs drain; then every job succeeded, each
/// success by a run that logged its start, no two runs of a job at once, leases were reaped
/// and jobs ran again (the kills hit something).
pub async fn kill_minus_nine_workers_repeatedly<D: Db>() {
    let f = D::fresh().await;
    let s = f.store().await;
    s.migrate().await.unwrap();
    D::install_audit(&s).await;
    let o = f.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("x", 4_000));
    assert!(o.status.success(), "{}", err(&o));
    D::exec(
        &s,
        "UPDATE jobs SET backoff_base_ms = 100, backoff_cap_ms = 200",
    )
    .await;
    let log = f.dir().join("exec.log");
    let spawn = |n: usize| {
        f.worker(
            &[
                "--queue",
                "x",
                "--concurrency",
                "8",
                "--lease",
                "2s",
                "--poll",
                "200ms",
                "--exec",
                &logged(&log, "true"),
            ],
            Some(&f.dir().join(format!("w{n}.err"))),
        )
    };
    let mut workers: Vec<Proc> = (0..3).map(spawn).collect();
    let started = Instant::now();
    let left =
        || async { D::scalar(&s, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'").await };
    // At most 20 kills, then the survivors finish: the test measures faults, not how fast
    // the machine spawns the jobs' processes (three each) next to the other tests.
    let kills = common::kill_randomly(&mut workers, spawn, 20, &log, left).await;
    // A stall says why: the workers' own logs (a write refused, a lock never freed).
    eventually_explained(
        Duration::from_secs(600),
        "every job succeeded after the kills",
        || async { left().await == 0 },
        || format!("workers' stderr:\n{}", worker_log_tails(f.dir())),
    )
    .await;
    for w in workers.iter() {
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        assert!(
            w.wait().unwrap().success(),
            "a survivor exited badly after SIGTERM"
        );
    }
    assert_no_worker_panicked(f.dir());
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap_or_default());
    let report = D::check(&s, &runs).await;
    assert_eq!(report.jobs, 4_000);
    assert!(
        kills >= 2,
        "only {kills} kills: the run was too short to mean anything"
    );
    assert!(
        report.reaped >= 1,
        "{kills} SIGKILLs left no lease to reap: {report:?}"
    );
    assert!(
        report.rerun_jobs >= 1,
        "no job ran twice: the kills hit nothing"
    );
    println!(
        "4,000 jobs on {}, {kills} SIGKILLs, {} leases reaped, {} jobs ran more than once, {:?}",
        D::NAME,
        report.reaped,
        report.rerun_jobs,
        started.elapsed()
    );
}

/// `impl Db for File` on store type `$store` (a `connect(url, n)` and a `pool()`), with the
/// testkit's `$checker` module, the engine's `$name`, its live-lease count `$live`, how a
/// fresh database is made, and the checker's verdict (`check(s, runs) { … }`).
#[macro_export]
macro_rules! local_db {
    ($store:ty, $checker:ident, $name:literal, $live:literal, fresh: $fresh:expr,
     check($s:ident, $runs:ident) $check:block) => {
        impl local::Db for local::File {
            type S = $store;
            const NAME: &'static str = $name;
            const LIVE_LEASES: &'static str = $live;

            async fn fresh() -> local::File {
                $fresh
            }

            fn file(&self) -> &local::File {
                self
            }

            async fn store(&self) -> $store {
                <$store>::connect(&self.url, 4).await.expect("open")
            }

            async fn scalar(s: &$store, sql: &str) -> i64 {
                sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(s.pool())
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }

            async fn exec(s: &$store, sql: &str) {
                sqlx::raw_sql(sql)
                    .execute(s.pool())
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }

            async fn install_audit(s: &$store) {
                docket_testkit::$checker::install_audit(s.pool()).await;
            }

            async fn check(
                $s: &$store,
                $runs: &[docket_testkit::checker::Execution],
            ) -> docket_testkit::checker::CheckReport $check
        }
    };
}

/// `docket workflows enqueue` refuses a cycle writing nothing, enqueues a graph, and a
/// `docket work --exec` command of a child reads its parent's output from `DOCKET_DEPS`.
pub async fn a_workflow_file_runs_through_exec_commands<D: Db>() {
    let f = D::fresh().await;
    let out = common::workflow_through_the_cli(|a| f.run(a), f.dir());
    assert_eq!(out, serde_json::json!({"charge": {"receipt": "r-1"}}));
}

/// `docket batches` end to end, and a batch's callbacks told `DOCKET_BATCH` (see
/// `common::batch_chaos::batch_through_the_cli`).
pub async fn a_batch_file_runs_through_exec_commands<D: Db>() {
    let f = D::fresh().await;
    let told = common::batch_chaos::batch_through_the_cli(|a| f.run(a), f.dir());
    let callbacks: Vec<&str> = told
        .iter()
        .map(|t| t["callback"].as_str().unwrap())
        .collect();
    assert_eq!(callbacks, vec!["on_complete", "on_failure"]);
    assert!(
        told.iter().all(|t| t["total"] == 3 && t["dead"] == 1),
        "{told:?}"
    );
}

/// Two hundred random workflows of up to twenty nodes (some commands failing, `cancel` and
/// `ignore` edges) run by three `docket work --exec` workers, one SIGKILLed every 1-2 s and
/// replaced: every workflow ends, each node as the policies say, no node starts before its
/// parents finished, a node its parent's failure cancelled never starts, and every edge is
/// consumed. Beside them 50 random batches: each ends as its members did and each callback
/// due runs as exactly one job, told the counts, after every member finished
/// (`common::batch_chaos`).
pub async fn workflows_end_correctly_while_workers_are_killed<D: Db>() {
    let f = D::fresh().await;
    let s = f.store().await;
    s.migrate().await.unwrap();
    let graphs = common::dags::random(7, 200, 20);
    let ids = common::dags::enqueue(|a| f.run(a), f.dir(), &graphs);
    let batches = common::batch_chaos::random(8, 50, 12);
    let batch_ids = common::batch_chaos::open(|a| f.run(a), f.dir(), &batches);
    let cb_log = f.dir().join("callbacks.log");
    D::exec(
        &s,
        "UPDATE jobs SET backoff_base_ms = 100, backoff_cap_ms = 200",
    )
    .await;
    let log = f.dir().join("exec.log");
    let spawn = |n: usize| {
        f.worker(
            &[
                "--queue",
                "wf",
                "--concurrency",
                "8",
                "--lease",
                "2s",
                "--poll",
                "200ms",
                "--exec",
                &logged(&log, &common::batch_chaos::command(&cb_log)),
            ],
            Some(&f.dir().join(format!("w{n}.err"))),
        )
    };
    let mut workers: Vec<Proc> = (0..3).map(spawn).collect();
    let left = || async {
        D::scalar(
            &s,
            "SELECT count(*) FROM jobs WHERE state IN ('waiting', 'pending', 'running')",
        )
        .await
    };
    let kills = common::kill_randomly(&mut workers, spawn, 12, &log, left).await;
    eventually_explained(
        Duration::from_secs(600),
        "every workflow ended after the kills",
        || async { left().await == 0 },
        || format!("workers' stderr:\n{}", worker_log_tails(f.dir())),
    )
    .await;
    for w in workers.iter() {
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        assert!(w.wait().unwrap().success(), "a survivor exited badly");
    }
    assert_no_worker_panicked(f.dir());
    assert_eq!(
        D::scalar(&s, "SELECT count(*) FROM job_deps WHERE state = 'waiting'").await,
        0,
        "every edge was consumed"
    );
    let seen = common::dags::observe(
        |a| f.run(a),
        &std::fs::read_to_string(&log).unwrap_or_default(),
    );
    let (jobs, runs, rerun) = common::dags::check(&graphs, &ids, &seen);
    let callbacks = common::batch_chaos::check(
        |a| f.run(a),
        &batches,
        &batch_ids,
        &std::fs::read_to_string(&cb_log).unwrap_or_default(),
        &seen.finished_ns,
        &seen.first_start,
    );
    assert!(
        kills >= 2,
        "only {kills} kills: the run was too short to mean anything"
    );
    println!(
        "{jobs} workflow nodes and {} batches ({callbacks} callbacks) on {}, {kills} SIGKILLs, {runs} runs logged, {rerun} jobs ran more than once",
        batches.len(),
        D::NAME
    );
}

/// One `#[tokio::test]` per case of this suite, for database type `$d` (a [`Db`]).
#[macro_export]
macro_rules! local_cli_suite {
    ($d:ty) => {
        $crate::local_cli_suite!(@cases $d;
            a_paused_worker_cannot_overwrite_its_successor,
            the_dashboard_serves_this_engine,
            kill_minus_nine_workers_repeatedly,
            a_workflow_file_runs_through_exec_commands,
            a_batch_file_runs_through_exec_commands,
            workflows_end_correctly_while_workers_are_killed
        );
    };
    (@cases $d:ty; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                local::$case::<$d>().await;
            }
        )*
    };
}
