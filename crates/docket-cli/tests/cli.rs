//! The `docket` binary, run as a user would: every command, bad input with its exit code and
//! message, and no partial writes.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use docket_testkit::TestDb;

use crate::common;
use common::*;

/// Every job, kept successes included (on PostgreSQL they live in `jobs_succeeded`).
async fn jobs(db: &TestDb) -> i64 {
    db.scalar("SELECT count(*) FROM {schema}.jobs_all").await
}

#[tokio::test]
async fn migrate_enqueue_show_list_retry_cancel() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    for _ in 0..2 {
        let o = cli.run(&["migrate"]);
        assert_eq!(code(&o), 0, "{}", err(&o));
    }
    let o = cli.run(&[
        "enqueue",
        "--queue",
        "mail",
        "--kind",
        "send",
        "--args",
        r#"{"to":"a@b"}"#,
        "--priority",
        "-3",
        "--max-attempts",
        "2",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let id: i64 = out(&o).trim().parse().unwrap();
    let o = cli.run(&["enqueue", "--kind", "k", "--unique-key", "u1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["duplicate"], false);
    let o = cli.run(&["enqueue", "--kind", "k", "--unique-key", "u1", "--json"]);
    let v2: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v2["duplicate"], true);
    assert_eq!(v2["id"], v["id"]);

    let o = cli.run(&["jobs", "show", &id.to_string(), "--json"]);
    assert_eq!(code(&o), 0);
    let j: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    for field in [
        "id",
        "queue",
        "kind",
        "state",
        "attempt",
        "max_attempts",
        "priority",
        "run_at",
        "created_at",
        "finished_at",
        "args",
        "errors",
    ] {
        assert!(j.get(field).is_some(), "job JSON lacks {field}: {j}");
    }
    assert_eq!(j["priority"], -3);
    assert_eq!(j["args"]["to"], "a@b");
    let o = cli.run(&["jobs", "list", "--queue", "mail", "--json"]);
    let l: Vec<serde_json::Value> = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(l.len(), 1);
    let o = cli.run(&["jobs", "list"]);
    assert!(
        out(&o).contains("mail") && out(&o).contains("pending"),
        "{}",
        out(&o)
    );
    let o = cli.run(&["jobs", "show", &id.to_string()]);
    assert!(out(&o).contains("send"), "{}", out(&o));

    // Retry of a pending job: conflict. Cancel: ok. Retry of the cancelled: ok.
    let o = cli.run(&["jobs", "retry", &id.to_string()]);
    assert_eq!(code(&o), 6, "{}", err(&o));
    assert!(err(&o).contains("cannot retry"), "{}", err(&o));
    let o = cli.run(&["jobs", "cancel", &id.to_string()]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("cancelled"));
    let o = cli.run(&["jobs", "cancel", &id.to_string()]);
    assert_eq!(code(&o), 6);
    let o = cli.run(&[
        "jobs",
        "retry",
        &id.to_string(),
        "--extra-attempts",
        "3",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let j: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(j["state"], "pending");
    assert_eq!(j["max_attempts"], 3);
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_an_exit_code_and_writes_nothing() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["enqueue", "--kind", "k", "--args", "{not json"],
            5,
            "--args is not valid JSON",
        ),
        (
            vec!["enqueue", "--kind", "k", "--delay", "soon"],
            5,
            "invalid duration for delay",
        ),
        (
            vec!["enqueue", "--kind", "k", "--delay", "-5s"],
            5,
            "negative",
        ),
        (
            vec!["enqueue", "--kind", "k", "--run-at", "tomorrow"],
            5,
            "RFC 3339",
        ),
        (vec!["enqueue", "--kind", "bad kind"], 5, "invalid kind"),
        (
            vec![
                "enqueue",
                "--queue",
                "q'; DROP TABLE jobs;--",
                "--kind",
                "k",
            ],
            5,
            "invalid queue name",
        ),
        (
            vec!["enqueue", "--kind", "k", "--max-attempts", "0"],
            5,
            "max_attempts",
        ),
        (
            vec!["enqueue", "--kind", "k", "--metadata", "[1]"],
            5,
            "metadata must be a JSON object",
        ),
        (
            vec!["jobs", "list", "--state", "exploded"],
            5,
            "unknown job state",
        ),
        (vec!["jobs", "show", "987654321"], 4, "not found"),
        (vec!["jobs", "retry", "987654321"], 4, "not found"),
        (
            vec!["prune", "--older-than", "a while"],
            5,
            "invalid duration",
        ),
        (
            vec!["work", "--exec", "true", "--lease", "0s"],
            5,
            "invalid duration for lease",
        ),
        (
            vec!["--schema", "Bad-Schema", "stats"],
            5,
            "invalid schema name",
        ),
    ];
    for (args, want, msg) in cases {
        assert_fails(&cli, &args, want, msg);
    }
    // Oversized args (too big for a command line: through bulk on stdin).
    let huge = format!(
        "{{\"kind\":\"k\",\"args\":{{\"s\":\"{}\"}}}}\n",
        "x".repeat(300 * 1024)
    );
    let o = cli.run_stdin(&["enqueue", "--bulk", "-"], &huge);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("over the limit"), "{}", err(&o));
    let o = cli.run(&[
        "enqueue",
        "--kind",
        "k",
        "--args",
        &format!(r#"{{"s":"{}"}}"#, "x".repeat(100 * 1024)),
    ]);
    assert_eq!(code(&o), 0, "100 KiB is within the limit: {}", err(&o));
    db.exec("DELETE FROM {schema}.jobs").await;
    let o = cli.run(&["enqueue", "--kind", "k", "--args", r#"{"nul":"a\u0000b"}"#]);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert_eq!(jobs(&db).await, 0, "no partial writes");
}

#[tokio::test]
async fn a_database_that_is_down_is_exit_3_with_a_hint() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let port = docket_localpg::free_port().unwrap();
    let url = format!("postgres://postgres:secret@127.0.0.1:{port}/postgres");
    let o = cli.run(&["--database-url", &url, "stats"]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(
        err(&o).contains("connection refused by 127.0.0.1:"),
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains("hint: is PostgreSQL running there?"),
        "{}",
        err(&o)
    );
    assert!(
        !err(&o).contains("secret"),
        "the password must not be printed"
    );
}

#[tokio::test]
/// A bad line anywhere rejects the whole file with its line number; nothing is inserted.
/// (Its speed is measured by `docket bench`, not here.)
async fn bulk_enqueue_is_all_or_nothing_and_names_the_bad_line() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let good: String = ndjson("bulk", 100_000);
    let t = Instant::now();
    let o = cli.run_stdin(&["enqueue", "--bulk", "-"], &good);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o).trim(), "100000");
    println!("bulk enqueue of 100,000 lines took {:?}", t.elapsed());
    assert_eq!(jobs(&db).await, 100_000);

    let mut bad = String::new();
    for i in 0..10 {
        bad.push_str(&format!("{{\"kind\":\"k\",\"args\":{{\"i\":{i}}}}}\n"));
    }
    bad.push_str("{\"kind\":\"k\",\"args\": {oops}\n");
    let o = cli.run_stdin(&["enqueue", "--bulk", "-"], &bad);
    assert_eq!(code(&o), 5);
    assert!(err(&o).contains("line 11"), "{}", err(&o));
    let o = cli.run_stdin(
        &["enqueue", "--bulk", "-"],
        "{\"kind\":\"k\",\"delay\":\"1x\"}\n",
    );
    assert_eq!(code(&o), 5);
    assert!(err(&o).contains("line 1"), "{}", err(&o));
    let o = cli.run_stdin(
        &["enqueue", "--bulk", "-"],
        "{\"kind\":\"k\",\"colour\":\"red\"}\n",
    );
    assert_eq!(code(&o), 5);
    assert!(err(&o).contains("unknown field"), "{}", err(&o));
    assert_eq!(
        jobs(&db).await,
        100_000,
        "nothing from a bad file is inserted"
    );
}

#[tokio::test]
async fn stats_reap_prune_explain_lab() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    cli.run(&["enqueue", "--kind", "k"]);
    let o = cli.run(&["stats", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let s: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(s["queues"][0]["queue"], "default");
    assert_eq!(s["queues"][0]["ready"], 1);
    assert!(s["table"]["live_tuples"].is_number());
    let o = cli.run(&["stats"]);
    assert!(out(&o).contains("jobs table"), "{}", out(&o));
    let o = cli.run(&["reap", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(r["requeued"], 0);
    let o = cli.run(&["prune", "--older-than", "7d", "--json"]);
    let p: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(p["finished"], 0);
    let o = cli.run(&["explain", "--queue", "default"]);
    assert!(out(&o).contains("jobs_claim_idx"), "{}", out(&o));
    assert!(out(&o).contains("LockRows"), "{}", out(&o));
    let o = cli.run(&[
        "lab",
        "skip-locked",
        "--jobs",
        "2000",
        "--workers",
        "8",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let l: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        (l["done"].as_i64(), l["duplicated"].as_i64()),
        (Some(2000), Some(0))
    );
    let o = cli.run(&[
        "lab",
        "naive",
        "--jobs",
        "2000",
        "--workers",
        "16",
        "--json",
    ]);
    let l: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert!(l["duplicated"].as_i64().unwrap() > 0, "{l}");
    let o = cli.run(&["lab", "for-update", "--jobs", "300", "--workers", "4"]);
    assert!(
        out(&o).contains("serialised") || out(&o).contains("queued behind"),
        "{}",
        out(&o)
    );
}

fn wait_until(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn exec_worker_maps_exit_codes_and_drains() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let dir = tempfile::tempdir().unwrap();
    for kind in ["ok", "retry", "discard", "other", "sig"] {
        let o = cli.run(&[
            "enqueue",
            "--queue",
            "x",
            "--kind",
            kind,
            "--args",
            r#"{"hello":"world"}"#,
        ]);
        assert_eq!(code(&o), 0, "{}", err(&o));
    }
    let script = format!(
        r#"cat > {d}/stdin-$DOCKET_JOB_ID; echo "$DOCKET_JOB_ID $DOCKET_ATTEMPT $DOCKET_QUEUE $DOCKET_KIND" > {d}/env-$DOCKET_JOB_ID
case "$DOCKET_KIND" in
  ok) exit 0;;
  retry) echo "smtp busy" >&2; exit 75;;
  discard) echo "bad address" >&2; exit 65;;
  other) echo "crashed" >&2; exit 3;;
  sig) kill -9 $$;;
esac"#,
        d = dir.path().display()
    );
    let o = cli.run(&[
        "work",
        "--queue",
        "x",
        "--concurrency",
        "5",
        "--exec",
        &script,
        "--drain",
        "--poll",
        "100ms",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let state = |kind: &str| {
        let db = &db;
        let kind = kind.to_string();
        async move {
            let row: (String, serde_json::Value) = sqlx::query_as(&format!(
                "SELECT state, errors FROM {}.jobs_all WHERE kind = $1",
                db.schema
            ))
            .bind(kind)
            .fetch_one(&db.pool)
            .await
            .unwrap();
            row
        }
    };
    assert_eq!(state("ok").await.0, "succeeded");
    let (s, e) = state("retry").await;
    assert_eq!(s, "pending");
    assert_eq!(e[0]["message"], "exit 75 (retry): smtp busy");
    let (s, e) = state("discard").await;
    assert_eq!(s, "dead");
    assert_eq!(e[0]["message"], "exit 65 (discard): bad address");
    let (s, e) = state("other").await;
    assert_eq!(s, "pending");
    assert_eq!(e[0]["message"], "exit 3: crashed");
    let (s, e) = state("sig").await;
    assert_eq!(s, "pending");
    assert!(
        e[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("killed by signal 9"),
        "{e}"
    );
    let id = db
        .scalar("SELECT id FROM {schema}.jobs_all WHERE kind = 'ok'")
        .await;
    let stdin = std::fs::read_to_string(dir.path().join(format!("stdin-{id}"))).unwrap();
    assert_eq!(stdin, r#"{"hello":"world"}"#);
    let env = std::fs::read_to_string(dir.path().join(format!("env-{id}"))).unwrap();
    assert_eq!(env.trim(), format!("{id} 1 x ok"));
}

/// `docket workflows enqueue` and a workflow through `docket work --exec` (see
/// `common::workflow_through_the_cli`).
#[tokio::test]
async fn a_workflow_file_runs_through_exec_commands() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let dir = tempfile::tempdir().unwrap();
    let out = workflow_through_the_cli(|a| cli.run(a), dir.path());
    assert_eq!(out, serde_json::json!({"charge": {"receipt": "r-1"}}));
}

/// `docket batches` and a batch's callbacks through `docket work --exec` (see
/// `common::batch_chaos::batch_through_the_cli`).
#[tokio::test]
async fn a_batch_file_runs_through_exec_commands() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let dir = tempfile::tempdir().unwrap();
    let told = batch_chaos::batch_through_the_cli(|a| cli.run(a), dir.path());
    assert_eq!(told.len(), 2, "{told:?}");
    assert_eq!(told[0]["callback"], "on_complete");
    assert_eq!(told[1]["callback"], "on_failure");
    for t in &told {
        assert_eq!(
            (
                t["total"].as_i64(),
                t["succeeded"].as_i64(),
                t["dead"].as_i64()
            ),
            (Some(3), Some(2), Some(1))
        );
        assert_eq!(t["name"], "import");
    }
}

/// The lease is lost while the command runs: it gets SIGTERM, and SIGKILL when it ignores it.
#[tokio::test]
async fn a_lost_lease_terminates_then_kills_the_command() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let dir = tempfile::tempdir().unwrap();
    let o = cli.run(&["enqueue", "--queue", "x", "--kind", "long"]);
    let id: i64 = out(&o).trim().parse().unwrap();
    let script = format!(
        r#"echo $$ > {d}/pid; trap 'echo TERM >> {d}/log' TERM; while true; do sleep 0.05; done"#,
        d = dir.path().display()
    );
    let mut worker = cli
        .cmd()
        .args([
            "work",
            "--queue",
            "x",
            "--exec",
            &script,
            "--lease",
            "3s",
            "--kill-grace",
            "700ms",
            "--no-maintenance",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Proc::from)
        .unwrap();
    let pid_file = dir.path().join("pid");
    // The shell creates the file, then writes it: wait for the number, not the file.
    let pid = || -> Option<i32> { std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok() };
    wait_until(Duration::from_secs(20), "command started", || {
        pid().is_some()
    });
    let pid = pid().unwrap();
    // The worker stalls past its lease and another takes the job over.
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    assert_eq!(
        docket_core::Store::reap(&db.store, 10)
            .await
            .unwrap()
            .requeued(),
        1
    );
    db.exec("UPDATE {schema}.jobs SET run_at = now() + interval '1 hour'")
        .await;
    wait_until(Duration::from_secs(20), "SIGTERM delivered", || {
        std::fs::read_to_string(dir.path().join("log")).is_ok_and(|l| l.contains("TERM"))
    });
    wait_until(Duration::from_secs(20), "SIGKILL after the grace", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
    let rec = docket_core::Store::get(&db.store, docket_core::JobId(id))
        .await
        .unwrap();
    assert_eq!(rec.state, docket_core::JobState::Pending);
    assert_eq!(
        rec.errors.len(),
        1,
        "only the reaper's entry: the stale worker wrote nothing"
    );
    let _ = Command::new("kill").arg(worker.id().to_string()).status();
    let status = worker.wait().unwrap();
    assert!(status.success(), "SIGTERM is a graceful stop: {status:?}");
}

/// No DATABASE_URL: the embedded PostgreSQL is created, reused and stopped.
#[tokio::test]
async fn embedded_postgres_is_created_reused_and_stopped() {
    // The project sits in a directory only its owner may enter (a tempdir is 0700, like
    // root's home): as root, the server's own user could not reach a cluster under it.
    let outer = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(outer.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let home = tempfile::tempdir_in(outer.path()).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_docket"))
            .args(args)
            .env_remove("DATABASE_URL")
            .env("DOCKET_HOME", home.path())
            .output()
            .unwrap()
    };
    let o = run(&["embedded", "status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(s["initialized"], false);
    let o = run(&["enqueue", "--kind", "k"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = run(&["jobs", "list", "--json"]);
    let l: Vec<serde_json::Value> = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(l.len(), 1, "the second command reused the same cluster");
    let o = run(&["embedded", "status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(s["running"], true);
    let o = run(&["embedded", "stop"]);
    assert_eq!(out(&o).trim(), "stopped");
    let o = run(&["embedded", "status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(s["running"], false);
    // Where the cluster went: under the home, or (root, closed home) a place of its own,
    // removed here so test runs leave nothing behind.
    let dir = std::path::PathBuf::from(s["cluster_dir"].as_str().unwrap());
    if !dir.starts_with(home.path()) {
        assert!(home.path().join("pg-location").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `docket --version` names the build: the version and, built in this checkout, the commit
/// git's HEAD names (cargo rebuilds the binary when HEAD moves).
#[test]
fn the_version_names_the_commit() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_docket"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let text = out(&o);
    let want = format!("docket {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&want), "{text}");
    let commit = text
        .trim_end()
        .trim_start_matches(&want)
        .trim_end_matches(')');
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) if std::env::var_os("DOCKET_COMMIT").is_none() => assert_eq!(commit, head),
        _ => assert!(!commit.is_empty(), "{text}"),
    }
}

/// Without DATABASE_URL and without PostgreSQL's binaries: one clear line saying how to
/// install them, exit 3.
#[tokio::test]
async fn missing_postgres_binaries_are_reported_with_how_to_install_them() {
    let home = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_docket"))
        .args(["stats"])
        .env_remove("DATABASE_URL")
        .env("DOCKET_HOME", home.path())
        .env("DOCKET_PG_BIN", home.path().join("no-such-dir"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 3, "{}", err(&o));
    let e = err(&o);
    assert!(e.starts_with("error: PostgreSQL server binaries"), "{e}");
    assert!(e.contains("apt-get install postgresql"), "{e}");
    assert_eq!(e.lines().count(), 1, "one clear line: {e}");
}

/// The main job, small: every job ends succeeded or dead, a worker is killed and its jobs
/// recovered, every succeeded job was sent exactly once and nothing else was sent — and the
/// demo's own check fails when a success is recorded without its send.
#[tokio::test]
async fn the_demo_runs_end_to_end() {
    let db = TestDb::new().await;
    let schema = format!("{}_demo", db.schema);
    let o = Command::new(env!("CARGO_BIN_EXE_docket"))
        .args(["demo", "--jobs", "600", "--workers", "2"])
        .env("DATABASE_URL", &db.url)
        .env("DOCKET_SCHEMA", &db.schema)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}\n{}", out(&o), err(&o));
    let text = out(&o);
    assert!(text.contains("killed worker 1 (SIGKILL)"), "{text}");
    assert!(text.contains("succeeded, unsent        0"), "{text}");
    assert!(text.contains("sent, not finished       0"), "{text}");
    let (left, succeeded, sends, once): (i64, i64, i64, bool) = sqlx::query_as(&format!(
        "SELECT (SELECT count(*) FROM {schema}.jobs WHERE queue = 'email' AND state NOT IN ('succeeded', 'dead')),
                (SELECT count(*) FROM {schema}.jobs_all WHERE queue = 'email' AND state = 'succeeded'),
                (SELECT count(*) FROM {schema}.demo_sends),
                (SELECT coalesce(bool_and(n = 1), true) FROM (SELECT count(*) AS n FROM {schema}.demo_attempts
                                                               WHERE NOT deduped GROUP BY job_id) t)"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(left, 0);
    assert_eq!(sends, succeeded, "one send per succeeded job");
    assert!(once);
    // The check can fail: a job marked succeeded whose send never happened.
    sqlx::query(&format!(
        "DELETE FROM {schema}.demo_sends WHERE job_id = (SELECT min(job_id) FROM {schema}.demo_sends)"
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    let unsent: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {schema}.jobs_all WHERE queue = 'email' AND state = 'succeeded'
         AND NOT EXISTS (SELECT 1 FROM {schema}.demo_sends d WHERE d.job_id = jobs_all.id)"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(unsent, 1);
}

/// `docket reap` and `docket prune` on real data: expired leases go back (live ones stay),
/// and only finished jobs past their retention are deleted, dead ones by their own longer
/// retention.
#[tokio::test]
async fn reap_and_prune_act_on_real_data_and_only_on_what_is_due() {
    use docket_core::{ClaimRequest, Failure, FailureClass, Store};
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    assert_eq!(
        code(&cli.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("r", 6))),
        0
    );
    let claimed = db
        .store
        .claim(&ClaimRequest {
            queue: "r".into(),
            limit: 6,
            owner: "crashed".into(),
            lease: std::time::Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let (done, rest) = claimed.split_at(3);
    // One at a time: each kept success its own history row, so each can be aged apart.
    for d in &done[..2] {
        db.store
            .complete_many("crashed", &[d.lease()])
            .await
            .unwrap();
    }
    db.store
        .fail_many(
            "crashed",
            &[Failure {
                lease: done[2].lease(),
                class: FailureClass::Discard,
                message: "bad".into(),
                retry_in: None,
            }],
        )
        .await
        .unwrap();
    // Two of the three running leases expired; the third is live.
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET lease_expires_at = now() - interval '1 second' WHERE id IN ({}, {})",
        rest[0].id, rest[1].id
    ))
    .await;
    let o = cli.run(&["reap", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let r: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        (r["requeued"].as_i64(), r["dead"].as_i64()),
        (Some(2), Some(0)),
        "{r}"
    );
    assert_eq!(
        count(&db, "running").await,
        1,
        "the live lease was left alone"
    );
    assert_eq!(count(&db, "pending").await, 2);
    // One success 8 days old, one 1 day old; the dead job 8 days old (kept 30 days).
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET finished_at = now() - interval '8 days' WHERE id = {}",
        done[2].id
    ))
    .await;
    for (d, age) in [(&done[0], "8 days"), (&done[1], "1 day")] {
        db.exec(&format!(
            "UPDATE {{schema}}.jobs_succeeded SET finished_at = now() - interval '{age}'
             WHERE int8range(lo, hi, '[]') @> {}::bigint",
            d.id
        ))
        .await;
    }
    let o = cli.run(&["prune", "--older-than", "7d", "--json"]);
    let p: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        (p["finished"].as_i64(), p["dead"].as_i64()),
        (Some(1), Some(0)),
        "{p}"
    );
    let o = cli.run(&[
        "prune",
        "--older-than",
        "7d",
        "--dead-older-than",
        "7d",
        "--json",
    ]);
    let p: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        (p["finished"].as_i64(), p["dead"].as_i64()),
        (Some(0), Some(1)),
        "{p}"
    );
    assert_eq!(
        jobs(&db).await,
        4,
        "one recent success, two pending, one running"
    );
}
