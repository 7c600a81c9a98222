//! Helpers for tests that run real `docket` processes.
#![allow(dead_code)]

pub mod batch_chaos;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use docket_testkit::TestDb;

/// A `docket` command against `db`.
pub fn docket(db: &TestDb) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_docket"));
    c.env("DATABASE_URL", &db.url)
        .env("DOCKET_SCHEMA", &db.schema)
        .env_remove("DOCKET_HOME");
    c
}

/// Wraps `body` so every run is logged as `start|end JOB FENCE NANOS` to `log` (the claim's
/// fencing token: the row's `attempt` after the success it produced).
pub fn logged(log: &Path, body: &str) -> String {
    format!(
        r#"echo "start $DOCKET_JOB_ID $DOCKET_FENCE $(date +%s%N)" >> {l}; {body}
rc=$?; echo "end $DOCKET_JOB_ID $DOCKET_FENCE $(date +%s%N)" >> {l}; exit $rc"#,
        l = log.display()
    )
}

/// A child process that is killed (SIGKILL, even when stopped) if the test lets go of it while
/// it still runs — a failing assertion must not leave workers polling the server for the rest
/// of the suite (or of the mutant runs, whose tests fail on purpose).
pub struct Proc(Option<Child>);

impl Proc {
    /// Spawns `cmd`.
    pub fn spawn(cmd: &mut Command) -> Proc {
        Proc(Some(cmd.spawn().expect("spawn")))
    }

    /// The child, no longer killed on drop (for `wait_with_output`).
    pub fn into_inner(mut self) -> Child {
        self.0.take().expect("child")
    }
}

impl From<Child> for Proc {
    fn from(c: Child) -> Proc {
        Proc(Some(c))
    }
}

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("child")
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("child")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Starts `docket work` with `args`; stderr goes to `stderr_file` when given.
pub fn spawn_worker(db: &TestDb, args: &[&str], stderr_file: Option<&Path>) -> Proc {
    spawn_worker_env(db, args, stderr_file, &[])
}

/// [`spawn_worker`] with extra environment variables (the test-only switches of
/// `docket_core::mutants`, for instance).
pub fn spawn_worker_env(
    db: &TestDb,
    args: &[&str],
    stderr_file: Option<&Path>,
    env: &[(&str, &str)],
) -> Proc {
    let mut c = docket(db);
    c.envs(env.iter().copied());
    c.arg("work")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match stderr_file {
        Some(p) => c.stderr(std::fs::File::create(p).expect("stderr file")),
        None => c.stderr(Stdio::null()),
    };
    Proc::spawn(&mut c)
}

/// Sends SIGTERM to every worker, then waits for each and asserts that it exited 0 with no
/// panic in its stderr file.
pub fn stop_all_cleanly(workers: &mut [(&str, &mut Proc, &Path)]) {
    for (_, w, _) in workers.iter() {
        signal(w.id(), "TERM");
    }
    for (name, w, err) in workers.iter_mut() {
        let status = w.wait().unwrap();
        let stderr = std::fs::read_to_string(*err).unwrap_or_default();
        docket_testkit::checker::assert_exit(
            name,
            status,
            &stderr,
            docket_testkit::checker::Exit::Clean,
        );
    }
}

/// Sends SIGTERM to one worker and waits for it off the runtime's threads; asserts a clean
/// exit and returns how long the exit took.
pub async fn term_and_time_clean_exit(mut w: Proc, err: &Path) -> std::time::Duration {
    let started = std::time::Instant::now();
    signal(w.id(), "TERM");
    let status = tokio::task::spawn_blocking(move || w.wait())
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    let stderr = std::fs::read_to_string(err).unwrap_or_default();
    docket_testkit::checker::assert_exit(
        "worker",
        status,
        &stderr,
        docket_testkit::checker::Exit::Clean,
    );
    took
}

/// Waits until process `pid` has installed its SIGTERM handler (the `SigCgt` mask of
/// `/proc/PID/status`): a worker signalled before that dies of the default action, which a
/// test that just respawned it must not mistake for a crash on shutdown.
pub async fn wait_handles_sigterm(pid: u32) {
    let catches = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))
                    .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            })
            .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
    };
    eventually(
        std::time::Duration::from_secs(60),
        "the process handles SIGTERM",
        || async { catches() },
    )
    .await;
}

