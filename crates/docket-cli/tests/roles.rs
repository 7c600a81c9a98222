//! Every command as each of the three roles `docket grant` creates: the worker role runs
//! `docket work` and `docket enqueue` against a schema its owner migrated, the operator role
//! reads every report and every page of a read-only dashboard, and what a role may not do
//! fails with a clear error (never a panic, never a half-written change).

mod common;

use std::process::Command;

use common::*;
use docket_testkit::{fresh_schema, host_port, TestDb};

/// The test server's URL as login role `user`.
fn role_url(db: &TestDb, user: &str) -> String {
    let (host, port) = host_port(&db.url);
    let o: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    format!(
        "postgres://{user}@{host}:{port}/{}",
        o.get_database().unwrap_or("postgres")
    )
}

/// `docket` as login role `user`, on the test's schema.
fn as_role(db: &TestDb, user: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_docket"));
    c.env("DATABASE_URL", role_url(db, user))
        .env("DOCKET_SCHEMA", &db.schema)
        .env_remove("DOCKET_HOME");
    c
}

fn run(mut c: Command, args: &[&str]) -> std::process::Output {
    c.args(args).output().expect("run docket")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_as_each_role() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let suffix = fresh_schema();
    let (app, worker, operator) = (
        format!("a{suffix}"),
        format!("w{suffix}"),
        format!("o{suffix}"),
    );
    let o = cli.run(&[
        "grant",
        "--app",
        &app,
        "--worker",
        &worker,
        "--operator",
        &operator,
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    for (user, group) in [("au", &app), ("wu", &worker), ("ou", &operator)] {
        db.exec(&format!("CREATE ROLE {user}{suffix} LOGIN")).await;
        db.exec(&format!("GRANT {group} TO {user}{suffix}")).await;
    }
    let (au, wu, ou) = (
        format!("au{suffix}"),
        format!("wu{suffix}"),
        format!("ou{suffix}"),
    );

    // The worker role enqueues and runs jobs.
    let o = run(
        as_role(&db, &wu),
        &["enqueue", "--queue", "r", "--kind", "k", "--args", "{}"],
    );
    assert_eq!(code(&o), 0, "worker enqueue: {}", err(&o));
    let id = out(&o).trim().to_string();
    let o = run(
        as_role(&db, &wu),
        &[
            "enqueue", "--queue", "r", "--kind", "k", "--args", "{}", "--delay", "1h",
        ],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    let later = out(&o).trim().to_string();
    let o = run(
        as_role(&db, &wu),
        &[
            "work", "--queue", "r", "--exec", "true", "--drain", "--poll", "100ms",
        ],
    );
    assert_eq!(code(&o), 0, "worker work: {}", err(&o));

    // The worker role appends to the audit log but never rewrites or removes an entry.
    let wpool = docket_testkit::pool(&role_url(&db, &wu), "roles-test", 1).await;
    let s = &db.schema;
    sqlx::query(&format!(
        "INSERT INTO {s}.operator_actions (actor, action, target, detail) VALUES ('w', 'x', 'y', '{{}}')"
    ))
    .execute(&wpool)
    .await
    .expect("the worker appends");
    for sql in [
        format!("UPDATE {s}.operator_actions SET actor = 'someone else'"),
        format!("DELETE FROM {s}.operator_actions"),
        format!("TRUNCATE {s}.operator_actions"),
        format!("DELETE FROM {s}._sqlx_migrations"),
    ] {
        let e = sqlx::query(&sql).execute(&wpool).await.expect_err(&sql);
        assert!(e.to_string().contains("permission denied"), "{sql}: {e}");
    }
    wpool.close().await;

    // The operator role reads everything.
    for args in [
        vec!["jobs", "list"],
        vec!["jobs", "show", &id],
        vec!["jobs", "why", &later],
        vec!["stats"],
        vec!["workers"],
        vec!["queues", "list"],
        vec!["keys", "list"],
        vec!["keys", "blocked"],
        vec!["cron", "list"],
    ] {
        let o = run(as_role(&db, &ou), &args);
        assert_eq!(code(&o), 0, "operator {args:?}: {}", err(&o));
    }
    // ... and changes nothing, with a clear error.
    for args in [
        vec!["queues", "pause", "r"],
        vec!["jobs", "cancel", &later],
        vec!["enqueue", "--queue", "r", "--kind", "k"],
    ] {
        let o = run(as_role(&db, &ou), &args);
        assert!(
            ![0, 101].contains(&code(&o)),
            "operator {args:?}: {} {}",
            code(&o),
            err(&o)
        );
        assert!(
            err(&o).starts_with("error: "),
            "operator {args:?}: {}",
            err(&o)
        );
    }
    // The application role has only the SQL function: the CLI says so, it does not panic.
    let o = run(as_role(&db, &au), &["jobs", "list"]);
    assert!(![0, 101].contains(&code(&o)), "{}", err(&o));
    assert!(err(&o).starts_with("error: "), "{}", err(&o));

    // A read-only dashboard as the operator: every page answers.
    let mut c = as_role(&db, &ou);
    c.args(["dashboard", "--listen", "127.0.0.1:0", "--read-only"]);
    let (mut dash, addr) = spawn_and_wait(c, "docket: dashboard on http://");
    let base = format!("http://{}", addr.trim().split(['/', ' ']).next().unwrap());
    for path in [
        "/".to_string(),
        "/jobs".into(),
        "/jobs?state=pending".into(),
        format!("/jobs/{later}"),
        "/dead".into(),
        "/workers".into(),
        "/cron".into(),
        "/audit".into(),
        "/metrics".into(),
    ] {
        let o = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("{base}{path}"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "200",
            "operator page {path}"
        );
    }
    let _ = dash.kill();
    let _ = dash.wait();
    // Roles are dropped with their grants (the shared server keeps nothing).
    for r in [&au, &wu, &ou] {
        db.exec(&format!("DROP ROLE {r}")).await;
    }
}
