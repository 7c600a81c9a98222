//! The `docket` binary on SQLite (`--database-url sqlite://…`): the commands, the demo, and
//! the crash suite with real worker processes on one file — kill -9 repeatedly, a worker
//! paused past its lease — checked by the SQLite invariant checker. No server anywhere.

mod common;
mod local;

use std::process::Stdio;
use std::time::Duration;

use common::{bench_sizes, code, err, json_lines, out, Proc};
use docket_sqlite::SqliteStore;
use docket_testkit::checker_sqlite;
use local::{Db, File};

impl File {
    fn new() -> File {
        File::at(|dir| format!("sqlite://{}", dir.join("jobs.db").display()))
    }
}

local_db!(
    SqliteStore,
    checker_sqlite,
    "SQLite",
    "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= CAST(unixepoch('subsec') * 1000 AS INTEGER)",
    fresh: File::new(),
    check(s, runs) {
        checker_sqlite::check(s.pool(), runs, &["succeeded"]).await
    }
);

local_cli_suite!(File);

async fn scalar(s: &SqliteStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(s.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test]
async fn commands_work_on_a_file_and_refuse_what_needs_postgres() {
    let f = File::new();
    // Operator commands never create the file or the schema.
    let o = f.run(&["stats"]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(err(&o).contains("no SQLite database at"), "{}", err(&o));
    assert!(
        !f.dir.join("jobs.db").exists(),
        "a mistyped path left a file"
    );
    let o = f
        .cmd()
        .env("DATABASE_URL", "sqlite::memory:")
        .arg("stats")
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
    let o = f
        .cmd()
        .env("DATABASE_URL", format!("{}?mode=ro", f.url))
        .args(["enqueue", "--queue", "q", "--kind", "k"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("read-only"), "{}", err(&o));
    let o = f.run(&[
        "enqueue",
        "--queue",
        "mail",
        "--kind",
        "send",
        "--args",
        r#"{"to":"a"}"#,
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let id: i64 = out(&o).trim().parse().unwrap();
    // The database and its WAL and shared-memory files are the owner's alone.
    for name in ["jobs.db", "jobs.db-wal", "jobs.db-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let p = f.dir.join(name);
        if p.exists() {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name}: {mode:o}");
        }
    }
    assert!(f.dir.join("jobs.db").exists());
    let o = f.run(&["stats"]);
    assert!(o.status.success(), "{}", err(&o));
    local::commands_after_an_enqueue(&f, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_sqlite() {
    let f = File::new();
    let o = f.run(&["demo", "--jobs", "600", "--workers", "2"]);
    assert!(o.status.success(), "{}\n{}", out(&o), err(&o));
    let text = out(&o);
    assert!(text.contains("SQLite file"), "{text}");
    assert!(text.contains("succeeded, unsent        0"), "{text}");
    let s = f.store().await;
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM jobs WHERE queue = 'email' AND state IN ('succeeded', 'dead')"
        )
        .await,
        600
    );
    assert_eq!(
        scalar(&s, "SELECT count(*) FROM jobs j WHERE j.queue = 'email' AND j.state = 'succeeded' AND NOT EXISTS (SELECT 1 FROM demo_sends d WHERE d.job_id = j.id)").await,
        0
    );
    s.close().await;
    // A second run on the same file starts from nothing: the first run's tables are
    // dropped in place (the file is never removed under connections closing late).
    let o = f.run(&["demo", "--jobs", "100", "--workers", "2"]);
    assert!(o.status.success(), "{}\n{}", out(&o), err(&o));
    let s = f.store().await;
    assert_eq!(
        scalar(&s, "SELECT count(*) FROM jobs WHERE queue = 'email'").await,
        100
    );
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM jobs WHERE queue = 'email' AND state IN ('succeeded', 'dead')"
        )
        .await,
        100
    );
    s.close().await;
    // A file the demo did not make is never deleted.
    let other = File::new();
    let o = other.run(&["enqueue", "--kind", "k"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = other.run(&["demo", "--jobs", "10"]);
    assert_eq!(code(&o), 6, "{}", err(&o));
    assert_eq!(
        scalar(&other.store().await, "SELECT count(*) FROM jobs").await,
        1
    );
}

#[tokio::test]
async fn the_engine_bench_runs_every_size_asked_for_against_its_own_floor() {
    let f = File::new();
    let o = f.run(&[
        "bench",
        "--scenario",
        "engine",
        "--levels",
        "2,5",
        "--counts",
        "200,300",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let rows = json_lines(&o);
    let got = bench_sizes(&rows);
    assert_eq!(got, [(200, 2), (200, 5), (300, 2), (300, 5)], "{rows:?}");
    for r in &rows {
        assert_eq!(r["engine"], "SQLite", "{r}");
        let (rate, floor) = (
            r["jobs_per_s"].as_f64().unwrap(),
            r["floor_jobs_per_s"].as_f64().unwrap(),
        );
        assert!(rate > 0.0 && floor > 0.0, "{r}");
        assert!(
            (r["ratio"].as_f64().unwrap() - rate / floor).abs() < 0.006,
            "{r}"
        );
    }
    // A size out of range is refused before anything runs.
    let o = f.run(&["bench", "--scenario", "engine", "--counts", "200,5"]);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("--counts must be"), "{}", err(&o));
}

/// Real handlers on keyed, limited queues (`--scenario handlers`): three workers at 3 and
/// then 10 slots drain every job, none given back unrun (no prefetch churn) or run twice,
/// never faster than the limits allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handlers_bench_drains_keyed_limited_work_without_churn() {
    let f = File::new();
    let o = f.run(&["bench", "--scenario", "handlers", "--jobs", "24", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let rows = json_lines(&o);
    let slots: Vec<i64> = rows
        .iter()
        .map(|r| r["concurrency"].as_i64().unwrap())
        .collect();
    assert_eq!(slots, [3, 10], "{rows:?}");
    for r in &rows {
        assert_eq!(r["engine"], "SQLite", "{r}");
        assert_eq!(r["released"], 0, "{r}");
        assert_eq!(r["max_run"], 1, "{r}");
        assert!(r["ratio"].as_f64().unwrap() >= 0.95, "{r}");
    }
    let o = f.run(&["bench", "--scenario", "handlers", "--jobs", "0"]);
    assert_eq!(code(&o), 5, "{}", err(&o));
}

/// A bulk enqueue reading a slow pipe does not hold the file's one write lock while it waits
/// for input: another enqueue goes through meanwhile, and the bulk file still goes in whole
/// once its input ends.
#[tokio::test]
async fn a_bulk_enqueue_from_a_slow_pipe_blocks_no_writer() {
    let f = File::new();
    let o = f.run(&["migrate"]);
    assert!(o.status.success(), "{}", err(&o));
    let mut bulk = f
        .cmd()
        .args(["enqueue", "--bulk", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = bulk.stdin.take().unwrap();
    use std::io::Write;
    writeln!(input, r#"{{"queue":"b","kind":"k","args":{{}}}}"#).unwrap();
    input.flush().unwrap();
    // The pipe stays open: the bulk command waits for more input. A single enqueue must not
    // wait for it (before, it failed after the 10 s busy time-out).
    let t = std::time::Instant::now();
    let o = f.run(&["enqueue", "--queue", "s", "--kind", "k"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    writeln!(input, r#"{{"queue":"b","kind":"k","args":{{"n":2}}}}"#).unwrap();
    drop(input);
    let done = bulk.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&done.stdout).trim(), "2");
    let s = f.store().await;
    assert_eq!(scalar(&s, "SELECT count(*) FROM jobs").await, 3);
}

/// `docket work --drain` on a file that is not a database ends with an error instead of
/// retrying for ever.
#[tokio::test]
async fn drain_on_a_corrupt_file_fails_instead_of_retrying_for_ever() {
    let f = File::new();
    let o = f.run(&["migrate"]);
    assert!(o.status.success(), "{}", err(&o));
    // Overwrite the file's pages with garbage (the header stays, so it still opens).
    let path = f.dir.join("jobs.db");
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(100) {
        *b = 0xA5;
    }
    std::fs::write(&path, bytes).unwrap();
    let _ = std::fs::remove_file(f.dir.join("jobs.db-wal"));
    let _ = std::fs::remove_file(f.dir.join("jobs.db-shm"));
    let mut c = f.cmd();
    c.args([
        "work", "--queue", "q", "--exec", "true", "--drain", "--poll", "50ms",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut p = Proc::spawn(&mut c);
    // The exit is waited for on a thread of its own; the test gives it 60 s.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(p.wait().map(|s| s.success()));
    });
    let success = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("still retrying after 60 s")
        .unwrap();
    assert!(!success);
}
