//! Every command as each of the three roles `docket grant` creates: the worker role runs
//! `docket work` and `docket enqueue` against a schema its owner migrated, the operator role
//! reads every report and every page of a read-only dashboard, and what a role may not do
//! fails with a clear error (never a panic, never a half-written change).

use crate::common;

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
    // ... and writes a job row only through the state machine's functions (migration 0016):
    // no statement of its own marks a job it never claimed succeeded, inserts a finished
    // row or deletes one, and the fenced function changes nothing for a job it does not hold.
    for sql in [
        format!("UPDATE {s}.jobs SET state = 'succeeded', finished_at = now() WHERE id = {later}"),
        format!("INSERT INTO {s}.jobs (queue, kind, state, finished_at) VALUES ('r', 'k', 'succeeded', now())"),
        format!("DELETE FROM {s}.jobs WHERE id = {later}"),
    ] {
        let e = sqlx::query(&sql).execute(&wpool).await.expect_err(&sql);
        assert!(e.to_string().contains("permission denied"), "{sql}: {e}");
    }
    let hit: Vec<(i64, i32)> = sqlx::query_as(&format!(
        "SELECT id, attempt FROM {s}.complete_fenced(ARRAY[{later}]::bigint[], ARRAY[0], 'forged')"
    ))
    .fetch_all(&wpool)
    .await
    .unwrap();
    assert!(hit.is_empty(), "a pending job cannot be completed: {hit:?}");
    let state: String =
        sqlx::query_scalar(&format!("SELECT state FROM {s}.jobs WHERE id = {later}"))
            .fetch_one(&wpool)
            .await
            .unwrap();
    assert_eq!(state, "pending");
    // Nor does it write a workflow's edges or rows itself (migration 0030): it runs
    // workflows through the functions, and `docket workflows enqueue` works as the worker.
    for sql in [
        format!("INSERT INTO {s}.workflows (name, nodes) VALUES ('forged', 1)"),
        format!("UPDATE {s}.job_deps SET state = 'satisfied'"),
        format!("DELETE FROM {s}.job_deps"),
    ] {
        let e = sqlx::query(&sql).execute(&wpool).await.expect_err(&sql);
        assert!(e.to_string().contains("permission denied"), "{sql}: {e}");
    }
    let graph = std::env::temp_dir().join(format!("roles-graph-{suffix}.json"));
    std::fs::write(
        &graph,
        r#"{"name":"r","nodes":[{"name":"a","queue":"wf","kind":"k"},{"name":"b","queue":"wf","kind":"k","after":["a"]}]}"#,
    )
    .unwrap();
    let o = run(
        as_role(&db, &wu),
        &["workflows", "enqueue", graph.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&graph);
    assert_eq!(code(&o), 0, "worker workflows enqueue: {}", err(&o));
    let o = run(
        as_role(&db, &wu),
        &[
            "work", "--queue", "wf", "--exec", "true", "--drain", "--poll", "100ms",
        ],
    );
    assert_eq!(code(&o), 0, "worker work on a workflow: {}", err(&o));
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.jobs WHERE queue = 'wf' AND state <> 'succeeded'"
    ))
    .fetch_one(&wpool)
    .await
    .unwrap();
    assert_eq!(left, 0, "both nodes ran, in order, as the worker role");
    wpool.close().await;
    // A bulk file of COPY size from the worker role goes through the functions (it may not
    // COPY into the table), and every job of it is there.
    let bulk = std::env::temp_dir().join(format!("roles-bulk-{suffix}.ndjson"));
    std::fs::write(&bulk, "{\"queue\":\"bulk\",\"kind\":\"k\"}\n".repeat(1200)).unwrap();
    let o = run(
        as_role(&db, &wu),
        &["enqueue", "--bulk", bulk.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&bulk);
    assert_eq!(code(&o), 0, "worker bulk enqueue: {}", err(&o));
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.jobs WHERE queue = 'bulk'"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(n, 1200);
    // The application role may not call them at all.
    let apool = docket_testkit::pool(&role_url(&db, &au), "roles-test", 1).await;
    let e = sqlx::query(&format!(
        "SELECT * FROM {s}.complete_fenced(ARRAY[{later}]::bigint[], ARRAY[0], 'forged')"
    ))
    .execute(&apool)
    .await
    .expect_err("the application role completes nothing");
    assert!(e.to_string().contains("permission denied"), "{e}");
    // It enqueues a workflow through the checking function, as it enqueues a job.
    let n: i64 = sqlx::query_scalar(&format!(
        r#"SELECT count(*) FROM {s}.enqueue_workflow('{{"name":"app","nodes":[{{"name":"a","queue":"appwf","kind":"k"}},{{"name":"b","queue":"appwf","kind":"k","after":["a"]}}]}}')"#
    ))
    .fetch_one(&apool)
    .await
    .expect("the application role enqueues a workflow");
    assert_eq!(n, 2);
    // And a batch through batch_open(); the worker role runs its member, whose end (through
    // the definer trigger) fires the callback.
    let b: i64 = sqlx::query_scalar(&format!(
        r#"SELECT batch_id FROM {s}.batch_open('app', '{{"on_complete":{{"queue":"appb","kind":"done"}}}}', '[{{"queue":"appb","kind":"k"}}]', true)"#
    ))
    .fetch_one(&apool)
    .await
    .expect("the application role opens a batch");
    apool.close().await;
    let o = run(
        as_role(&db, &wu),
        &[
            "work", "--queue", "appb", "--exec", "true", "--drain", "--poll", "100ms",
        ],
    );
    assert_eq!(code(&o), 0, "worker work on a batch: {}", err(&o));
    let (unfinished, fired): (i32, Option<i64>) = sqlx::query_as(&format!(
        "SELECT unfinished, on_complete_job FROM {s}.workflows WHERE id = {b}"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(unfinished, 0);
    let fired = fired.expect("the callback fired");
    let cb: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.jobs WHERE id = {fired} AND state IN ('pending', 'running')"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(cb, 0, "the worker ran the callback too");

    // The outbox: the application role writes messages through publish() and may not touch
    // the table; the worker role relays them through the relay's functions only.
    let prefix = docket_testkit::nats::subject_prefix();
    let apool = docket_testkit::pool(&role_url(&db, &au), "roles-test", 1).await;
    sqlx::query(&format!(
        "SELECT {s}.publish('{prefix}.paid', '{{\"order\": 1}}', 'order-1')"
    ))
    .execute(&apool)
    .await
    .expect("the application role publishes");
    let e = sqlx::query(&format!(
        "INSERT INTO {s}.outbox (subject, payload) VALUES ('{prefix}.forged', '{{}}')"
    ))
    .execute(&apool)
    .await
    .expect_err("the application role writes no row of its own");
    assert!(e.to_string().contains("permission denied"), "{e}");
    apool.close().await;
    let wpool = docket_testkit::pool(&role_url(&db, &wu), "roles-test", 1).await;
    let e = sqlx::query(&format!("UPDATE {s}.outbox SET published_at = now()"))
        .execute(&wpool)
        .await
        .expect_err("the worker role marks nothing past the fence");
    assert!(e.to_string().contains("permission denied"), "{e}");
    let e = sqlx::query(&format!(
        "INSERT INTO {s}.outbox_sent (id, subject, payload, created_at, attempt, errors, published_at)
         VALUES (1, 'x', '{{}}', now(), 1, 0, now())"
    ))
    .execute(&wpool)
    .await
    .expect_err("the worker role records no publish of its own");
    assert!(e.to_string().contains("permission denied"), "{e}");
    wpool.close().await;
    let stream = docket_testkit::nats::stream_name();
    let mut relay = as_role(&db, &wu);
    relay.env("DOCKET_NATS_URL", docket_testkit::nats::server_url());
    let subjects = format!("{prefix}.>");
    let o = run(
        relay,
        &[
            "relay",
            "--stream",
            &stream,
            "--create-stream",
            "--subjects",
            &subjects,
            "--drain",
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "worker relay: {}", err(&o));
    assert!(out(&o).contains(r#""published":1"#), "{}", out(&o));

    // Every command that changes something, as the worker role (the role an operator who
    // acts must use), and each refused to the operator role with a clear error.
    let o = cli.run(&["enqueue", "--queue", "c", "--kind", "k", "--delay", "1h"]);
    let ctl = out(&o).trim().to_string();
    let changes: Vec<Vec<&str>> = vec![
        vec!["migrate"],
        vec!["queues", "pause", "c"],
        vec!["queues", "resume", "c"],
        vec!["queues", "limit", "c", "--max-running", "3"],
        vec!["keys", "limit", "tenant-1", "--max-running", "2"],
        vec![
            "cron",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--kind",
            "k",
            "--queue",
            "c",
        ],
        vec!["cron", "remove", "nightly"],
        vec!["jobs", "cancel", &ctl],
        vec!["jobs", "retry", &ctl],
        vec!["reap"],
        vec!["prune", "--older-than", "1h", "--dead-older-than", "1h"],
    ];
    for args in &changes {
        let o = run(as_role(&db, &wu), args);
        assert_eq!(code(&o), 0, "worker {args:?}: {}", err(&o));
    }
    for args in changes.iter().filter(|a| a[0] != "migrate") {
        let o = run(as_role(&db, &ou), args);
        assert!(
            ![0, 101].contains(&code(&o)),
            "operator {args:?}: {}",
            err(&o)
        );
        assert!(
            err(&o).starts_with("error: "),
            "operator {args:?}: {}",
            err(&o)
        );
    }

    // `explain` runs the claim's own statements (rolled back): the owner's tool, and the
    // other roles are told so.
    let o = cli.run(&["explain", "--queue", "c"]);
    assert_eq!(code(&o), 0, "owner explain: {}", err(&o));
    for user in [&wu, &ou] {
        let o = run(as_role(&db, user), &["explain", "--queue", "c"]);
        assert_eq!(code(&o), 1, "{user} explain: {}", err(&o));
        assert!(
            err(&o).contains("schema's owner"),
            "{user} explain: {}",
            err(&o)
        );
    }

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
        vec!["outbox", "stats"],
        vec!["outbox", "list", "--state", "published"],
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

    // Every dashboard action as each writing role: the operator's is refused with 403 and
    // "permission denied" and changes nothing; the worker's is done.
    let mut dead = vec![];
    for kind in ["one", "one", "walk", "walk"] {
        let o = cli.run(&[
            "enqueue",
            "--queue",
            "d",
            "--kind",
            kind,
            "--max-attempts",
            "1",
        ]);
        dead.push(out(&o).trim().to_string());
    }
    let o = cli.run(&[
        "work", "--queue", "d", "--exec", "false", "--drain", "--poll", "100ms",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    for (i, (user, allowed)) in [(&ou, false), (&wu, true)].into_iter().enumerate() {
        let (one, walked) = (&dead[i], &dead[2 + i]);
        let o = cli.run(&["enqueue", "--queue", "a", "--kind", "k", "--delay", "1h"]);
        let pending = out(&o).trim().to_string();
        let mut c = as_role(&db, user);
        c.args(["dashboard", "--listen", "127.0.0.1:0"]);
        let (mut dash, addr) = spawn_and_wait(c, "docket: dashboard on http://");
        let base = format!("http://{}", addr.trim().split(['/', ' ']).next().unwrap());
        let page = curl(&[&format!("{base}/jobs/{pending}")]);
        let at = page.find("name=\"_csrf\" value=\"").expect("a CSRF token") + 20;
        let token = &page[at..at + 64];
        for (path, form) in [
            (format!("/jobs/{pending}/run-now"), String::new()),
            (format!("/jobs/{pending}/cancel"), String::new()),
            (format!("/jobs/{one}/retry"), String::new()),
            ("/queues/a/pause".into(), String::new()),
            ("/queues/a/resume".into(), String::new()),
            ("/queues/a/limits".into(), "&max_running=3".into()),
            (
                "/bulk".into(),
                format!("&op=cancel%3Aselected&confirm=1&ids={pending}"),
            ),
        ] {
            let status = curl(&[
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--data",
                &format!("_csrf={token}{form}"),
                &format!("{base}{path}"),
            ]);
            let want = if allowed { "303" } else { "403" };
            assert_eq!(status, want, "{user} POST {path}");
        }
        let state: String =
            sqlx::query_scalar(&format!("SELECT state FROM {s}.jobs WHERE id = {pending}"))
                .fetch_one(&db.pool)
                .await
                .unwrap();
        assert_eq!(
            state,
            if allowed { "cancelled" } else { "pending" },
            "{user}"
        );
        if !allowed {
            // The refusal says why, in words.
            let body = curl(&[
                "--data",
                &format!("_csrf={token}"),
                &format!("{base}/jobs/{pending}/cancel"),
            ]);
            assert!(body.contains("permission denied"), "{body}");
        }
        // A bulk walk over every matching job: refused for the operator (the task reports the
        // error and nothing changes), done for the worker.
        let r = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{redirect_url}",
            "--data",
            &format!("_csrf={token}&op=retry%3Amatching&confirm=1&state=dead&kind=walk&queue=d"),
            &format!("{base}/bulk"),
        ]);
        assert!(r.contains("/tasks/"), "{user}: {r}");
        let task = || curl(&["-H", "accept: application/json", &r]);
        docket_testkit::eventually(
            std::time::Duration::from_secs(30),
            "the bulk task ends",
            || async { task().contains("\"done\":true") },
        )
        .await;
        let report = task();
        let states: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT state FROM {s}.jobs WHERE id IN ({one}, {walked}) ORDER BY id"
        ))
        .fetch_all(&db.pool)
        .await
        .unwrap();
        let dead_state = states.join(",");
        if allowed {
            assert_eq!(dead_state, "pending,pending", "{report}");
        } else {
            assert!(report.contains("permission denied"), "{report}");
            assert_eq!(dead_state, "dead,dead", "{report}");
        }
        let _ = dash.kill();
        let _ = dash.wait();
    }
    // Roles are dropped with their grants (the shared server keeps nothing).
    for r in [&au, &wu, &ou] {
        db.exec(&format!("DROP ROLE {r}")).await;
    }
}