/// Sends a signal to a process.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

#[allow(unused_imports)]
pub use docket_testkit::{eventually, eventually_explained};

/// A scratch directory for logs and effect files, readable by any user.
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().to_path_buf();
    (d, p)
}

/// Jobs in `state`.
pub async fn count(db: &TestDb, state: &str) -> i64 {
    db.count_state(state).await
}

/// The owner a `docket work` process announced on stderr.
pub fn owner_of(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("docket: worker "))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
}

/// The binary, pointed at one test database and schema.
pub struct Cli<'a> {
    pub db: &'a TestDb,
}

impl Cli<'_> {
    pub fn cmd(&self) -> Command {
        docket(self.db)
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run docket")
    }
    pub fn run_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut c = self.cmd();
        c.args(args);
        run_with_stdin(c, input)
    }
}

/// `n` NDJSON lines of kind `k` in `queue`, args `{"i": n}`: a bulk file for the tests.
pub fn ndjson(queue: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"queue\":\"{queue}\",\"kind\":\"k\",\"args\":{{\"i\":{i}}}}}\n"))
        .collect()
}

/// Runs `cmd` with `input` on its stdin; returns its output.
pub fn run_with_stdin(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// stdout as one JSON value per line (`--json` output), panicking on a line that is not.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    out(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// The (jobs, concurrency) of each bench row, in order.
#[allow(dead_code)] // not every test binary runs a bench
pub fn bench_sizes(rows: &[serde_json::Value]) -> Vec<(u64, u64)> {
    rows.iter()
        .map(|r| {
            (
                r["jobs"].as_u64().unwrap(),
                r["concurrency"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Runs `args` and checks the exit code and that stderr is one `error: ` line naming `what`.
pub fn assert_fails(cli: &Cli, args: &[&str], want: i32, what: &str) {
    let o = cli.run(args);
    assert_eq!(code(&o), want, "{args:?}: {}", err(&o));
    assert!(err(&o).contains(what), "{args:?}: {}", err(&o));
    assert!(err(&o).starts_with("error: "), "{args:?}: {}", err(&o));
}

/// Every worker stderr file (`*.err`) in `dir`, with its text.
pub fn worker_logs(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "err") {
            let text = std::fs::read_to_string(&p).unwrap();
            logs.push((p, text));
        }
    }
    logs
}

/// Panics if any worker's stderr in `dir` reports a panic.
pub fn assert_no_worker_panicked(dir: &Path) {
    for (p, text) in worker_logs(dir) {
        assert!(!text.contains("panicked"), "{}: {text}", p.display());
    }
}

/// The last lines of every worker's stderr in `dir`, for a failure message.
pub fn worker_log_tails(dir: &Path) -> String {
    let mut out = String::new();
    for (p, text) in worker_logs(dir) {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join("\n");
        out.push_str(&format!("--- {}\n{tail}\n", p.display()));
    }
    out
}

/// Spawns `cmd` with stderr piped and returns the process and the first stderr line
/// containing `marker` (the address it listens on), within 60 s.
pub fn spawn_and_wait(mut cmd: std::process::Command, marker: &str) -> (Proc, String) {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut p = Proc::spawn(&mut cmd);
    let stderr = p.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_string();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if let Some(i) = line.find(&marker) {
                let _ = tx.send(line[i + marker.len()..].to_string());
            }
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the process reports its address");
    (p, line)
}

/// `curl -s ARGS`, its standard output as text.
#[allow(dead_code)]
pub fn curl(args: &[&str]) -> String {
    let o = std::process::Command::new("curl")
        .arg("-s")
        .args(args)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `docket workflows enqueue` and `docket work --exec` on a workflow, through `run` (a
/// `docket` invocation on the test's database) in scratch directory `dir`: a refused graph
/// writes nothing and exits with the invalid-input code; a valid one prints each node's job;
/// a worker runs `charge`, then `email`, whose command reads `DOCKET_DEPS` (`{parent:
/// output}`) and prints it as its own output. Returns the email job's output.
pub fn workflow_through_the_cli(run: impl Fn(&[&str]) -> Output, dir: &Path) -> serde_json::Value {
    let o = run(&["migrate"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"name":"loop","nodes":[{"name":"a","kind":"k","after":["b"]},{"name":"b","kind":"k","after":["a"]}]}"#,
    )
    .unwrap();
    let o = run(&["workflows", "enqueue", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 5, "a cycle is invalid input: {}", err(&o));
    assert!(err(&o).contains("cycle"), "{}", err(&o));
    let o = run(&["jobs", "list", "--json"]);
    assert_eq!(out(&o).trim(), "[]", "nothing was enqueued: {}", out(&o));

    let good = dir.join("signup.json");
    std::fs::write(
        &good,
        r#"{"name":"signup","nodes":[
            {"name":"charge","queue":"wf","kind":"charge","args":{"cents":1250}},
            {"name":"email","queue":"wf","kind":"email","after":["charge"]}]}"#,
    )
    .unwrap();
    let o = run(&["workflows", "enqueue", good.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    let email = v["jobs"]["email"].as_i64().expect("the email node's job");
    assert!(v["jobs"]["charge"].as_i64().is_some() && v["workflow"].as_i64().is_some());
    let script = r#"case "$DOCKET_KIND" in
  charge) echo '{"receipt":"r-1"}';;
  email) [ "$DOCKET_NODE" = email ] || exit 65; cat "$DOCKET_DEPS";;
esac"#;
    let o = run(&[
        "work",
        "--queue",
        "wf",
        "--exec",
        script,
        "--capture-output",
        "--drain",
        "--poll",
        "100ms",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = run(&["workflows", "deps", &email.to_string(), "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let deps: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(deps[0]["node"], "charge");
    assert_eq!(deps[0]["state"], "succeeded");
    let o = run(&["jobs", "output", &email.to_string(), "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    let output = v["output"].clone();
    // The operator's view: the list, one workflow, a missing one.
    let o = run(&["workflows", "list", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let list: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(list[0]["name"], "signup");
    assert_eq!(list[0]["state"], "succeeded");
    let wf = list[0]["id"].as_i64().unwrap().to_string();
    let o = run(&["workflows", "show", &wf]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(
        out(&o).contains("succeeded") && out(&o).contains("charge (cancel, satisfied)"),
        "{}",
        out(&o)
    );
    let o = run(&["workflows", "show", "999999"]);
    assert_eq!(code(&o), 4, "{}", err(&o));
    assert!(err(&o).contains("no workflow 999999"), "{}", err(&o));
    // Cancel and retry whole: nothing to cancel in a finished workflow, nothing to retry.
    let o = run(&["workflows", "cancel", &wf, "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains(r#""nodes":0"#), "{}", out(&o));
    let o = run(&["workflows", "retry", &wf, "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains(r#""nodes":0"#), "{}", out(&o));
    // A held edge: its parent dies, the child waits; the operator skips the edge (once).
    let held = dir.join("held.json");
    std::fs::write(
        &held,
        r#"{"name":"held","nodes":[{"name":"p","queue":"wh","kind":"fail"},
            {"name":"c","queue":"wh","kind":"ok","after":[{"node":"p","on_failure":"hold"}]}]}"#,
    )
    .unwrap();
    let o = run(&["workflows", "enqueue", held.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    let (p, c) = (v["jobs"]["p"].to_string(), v["jobs"]["c"].to_string());
    let drain = [
        "work",
        "--queue",
        "wh",
        "--exec",
        r#"[ "$DOCKET_KIND" = ok ] || exit 65"#,
        "--drain",
        "--poll",
        "100ms",
    ];
    let o = run(&drain);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = run(&["workflows", "skip-edge", &c, &p]);
    assert_eq!(code(&o), 5, "no such edge: {}", err(&o));
    let o = run(&["workflows", "skip-edge", &p, &c]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(
        out(&o).contains("skipped: job") && out(&o).contains("pending"),
        "{}",
        out(&o)
    );
    let o = run(&["workflows", "skip-edge", &p, &c]);
    assert_eq!(code(&o), 5, "an edge is skipped once: {}", err(&o));
    let o = run(&drain);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = run(&["jobs", "show", &c, "--json"]);
    assert!(
        out(&o).contains(r#""state":"succeeded""#),
        "{} {}",
        out(&o),
        err(&o)
    );
    output
}

/// SIGKILLs a random worker of `workers` each time the execution log `log` has grown by a
/// random 40 to 120 lines (20 to 60 runs started or ended) since the last kill — so every
/// kill lands while jobs run, however fast the machine — and replaces it with `spawn(n)`,
/// until `max` kills or until `left()` says no work is left; each victim must have died of
/// the signal. Returns the kills dealt.
pub async fn kill_randomly<F, Fut>(
    workers: &mut [Proc],
    spawn: impl Fn(usize) -> Proc,
    max: usize,
    log: &Path,
    left: F,
) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = i64>,
{
    use rand::Rng;
    let lines = || {
        std::fs::read_to_string(log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let mut rng = rand::thread_rng();
    let first = workers.len();
    let mut kills = 0;
    while kills < max {
        let due = lines() + rng.gen_range(40..120);
        let done = std::sync::atomic::AtomicBool::new(false);
        let flag = &done;
        eventually(
            std::time::Duration::from_secs(120),
            "the workers make progress between kills",
            || {
                let finished = left();
                let grown = lines() >= due;
                async move {
                    let none_left = finished.await == 0;
                    flag.store(none_left, std::sync::atomic::Ordering::Relaxed);
                    grown || none_left
                }
            },
        )
        .await;
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let victim = rng.gen_range(0..workers.len());
        signal(workers[victim].id(), "KILL");
        let status = workers[victim].wait().unwrap();
        docket_testkit::checker::assert_exit(
            "victim",
            status,
            "",
            docket_testkit::checker::Exit::Killed,
        );
        workers[victim] = spawn(first + kills);
        kills += 1;
    }
    kills
}

/// Random workflows for the chaos tests, their files, and the checks after the kills.
pub mod dags {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::process::Output;

    use rand::{Rng, SeedableRng};

    /// One node: whether its command fails (exit 65: dead at once), and its parents (index
    /// in the workflow, and whether the edge is `cancel` rather than `ignore`).
    pub struct Node {
        pub fails: bool,
        pub after: Vec<(usize, bool)>,
    }

    /// `count` random DAGs of 1..=`max` nodes (parents drawn among earlier nodes, so each is
    /// acyclic), a node failing one time in twenty.
    pub fn random(seed: u64, count: usize, max: usize) -> Vec<Vec<Node>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..count)
            .map(|_| {
                let n = rng.gen_range(1..=max);
                let mut nodes = Vec::with_capacity(n);
                for i in 0..n {
                    let fails = rng.gen_bool(0.05);
                    let mut after = Vec::new();
                    for p in 0..i {
                        if rng.gen_bool((2.0 / i as f64).min(0.6)) {
                            after.push((p, rng.gen_bool(0.7)));
                        }
                    }
                    nodes.push(Node { fails, after });
                }
                nodes
            })
            .collect()
    }

    /// What each node must end as: cancelled when a parent on a `cancel` edge did not
    /// succeed, else dead when its command fails, else succeeded.
    pub fn expected(g: &[Node]) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::with_capacity(g.len());
        for n in g {
            let cancelled = n
                .after
                .iter()
                .any(|&(p, cancel)| cancel && out[p] != "succeeded");
            out.push(if cancelled {
                "cancelled"
            } else if n.fails {
                "dead"
            } else {
                "succeeded"
            });
        }
        out
    }

    /// Enqueues every graph with `docket workflows enqueue` (queue `wf`, kind `ok` or
    /// `fail`); each graph's job ids by node index.
    pub fn enqueue(
        run: impl Fn(&[&str]) -> Output,
        dir: &Path,
        graphs: &[Vec<Node>],
    ) -> Vec<Vec<i64>> {
        graphs
            .iter()
            .enumerate()
            .map(|(w, g)| {
                let nodes: Vec<serde_json::Value> = g
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let after: Vec<serde_json::Value> = n
                            .after
                            .iter()
                            .map(|&(p, cancel)| {
                                serde_json::json!({"node": format!("n{p}"),
                                    "on_failure": if cancel { "cancel" } else { "ignore" }})
                            })
                            .collect();
                        serde_json::json!({"name": format!("n{i}"), "queue": "wf",
                            "kind": if n.fails { "fail" } else { "ok" }, "after": after})
                    })
                    .collect();
                let path: PathBuf = dir.join(format!("dag-{w}.json"));
                std::fs::write(
                    &path,
                    serde_json::json!({"name": format!("dag-{w}"), "nodes": nodes}).to_string(),
                )
                .unwrap();
                let o = run(&["workflows", "enqueue", path.to_str().unwrap(), "--json"]);
                assert_eq!(super::code(&o), 0, "{}", super::err(&o));
                let v: serde_json::Value = serde_json::from_str(super::out(&o).trim()).unwrap();
                (0..g.len())
                    .map(|i| v["jobs"][format!("n{i}")].as_i64().expect("a job per node"))
                    .collect()
            })
            .collect()
    }

    /// The command every worker runs (logged as `start|end JOB FENCE NANOS`).
    pub const COMMAND: &str = r#"case "$DOCKET_KIND" in fail) exit 65;; *) sleep 0.02;; esac"#;

    /// What the run left: each job's state and `finished_at` (from `docket jobs list` of
    /// queue `wf`), and from the execution log each job's first start and its starts.
    pub struct Observed {
        pub state: HashMap<i64, String>,
        pub finished_ns: HashMap<i64, i128>,
        pub first_start: HashMap<i64, i128>,
        pub starts: HashMap<i64, usize>,
        pub runs: usize,
    }

    /// Reads what the run left (see [`Observed`]).
    pub fn observe(run: impl Fn(&[&str]) -> Output, log: &str) -> Observed {
        let o = run(&[
            "jobs", "list", "--queue", "wf", "--limit", "100000", "--json",
        ]);
        assert_eq!(super::code(&o), 0, "{}", super::err(&o));
        let rows: Vec<serde_json::Value> = serde_json::from_str(super::out(&o).trim()).unwrap();
        let mut state: HashMap<i64, String> = HashMap::new();
        let mut finished_ns: HashMap<i64, i128> = HashMap::new();
        for r in &rows {
            let id = r["id"].as_i64().unwrap();
            state.insert(id, r["state"].as_str().unwrap().to_string());
            if let Some(t) = r["finished_at"].as_str() {
                let t = chrono::DateTime::parse_from_rfc3339(t).unwrap();
                finished_ns.insert(id, i128::from(t.timestamp_nanos_opt().unwrap()));
            }
        }
        let mut first_start: HashMap<i64, i128> = HashMap::new();
        let mut starts: HashMap<i64, usize> = HashMap::new();
        let mut runs = 0;
        for line in log.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 4 && f[0] == "start" {
                let (id, ns): (i64, i128) = (f[1].parse().unwrap(), f[3].parse().unwrap());
                runs += 1;
                *starts.entry(id).or_default() += 1;
                let e = first_start.entry(id).or_insert(ns);
                *e = (*e).min(ns);
            }
        }
        Observed {
            state,
            finished_ns,
            first_start,
            starts,
            runs,
        }
    }

    /// After the run: every node ended as [`expected`]; no node started before each of its
    /// parents had finished (the log's first start of the child against the parent's
    /// `finished_at`); a node a `cancel` edge cancelled never started.
    /// Returns (jobs, runs logged, jobs that ran more than once).
    pub fn check(graphs: &[Vec<Node>], ids: &[Vec<i64>], seen: &Observed) -> (usize, usize, usize) {
        let Observed {
            state,
            finished_ns,
            first_start,
            starts,
            runs,
        } = seen;
        let mut jobs = 0;
        for (g, gids) in graphs.iter().zip(ids) {
            let want = expected(g);
            for (i, n) in g.iter().enumerate() {
                jobs += 1;
                let id = gids[i];
                assert_eq!(
                    state.get(&id).map(String::as_str),
                    Some(want[i]),
                    "job {id} (node n{i})"
                );
                if want[i] == "cancelled" {
                    assert!(!first_start.contains_key(&id), "cancelled job {id} ran");
                    continue;
                }
                let Some(&start) = first_start.get(&id) else {
                    panic!("job {id} ended {} without a run logged", want[i]);
                };
                for &(p, _) in &n.after {
                    let pid = gids[p];
                    // finished_at has millisecond precision on SQLite and MariaDB: a start
                    // before the parent's finish, rounded down, is a start before it.
                    let fin = finished_ns[&pid] / 1_000_000 * 1_000_000;
                    assert!(
                        start >= fin,
                        "job {id} started {} ms before its parent {pid} finished",
                        (fin - start) / 1_000_000
                    );
                }
            }
        }
        let rerun = starts.values().filter(|&&n| n > 1).count();
        (jobs, *runs, rerun)
    }
}
