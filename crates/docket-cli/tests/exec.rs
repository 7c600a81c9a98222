//! `docket work --exec` and the processes it starts: each command is a process group that
//! ends with its job — on success (a background grandchild), on max runtime and on cancel
//! (children that ignore SIGTERM, also after `sh` has exited), and on a lost lease before
//! the successor attempt can start. The job's environment carries none of Docket's secrets.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use docket_testkit::proxy::Proxy;
use docket_testkit::TestDb;

/// True while a process with this pid exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s[s.rfind(')')? + 1..]
                .split_whitespace()
                .next()
                .map(|st| st != "Z")
        })
        .unwrap_or(false)
}

fn pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

async fn enqueue(db: &TestDb, args: &str) -> i64 {
    let o = docket(db)
        .args([
            "enqueue",
            "--queue",
            "x",
            "--kind",
            "k",
            "--max-attempts",
            "1",
            "--args",
            args,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    out(&o).trim().parse().unwrap()
}

async fn state(db: &TestDb, id: i64) -> String {
    sqlx::query_scalar(&format!(
        "SELECT state FROM {}.jobs_all WHERE id = $1",
        db.schema
    ))
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_grandchild_neither_holds_the_job_open_nor_outlives_it() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let id = enqueue(&db, "{}").await;
    // The grandchild ignores SIGTERM and keeps the job's stderr open for 30 s.
    let script = format!(
        r#"(trap "" TERM; sleep 30) & echo $! > {d}/gc; exit 0"#,
        d = dir.display()
    );
    let started = Instant::now();
    let o = docket(&db)
        .args([
            "work",
            "--queue",
            "x",
            "--drain",
            "--poll",
            "100ms",
            "--kill-grace",
            "300ms",
            "--exec",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the grandchild held the job open: {:?}",
        started.elapsed()
    );
    assert_eq!(state(&db, id).await, "succeeded");
    let gc = pids(&dir.join("gc"));
    assert_eq!(gc.len(), 1);
    assert!(!alive(gc[0]), "the grandchild outlived its job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_runtime_and_cancel_end_every_process_of_the_group() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    // sh and its child both ignore SIGTERM: only SIGKILL to the group ends them.
    let script = format!(
        r#"trap "" TERM; (trap "" TERM; sleep 60) & echo $$ $! > {d}/p.$DOCKET_JOB_ID; sleep 60"#,
        d = dir.display()
    );
    let timed = enqueue(&db, r#"{"t":1}"#).await;
    let mut w = spawn_worker(
        &db,
        &[
            "--queue",
            "x",
            "--concurrency",
            "2",
            "--poll",
            "100ms",
            "--max-runtime",
            "1s",
            "--kill-grace",
            "300ms",
            "--exec",
            &script,
        ],
        None,
    );
    // The outcome is written only after the group is gone: when the state changes, both
    // processes must already be dead.
    eventually(
        Duration::from_secs(30),
        "timed out job recorded",
        || async { state(&db, timed).await == "dead" },
    )
    .await;
    let p = pids(&dir.join(format!("p.{timed}")));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p.iter().all(|&p| !alive(p)),
        "alive after max runtime: {p:?}"
    );

    let cancelled = enqueue(&db, r#"{"t":2}"#).await;
    let file = dir.join(format!("p.{cancelled}"));
    eventually(Duration::from_secs(30), "job started", || async {
        file.exists()
    })
    .await;
    let o = docket(&db)
        .args(["jobs", "cancel", &cancelled.to_string()])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    eventually(Duration::from_secs(30), "cancel recorded", || async {
        state(&db, cancelled).await == "cancelled"
    })
    .await;
    let p = pids(&file);
    assert!(p.iter().all(|&p| !alive(p)), "alive after cancel: {p:?}");
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_of_a_superseded_attempt_is_alive_when_its_successor_starts() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let d = dir.display();
    // Attempt 1 leaves two TERM-ignoring processes; attempt 2 looks for them at its start.
    let script = format!(
        r#"if [ "$DOCKET_ATTEMPT" = 1 ]; then
             trap "" TERM; (trap "" TERM; sleep 60) & echo $$ $! > {d}/first; sleep 60
           else
             for p in $(cat {d}/first); do
               if [ -e /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; then echo $p >> {d}/overlap; fi
             done
             echo ran > {d}/second
           fi"#
    );
    let o = docket(&db)
        .args(["enqueue", "--queue", "x", "--kind", "k", "--args", "{}"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0);
    db.exec("UPDATE {schema}.jobs SET backoff_base_ms = 1, backoff_cap_ms = 1")
        .await;
    // Worker A reaches the database through a proxy the test cuts: its heartbeats stop.
    let proxy = Proxy::in_front_of(&db.url).await;
    let args = [
        "--queue", "x", "--lease", "2s", "--poll", "100ms", "--exec", &script,
    ];
    let mut a = docket(&db)
        .env("DATABASE_URL", proxy.url(&db.url))
        .arg("work")
        .args(args)
        .arg("--no-maintenance")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Proc::from)
        .unwrap();
    let first = dir.join("first");
    eventually(Duration::from_secs(30), "attempt 1 running", || async {
        first.exists()
    })
    .await;
    proxy.cut();
    // Worker B, directly connected, reaps the expired lease and runs attempt 2.
    let mut b = spawn_worker(&db, &args, None);
    let second = dir.join("second");
    eventually(Duration::from_secs(60), "attempt 2 ran", || async {
        second.exists()
    })
    .await;
    let overlap = std::fs::read_to_string(dir.join("overlap")).unwrap_or_default();
    assert!(
        overlap.is_empty(),
        "attempt 1 processes alive when attempt 2 started: {overlap}"
    );
    assert!(pids(&first).iter().all(|&p| !alive(p)));
    proxy.heal();
    for w in [&mut a, &mut b] {
        signal(w.id(), "TERM");
        let _ = w.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_environment_carries_no_secret_of_dockets() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    enqueue(&db, "{}").await;
    // The worker's own URL has a password (trust auth ignores it).
    let url = db.url.replacen("postgres@", "postgres:hunter2@", 1);
    assert!(url.contains("hunter2"), "{url}");
    let o = docket(&db)
        .env("DATABASE_URL", &url)
        .env("DOCKET_LISTEN_URL", &url)
        .env("PGPASSWORD", "hunter2")
        .env("APP_TOKEN", "x-hunter2-x")
        .env("KEEP_ME", "1")
        .args([
            "work", "--queue", "x", "--drain", "--poll", "100ms", "--exec",
        ])
        .arg(format!("env > {}/env", dir.display()))
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let env = std::fs::read_to_string(dir.join("env")).unwrap();
    assert!(!env.contains("hunter2"), "{env}");
    for var in ["DATABASE_URL=", "DOCKET_LISTEN_URL=", "PGPASSWORD="] {
        assert!(!env.lines().any(|l| l.starts_with(var)), "{var} in {env}");
    }
    assert!(env.lines().any(|l| l == "KEEP_ME=1"));
    assert!(env.lines().any(|l| l.starts_with("DOCKET_JOB_ID=")));
}

/// A password with characters a URL must encode, the dashboard's credentials, and copies of
/// them elsewhere in the environment: none reaches a job's environment, and what the
/// command prints of them on stderr is cut from the stored error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_passwords_and_dashboard_credentials_stay_put() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let id = enqueue(&db, "{}").await;
    let url = db.url.replacen("postgres@", "postgres:p%40ss%2Fw0rd@", 1);
    let o = docket(&db)
        .env("DATABASE_URL", &url)
        .env("COPY_OF_URL", &url)
        .env("DECODED_COPY", "x p@ss/w0rd x")
        .env("DOCKET_DASHBOARD_TOKEN", "dash-token-123456")
        .env("DOCKET_DASHBOARD_PASSWORD", "dash-pass-654321")
        .env("KEEP_ME", "1")
        .args([
            "work", "--queue", "x", "--drain", "--poll", "100ms", "--exec",
        ])
        .arg(format!(
            "env > {}/env; echo \"leaked $COPY_OF_URL dash-token-123456 p@ss/w0rd p%40ss%2Fw0rd\" >&2; exit 65",
            dir.display()
        ))
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let env = std::fs::read_to_string(dir.join("env")).unwrap();
    for secret in ["p%40ss", "p@ss/w0rd", "dash-token", "dash-pass"] {
        assert!(!env.contains(secret), "{secret} in {env}");
    }
    assert!(env.lines().any(|l| l == "KEEP_ME=1"));
    let rec = docket_core::Store::get(&db.store, docket_core::JobId(id))
        .await
        .unwrap();
    let stored = &rec.errors.last().unwrap().message;
    assert!(stored.contains("leaked"), "{stored}");
    for secret in ["p%40ss", "p@ss/w0rd", "dash-token-123456"] {
        assert!(!stored.contains(secret), "{secret} stored: {stored}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_stdout_is_the_output_only_when_it_is_one_bounded_json_document() {
    let db = TestDb::new().await;
    let good = enqueue(&db, r#""good""#).await;
    let not_json = enqueue(&db, r#""notjson""#).await;
    let two_docs = enqueue(&db, r#""twodocs""#).await;
    let big = enqueue(&db, r#""big""#).await;
    let discarded = enqueue(&db, r#""discard""#).await;
    let script = r#"a=$(cat); case "$a" in
        *good*) printf '{"ok": true, "args": %s, "esc": "\u001b[2J"}\n' "$a" ;;
        *notjson*) echo hello ;;
        *twodocs*) echo '{"a":1} {"b":2}' ;;
        *big*) printf '"%02000d"' 0 ;;
        *discard*) echo '{"x":1}'; exit 65 ;;
    esac"#;
    let o = docket(&db)
        .args([
            "work",
            "--queue",
            "x",
            "--drain",
            "--capture-output",
            "--max-output-bytes",
            "1000",
            "--exec",
            script,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));

    let o = docket(&db)
        .args(["jobs", "output", &good.to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(v["state"], "succeeded");
    assert_eq!(v["output"]["ok"], true);
    assert_eq!(v["output"]["args"], "good");
    // For a person: pretty JSON, with nothing a terminal would act on.
    let o = docket(&db)
        .args(["jobs", "output", &good.to_string()])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("\"ok\": true"), "{}", out(&o));
    assert!(!out(&o).contains('\u{1b}'), "{:?}", out(&o));

    for (id, why) in [
        (not_json, "not one JSON document"),
        (two_docs, "not one JSON document"),
        (big, "over the output bound of 1000 bytes"),
        (discarded, "exit 65"),
    ] {
        assert_eq!(state(&db, id).await, "dead", "job {id}");
        let o = docket(&db)
            .args(["jobs", "show", &id.to_string(), "--json"])
            .output()
            .unwrap();
        assert!(out(&o).contains(why), "job {id}: {}", out(&o));
        let o = docket(&db)
            .args(["jobs", "output", &id.to_string()])
            .output()
            .unwrap();
        assert_eq!(code(&o), 6, "{}", err(&o));
        assert!(
            err(&o).contains("ended dead without an output"),
            "{}",
            err(&o)
        );
    }

    // Not run yet: no output, also after a bounded wait; a missing job is exit 4.
    let pending = enqueue(&db, "{}").await;
    let o = docket(&db)
        .args(["jobs", "output", &pending.to_string(), "--wait", "200ms"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 6, "{}", err(&o));
    assert!(err(&o).contains("pending: no output yet"), "{}", err(&o));
    let o = docket(&db)
        .args(["jobs", "output", "987654321"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 4, "{}", err(&o));
    let o = docket(&db)
        .args(["jobs", "output", &pending.to_string(), "--wait", "soon"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_signal_sends_once_from_the_cli_and_from_sql_and_refuses_finished_jobs() {
    let db = TestDb::new().await;
    let id = enqueue(&db, "{}").await;
    let run = |args: Vec<String>| {
        let o = docket(&db).args(&args).output().unwrap();
        (code(&o), out(&o), err(&o))
    };
    let sig = |name: &str, payload: &str| {
        vec![
            "jobs".to_string(),
            "signal".into(),
            id.to_string(),
            name.into(),
            "--payload".into(),
            payload.into(),
        ]
    };
    let (c, o, e) = run(sig("approved", r#"{"by": "ann"}"#));
    assert_eq!(c, 0, "{e}");
    assert!(o.contains("signal approved sent to job"), "{o}");
    let (c, o, _) = run(sig("approved", r#"{"by": "bob"}"#));
    assert_eq!(c, 0);
    assert!(o.contains("already had signal approved"), "{o}");
    let (c, _, e) = run(sig("other", "{not json"));
    assert_eq!(c, 5, "{e}");
    let (c, _, e) = run(sig("docket:wait:x", "1"));
    assert_eq!(c, 5, "{e}");
    let (c, _, _) = run(vec![
        "jobs".into(),
        "signal".into(),
        "987654321".into(),
        "x".into(),
    ]);
    assert_eq!(c, 4);
    // From SQL, as any language would (the function `docket grant` gives the app role).
    let (new, woke): (bool, bool) = sqlx::query_as(&format!(
        "SELECT new, woke FROM {}.signal($1, 'via_sql', '2'::jsonb)",
        db.schema
    ))
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((new, woke), (true, false));
    let names: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT name FROM {}.job_signals WHERE job_id = $1 ORDER BY name",
        db.schema
    ))
    .bind(id)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(names, ["approved", "via_sql"]);
    let payload: serde_json::Value = sqlx::query_scalar(&format!(
        "SELECT payload FROM {}.job_signals WHERE job_id = $1 AND name = 'approved'",
        db.schema
    ))
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        payload,
        serde_json::json!({"by": "ann"}),
        "the first is kept"
    );
    // Finished: refused from both, nothing written.
    let (c, _, e) = run(vec!["jobs".into(), "cancel".into(), id.to_string()]);
    assert_eq!(c, 0, "{e}");
    let (c, _, e) = run(sig("late", "1"));
    assert_eq!(c, 6, "{e}");
    assert!(e.contains("cancelled"), "{e}");
    let r = sqlx::query(&format!(
        "SELECT * FROM {}.signal($1, 'late', '1')",
        db.schema
    ))
    .bind(id)
    .execute(&db.pool)
    .await;
    assert!(format!("{r:?}").contains("a signal is refused"), "{r:?}");
}
