//! The examples run as a user runs them: the web service enqueues in its request's
//! transaction and runs its worker in-process; the Python producer enqueues through the SQL
//! function as a role that may only enqueue; the separate worker drains what it wrote.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use docket_testkit::{eventually, TestDb};

fn env(c: &mut Command, db: &TestDb, app: &str) {
    c.env("DATABASE_URL", &db.url)
        .env("DOCKET_SCHEMA", &db.schema)
        .env("APP_SCHEMA", app)
        .env_remove("RUST_LOG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_run_end_to_end() {
    let db = TestDb::new().await;
    let app = format!("{}_a", db.schema);
    let welcomes = format!("SELECT count(*) FROM {app}.welcomes");

    // The web service: three sign-ups, each user and job in one transaction, run in-process.
    let mut service = Command::new(env!("CARGO_BIN_EXE_axum_service"));
    env(&mut service, &db, &app);
    let mut service = service
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the service");
    let mut lines = BufReader::new(service.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("stdout");
    let base = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for email in [
        "ada@example.com",
        "bob@example.com",
        "cy@example.com",
        "no-at-sign",
    ] {
        let r = http
            .post(format!("{base}/signup"))
            .json(&serde_json::json!({ "email": email }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{email}: {}", r.status());
        let body: serde_json::Value = r.json().await.unwrap();
        jobs.push(body["job_id"].as_i64().expect("job_id"));
    }
    eventually(Duration::from_secs(30), "three welcomes", || async {
        db.scalar(&welcomes).await == 3
    })
    .await;
    // The bad address is dead at once (discarded), kept for inspection.
    eventually(Duration::from_secs(30), "the bad address dead", || async {
        db.scalar(&format!(
            "SELECT count(*) FROM {{schema}}.jobs WHERE id = {} AND state = 'dead'",
            jobs[3]
        ))
        .await
            == 1
    })
    .await;
    // SIGTERM: the server and its worker stop gracefully, exit 0.
    let sent = Command::new("kill")
        .args(["-TERM", &service.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert!(
        service.wait().unwrap().success(),
        "the service exited badly"
    );

    // The producer: a login role that is only a member of <schema>_app.
    let store = docket::PgStore::with_schema(db.pool.clone(), &db.schema).unwrap();
    store
        .grant(&docket::postgres::roles::Roles::for_schema(&db.schema))
        .await
        .unwrap();
    let producer = format!("{}_producer", db.schema);
    db.exec(&format!(
        "CREATE ROLE {producer} LOGIN IN ROLE {}_app",
        db.schema
    ))
    .await;
    let o: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    let producer_url = format!(
        "postgres://{producer}@{}:{}/{}",
        o.get_host(),
        o.get_port(),
        o.get_database().unwrap_or("postgres")
    );
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/producer.py"))
        .args(["dee@example.com", "eve@example.com"])
        .env("DATABASE_URL", &producer_url)
        .env("DOCKET_SCHEMA", &db.schema)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "producer.py (needs `pip install 'psycopg[binary]'`, which .ci/run does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    // That role enqueues and nothing else: it cannot read the jobs.
    let as_producer = sqlx::PgPool::connect(&producer_url).await.unwrap();
    let denied = sqlx::query(&format!("SELECT count(*) FROM {}.jobs", db.schema))
        .fetch_one(&as_producer)
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("permission denied"), "{denied}");
    as_producer.close().await;

    // The separate worker drains the producer's jobs and exits.
    let mut worker = Command::new(env!("CARGO_BIN_EXE_worker"));
    env(&mut worker, &db, &app);
    let o = worker.env("DRAIN", "1").output().expect("run the worker");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(db.scalar(&welcomes).await, 5);
    db.exec(&format!("DROP SCHEMA {app} CASCADE")).await;
    db.exec(&format!("DROP ROLE {producer}")).await;
}
