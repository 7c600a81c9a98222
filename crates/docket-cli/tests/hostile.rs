//! Hostile input and operator mistakes, through the binary: out-of-range values refused the
//! same way on every entry point; a bad row that got in anyway shown, not fatal; job data
//! printed terminal-safe and round-tripped exactly; schemas never dropped, created or
//! migrated behind the operator's back; no password in a process's argv.

use crate::common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use docket_testkit::{fresh_schema, TestDb};

const EXACT: &str =
    r#"{"amount":12345678901234567890.123456789012345678,"big":123456789012345678901234567890}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_values_are_refused_at_every_entry_point() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    for args in [
        vec!["enqueue", "--kind", "k", "--run-at", "0001-01-01T00:00:00Z"],
        vec!["enqueue", "--kind", "k", "--run-at", "infinity"],
        vec!["enqueue", "--kind", "k", "--args", r#"{"n": 1e999999}"#],
        vec!["enqueue", "--kind", "k", "--priority", "101"],
        vec!["enqueue", "--kind", "k", "--max-attempts", "0"],
        vec!["enqueue", "--kind", "k", "--delay", "-1s"],
        vec!["enqueue", "--kind", "bad kind"],
    ] {
        assert_fails(&cli, &args, 5, "");
    }
    // Bulk: the first bad line is named, and nothing of the file is written.
    for (line, what) in [
        (r#"{"kind":"k","run_at":"0200-01-01T00:00:00Z"}"#, "run_at"),
        (r#"{"kind":"k","run_at":"infinity"}"#, "run_at"),
        (r#"{"kind":"k","priority":500}"#, "priority"),
        (r#"{"kind":"k","delay":1e300}"#, "delay"),
        (r#"{"kind":"k","args":{"n":1e999999}}"#, "args"),
        (r#"{"kind":"k","max_attempts":-3}"#, "max_attempts"),
    ] {
        let input = format!("{{\"kind\":\"k\"}}\n{line}\n");
        let o = cli.run_stdin(&["enqueue", "--bulk", "-"], &input);
        assert_eq!(code(&o), 5, "{line}: {}", err(&o));
        assert!(err(&o).contains("line 2"), "{line}: {}", err(&o));
        assert!(err(&o).contains(what), "{line}: {}", err(&o));
    }
    assert_eq!(count(&db, "pending").await, 0, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_row_is_listed_shown_and_failed_but_never_fatal() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    db.exec("ALTER TABLE {schema}.jobs DROP CONSTRAINT jobs_times_finite, DROP CONSTRAINT jobs_times_in_range").await;
    for _ in 0..3 {
        assert_eq!(
            code(&cli.run(&["enqueue", "--queue", "q", "--kind", "k"])),
            0
        );
    }
    db.exec("UPDATE {schema}.jobs SET run_at = '-infinity' WHERE id = 1")
        .await;
    let o = cli.run(&["jobs", "list"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = cli.run(&["jobs", "show", "1"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("run_at is -infinity"), "{}", out(&o));
    let o = cli.run(&["stats", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    // The worker fails the one bad job and runs the others.
    let o = cli.run(&[
        "work", "--queue", "q", "--drain", "--poll", "100ms", "--exec", "true",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(count(&db, "succeeded").await, 2);
    assert_eq!(count(&db, "dead").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_data_is_exact_and_printed_terminal_safe() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let (_d, dir) = scratch();
    let o = cli.run(&["enqueue", "--queue", "q", "--kind", "k", "--args", EXACT]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let show = out(&cli.run(&["jobs", "show", "1", "--json"]));
    assert!(
        show.contains("12345678901234567890.123456789012345678"),
        "{show}"
    );
    assert!(show.contains("123456789012345678901234567890"), "{show}");
    // The command's stdin is the args exactly; its stderr (the stored error) carries escape
    // sequences that must not reach an operator's terminal raw.
    let script = format!(
        r#"cat > {d}/stdin; printf '\033]0;owned\007\033[2J\342\200\256evil' >&2; exit 75"#,
        d = dir.display()
    );
    let o = cli.run(&[
        "work", "--queue", "q", "--drain", "--poll", "100ms", "--exec", &script,
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let stdin = std::fs::read_to_string(dir.join("stdin")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdin).unwrap(),
        serde_json::from_str::<serde_json::Value>(EXACT).unwrap()
    );
    assert!(
        stdin.contains("12345678901234567890.123456789012345678"),
        "{stdin}"
    );
    let shown = out(&cli.run(&["jobs", "show", "1"]));
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    assert!(shown.contains("\\u{1b}]0;owned"), "{shown}");
    let listed = out(&cli.run(&["jobs", "list"]));
    assert!(!listed.contains('\u{1b}'), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_are_never_dropped_created_or_migrated_behind_the_operators_back() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    // An operator's own schema that happens to have the demo's name survives `demo`.
    let base = fresh_schema();
    let theirs = format!("{base}_demo");
    db.exec(&format!("CREATE SCHEMA {theirs}")).await;
    db.exec(&format!("CREATE TABLE {theirs}.orders (id int)"))
        .await;
    assert_fails(
        &cli,
        &["--schema", &base, "demo", "--jobs", "10"],
        6,
        "refusing to drop",
    );
    assert_eq!(
        db.scalar(&format!("SELECT count(*) FROM {theirs}.orders"))
            .await,
        0
    );
    // Read-only and operator commands on a schema that does not exist: an error naming it,
    // and no schema created.
    let missing = fresh_schema();
    for args in [
        vec!["jobs", "list"],
        vec!["jobs", "show", "1"],
        vec!["stats"],
        vec!["explain"],
        vec!["keys", "list"],
        vec!["cron", "list"],
        vec!["queues", "pause", "q"],
    ] {
        let mut full = vec!["--schema", missing.as_str()];
        full.extend(args.iter().copied());
        let o = cli.run(&full);
        assert_eq!(code(&o), 1, "{args:?}: {}", err(&o));
        assert!(err(&o).contains(&missing), "{args:?}: {}", err(&o));
    }
    let made = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{missing}'"
        ))
        .await;
    assert_eq!(made, 0);
    // Reserved names.
    for s in ["pg_catalog", "information_schema", "public", "pg_docket"] {
        assert_fails(&cli, &["--schema", s, "migrate"], 5, "invalid schema name");
    }
    // A blank DATABASE_URL is an error, not the embedded cluster.
    let o = cli
        .cmd()
        .env("DATABASE_URL", "  ")
        .args(["stats"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("blank"), "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_processes_started_by_bench_have_no_password_in_argv() {
    let db = TestDb::new().await;
    let url = db.url.replacen("postgres@", "postgres:hunter2@", 1);
    assert!(url.contains("hunter2"));
    let mut bench = docket(&db)
        .env("DATABASE_URL", &url)
        .args([
            "bench",
            "--scenario",
            "drain",
            "--jobs",
            "3000",
            "--workers",
            "2",
            "--concurrency",
            "10",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Proc::from)
        .unwrap();
    let mut children_seen = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while bench.try_wait().unwrap().is_none() {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains("__bench-worker") {
                children_seen += 1;
            }
            assert!(!cmd.contains("hunter2"), "password in argv: {cmd}");
        }
        assert!(std::time::Instant::now() < deadline, "bench took too long");
        // Sampling argv while the bench runs: there is no event to wait on for "a process
        // appeared"; each worker lives for the whole drain, so 20 ms sampling sees them all.
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = bench.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(children_seen > 0, "never saw a worker process to check");
    assert!(!out(&o).contains("hunter2") && !err(&o).contains("hunter2"));
    let _ = std::io::stdout().flush();
}

/// Operator mistakes the binary names instead of obeying silently: a seventh cron field, a
/// periodic name that exists (without --replace), a queue served twice, a negative
/// --max-attempts (a value, not an unknown flag), a 10 KB name (cut in the message), and
/// both run_at and delay given to the SQL function (nothing written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_are_named_not_obeyed() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&["migrate"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_fails(
        &cli,
        &[
            "cron",
            "add",
            "n",
            "--cron",
            "0 9 * * * * 2030",
            "--kind",
            "k",
        ],
        5,
        "7 fields",
    );
    let add = ["cron", "add", "n", "--cron", "0 9 * * *", "--kind", "k"];
    assert_eq!(code(&cli.run(&add)), 0);
    assert_fails(&cli, &add, 6, "exists");
    let mut replace = add.to_vec();
    replace.push("--replace");
    assert_eq!(code(&cli.run(&replace)), 0);
    assert_fails(
        &cli,
        &[
            "work", "--queue", "cc", "--queue", "cc", "--exec", "true", "--drain",
        ],
        5,
        "given twice",
    );
    assert_fails(
        &cli,
        &["enqueue", "--kind", "k", "--max-attempts", "-1"],
        5,
        "max_attempts -1",
    );
    for (flag, v) in [
        ("--workers", "0"),
        ("--jobs", "0"),
        ("--batch", "0"),
        ("--jobs", "1000000000"),
    ] {
        assert_fails(&cli, &["bench", flag, v], 5, flag);
    }
    // Bulk files: a byte-order mark is not part of the first line; a JSON array is named.
    let o = cli.run_stdin(
        &["enqueue", "--bulk", "-"],
        "\u{feff}{\"queue\":\"bom\",\"kind\":\"k\"}\n",
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = cli.run_stdin(
        &["enqueue", "--bulk", "-"],
        "{\"kind\":\"k\"}\n[{\"kind\":\"k\"}]\n",
    );
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("line 2: a JSON array"), "{}", err(&o));
    // A key with an escape sequence is echoed visibly, not to the terminal.
    let o = cli.run(&[
        "keys",
        "limit",
        "t\u{1b}]0;owned\u{7}x",
        "--max-running",
        "1",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(!out(&o).contains('\u{1b}'), "{:?}", out(&o));
    assert!(out(&o).contains("\\u{1b}"), "{:?}", out(&o));
    // A schema a newer release migrated (not additively) asks for that release, not for
    // `docket migrate`.
    let reader = db
        .scalar("SELECT max(min_reader)::bigint FROM {schema}.schema_compat")
        .await;
    db.exec("UPDATE {schema}.schema_compat SET min_reader = 9999")
        .await;
    let o = cli.run(&["stats"]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(err(&o).contains("upgrade this binary"), "{}", err(&o));
    assert!(!err(&o).contains("docket migrate` creates"), "{}", err(&o));
    db.exec(&format!(
        "UPDATE {{schema}}.schema_compat SET min_reader = {reader}"
    ))
    .await;
    let long = "q".repeat(10_000);
    let o = cli.run(&["enqueue", "--queue", &long, "--kind", "k"]);
    assert_eq!(code(&o), 5);
    assert!(
        err(&o).len() < 2_000,
        "the name is echoed in full: {} bytes",
        err(&o).len()
    );
    let e = sqlx::query(&format!(
        "SELECT * FROM {}.enqueue_many(ARRAY['q'], ARRAY['k'], ARRAY['{{}}'::jsonb], NULL, ARRAY[now() + interval '1 hour'], ARRAY[5000::bigint])",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .expect_err("both run_at and delay");
    assert!(e.to_string().contains("both given"), "{e}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE queue = 'q'")
            .await,
        0,
        "nothing written"
    );
}

/// `docket jobs list | head -1`: the reader goes after one line; the command ends quietly
/// (status 141, as a tool killed by SIGPIPE; no panic, no message) instead of panicking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_a_command_quietly() {
    use docket_core::{NewJob, Store as _};
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..2000)
        .map(|i| {
            NewJob::new(
                "q",
                "k",
                serde_json::json!({ "n": i, "pad": "x".repeat(200) }),
            )
        })
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    for args in [
        &["jobs", "list", "--limit", "2000"][..],
        &["jobs", "list", "--limit", "2000", "--json"][..],
    ] {
        let mut child = docket(&db)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 64];
        std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
        drop(stdout);
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.trim().is_empty(), "{args:?}: {stderr}");
        assert_eq!(o.status.code(), Some(141), "{args:?}: {stderr}");
    }
}
