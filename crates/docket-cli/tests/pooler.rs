//! The `docket` command through a real PgBouncer in transaction pooling mode (fewer server
//! connections than clients): the CLI contract, and workers killed with SIGKILL while they
//! drain through it, checked by the invariant checker.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use docket_testkit::pgbouncer::PgBouncer;
use docket_testkit::{checker, fresh_schema, TestDb};
use rand::Rng;

/// `docket` against `db`'s schema, through `url`.
fn via(db: &TestDb, url: &str) -> Command {
    let mut c = docket(db);
    c.env("DATABASE_URL", url);
    c
}

fn ok(c: &mut Command) -> String {
    let o = c.output().expect("run docket");
    assert_eq!(code(&o), 0, "{c:?}: {}", err(&o));
    out(&o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_contract_through_pgbouncer() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(&db.url, "transaction", 2);
    let url = bouncer.url_for(&db.url, "pooler=transaction");

    // Migrations from nothing, twice (idempotent), into a schema of their own.
    let fresh = fresh_schema();
    for _ in 0..2 {
        ok(via(&db, &url).args(["--schema", &fresh, "migrate"]));
    }
    let id: i64 = ok(via(&db, &url).args([
        "enqueue",
        "--queue",
        "q",
        "--kind",
        "k",
        "--args",
        r#"{"a":1}"#,
    ]))
    .trim()
    .parse()
    .unwrap();
    // Bulk: 1,500 lines take the COPY path.
    let lines: String = ndjson("q", 1500);
    let mut child = via(&db, &url)
        .args(["enqueue", "--bulk", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("1500"), "{}", out(&o));

    let list = ok(via(&db, &url).args(["jobs", "list", "--queue", "q", "--limit", "5", "--json"]));
    assert!(list.contains("\"queue\""), "{list}");
    let show = ok(via(&db, &url).args(["jobs", "show", &id.to_string(), "--json"]));
    assert!(show.contains("\"a\""), "{show}");
    ok(via(&db, &url).args(["stats", "--json"]));
    ok(via(&db, &url).args(["explain", "--queue", "q"]));
    ok(via(&db, &url).args(["queues", "pause", "q"]));
    assert!(!ok(via(&db, &url).args(["queues", "list", "--json"])).contains("\"paused_at\":null"));
    ok(via(&db, &url).args(["queues", "resume", "q"]));
    ok(via(&db, &url).args(["queues", "limit", "q", "--max-running", "50"]));
    ok(via(&db, &url).args(["keys", "limit", "tenant-1", "--max-running", "2"]));
    assert!(ok(via(&db, &url).args(["keys", "list"])).contains("tenant-1"));
    ok(via(&db, &url).args([
        "cron",
        "add",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--queue",
        "other",
        "--kind",
        "k",
    ]));
    assert!(ok(via(&db, &url).args(["cron", "list"])).contains("nightly"));
    ok(via(&db, &url).args(["cron", "remove", "nightly"]));
    ok(via(&db, &url).args(["jobs", "cancel", &id.to_string()]));
    ok(via(&db, &url).args(["jobs", "retry", &id.to_string()]));
    ok(via(&db, &url).args(["reap", "--json"]));
    ok(via(&db, &url).args(["prune", "--older-than", "7d", "--json"]));

    // A draining worker through the pooler: polls (no LISTEN), says so once, ends.
    let o = via(&db, &url)
        .args([
            "work",
            "--queue",
            "q",
            "--concurrency",
            "16",
            "--poll",
            "100ms",
            "--drain",
            "--exec",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(err(&o).matches("polling only").count(), 1, "{}", err(&o));
    assert_eq!(count(&db, "succeeded").await, 1501);
    assert!(!bouncer.log().contains("ERROR"), "{}", bouncer.log());
}

fn worker(db: &TestDb, url: &str, log: &std::path::Path) -> Proc {
    via(db, url)
        .args([
            "work",
            "--queue",
            "x",
            "--concurrency",
            "8",
            "--lease",
            "2s",
            "--poll",
            "200ms",
            "--exec",
            &logged(log, "true"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn worker")
        .into()
}

/// 3,000 jobs, three workers through PgBouncer, one SIGKILLed (and replaced) every 1–1.5 s:
/// every job ends succeeded, with exactly one accepted completion, none from a stale token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_nine_through_pgbouncer() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let bouncer = PgBouncer::start(&db.url, "transaction", 6);
    let url = bouncer.url_for(&db.url, "pooler=transaction");
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    const N: i64 = 3000;
    let lines: String = ndjson("x", N as usize);
    let mut bulk = via(&db, &url);
    bulk.args(["enqueue", "--bulk", "-"]);
    let o = run_with_stdin(bulk, &lines);
    assert_eq!(code(&o), 0, "{}", err(&o));
    db.exec("UPDATE {schema}.jobs SET backoff_base_ms = 100, backoff_cap_ms = 200")
        .await;

    let mut workers: Vec<Proc> = (0..3).map(|_| worker(&db, &url, &log)).collect();
    let mut rng = rand::thread_rng();
    let started = Instant::now();
    let mut kills = 0;
    while kills < 4 {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1000..1500))).await;
        let victim = rng.gen_range(0..workers.len());
        signal(workers[victim].id(), "KILL");
        let status = workers[victim].wait().unwrap();
        checker::assert_exit("victim", status, "", checker::Exit::Killed);
        workers[victim] = worker(&db, &url, &log);
        kills += 1;
    }
    eventually(Duration::from_secs(300), "every job succeeded", || async {
        count(&db, "succeeded").await == N
    })
    .await;
    for w in workers.iter() {
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        assert!(w.wait().unwrap().success(), "a worker exited badly");
    }
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    let report = checker::check(&db, &runs, &["succeeded"]).await;
    assert_eq!(report.jobs, N);
    println!(
        "{N} jobs through PgBouncer, {kills} SIGKILLs in {:?}: {report:?}",
        started.elapsed()
    );
}

/// A transaction-mode PgBouncer on a port Docket does not recognise, reached without
/// `pooler=`, that passes sqlx's startup parameters (`ignore_startup_parameters`): each
/// command finds out from the first prepared-statement error, switches to pooler mode, says
/// so once, and runs the failed operation again — every command succeeds. One server
/// connection, so every client's named statements meet on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecognised_transaction_pooler_is_detected_and_nothing_fails() {
    unrecognised_pooler("ignore_startup_parameters = extra_float_digits", false).await;
}

/// The same PgBouncer with its default settings refuses sqlx's `extra_float_digits` at
/// connect: recognised by that refusal, before any statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pgbouncer_refusing_a_startup_parameter_is_detected_at_connect() {
    unrecognised_pooler("", true).await;
}

async fn unrecognised_pooler(extra: &str, at_connect: bool) {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start_with(&db.url, "transaction", 1, extra);
    let url = bouncer.url_for(&db.url, "");
    assert!(
        !url.contains(":6432"),
        "a port Docket would recognise: {url}"
    );
    let said = |o: &std::process::Output| err(o).matches("switched to pooler=transaction").count();
    let run = |args: &[&str]| {
        let o = via(&db, &url)
            .args(args)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{args:?}: {}", err(&o));
        assert!(
            said(&o) <= 1,
            "{args:?} said it more than once: {}",
            err(&o)
        );
        o
    };
    run(&["migrate"]);
    // Enough commands that the server connection holds other clients' sqlx_s_1.
    let mut switched = 0;
    for i in 0..6 {
        let o = run(&[
            "enqueue",
            "--queue",
            "q",
            "--kind",
            "k",
            "--args",
            &format!("{{\"i\":{i}}}"),
        ]);
        switched += said(&o);
        let o = run(&["stats", "--json"]);
        switched += said(&o);
        // Recognised at connect (the refusal) or by the first statement's error, never both.
        let at_start = err(&o).matches("refused a startup parameter").count();
        assert_eq!(at_start, usize::from(at_connect), "{}", err(&o));
    }
    assert!(
        switched > 0,
        "no command met the pooler's mix-up: the test proves nothing"
    );
    // A worker drains through it: its claims, completions and heartbeats all succeed.
    let o = run(&[
        "work",
        "--queue",
        "q",
        "--concurrency",
        "4",
        "--poll",
        "100ms",
        "--drain",
        "--exec",
        "true",
    ]);
    assert_eq!(count(&db, "succeeded").await, 6, "{}", err(&o));
}
