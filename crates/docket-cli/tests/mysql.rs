//! The `docket` binary on MariaDB / MySQL (`--database-url mysql://…`): the commands, the
//! demo, and the crash suite with real worker processes — kill -9 repeatedly, a worker
//! paused past its lease, the server killed and restarted mid-run (a private `mariadbd` of
//! the test's own). Checked at the end: every job succeeded, every accepted success has the
//! run that produced it, no two runs of a job overlapped. The server for the other tests:
//! `MYSQL_URL`, or the testkit's private `mariadbd`.

mod common;
mod local;

use std::time::Duration;

use common::{code, err, eventually, logged, ndjson, out, signal, Proc};
use docket_mysql::MySqlStore;
use docket_testkit::{checker, checker_mysql, mariadb};
use local::{Db, File};

impl File {
    async fn new() -> File {
        let url = mariadb::fresh_database().await;
        File::at(|_| url)
    }

    fn on(url: String) -> File {
        File::at(|_| url)
    }
}

local_db!(
    MySqlStore,
    checker_mysql,
    "MariaDB",
    "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)",
    fresh: File::new().await,
    check(s, runs) {
        let jobs = scalar(s, "SELECT count(*) FROM jobs").await;
        end_state(s, runs, jobs).await;
        checker_mysql::check(s.pool(), runs, &["succeeded"]).await
    }
);

local_cli_suite!(File);

/// The end state a crash run must reach: every job succeeded, each success by a run that
/// logged its start (an attempt that ran), no two runs of a job at once. Returns (jobs
/// with a reaped lease in their history, jobs that ran more than once).
async fn end_state(s: &MySqlStore, runs: &[checker::Execution], jobs: i64) -> (i64, usize) {
    assert_eq!(
        scalar(s, "SELECT count(*) FROM jobs WHERE state = 'succeeded'").await,
        jobs,
        "every job succeeded"
    );
    let finals: Vec<(i64, i32)> = sqlx::query_as("SELECT id, attempt FROM jobs")
        .fetch_all(s.pool())
        .await
        .unwrap();
    let mut missing = Vec::new();
    for (id, attempt) in &finals {
        if !runs.iter().any(|r| r.job == *id && r.attempt == *attempt) {
            missing.push((*id, *attempt));
        }
    }
    assert!(
        missing.is_empty(),
        "successes without the run that produced them: {missing:?}"
    );
    let overlaps = checker::overlaps(runs);
    assert!(overlaps.is_empty(), "{overlaps:?}");
    let reaped = scalar(
        s,
        "SELECT count(*) FROM jobs WHERE JSON_CONTAINS(errors, '{\"class\": \"lease_expired\"}')",
    )
    .await;
    let mut per_job = std::collections::HashMap::new();
    for r in runs {
        *per_job.entry(r.job).or_insert(0) += 1;
    }
    (reaped, per_job.values().filter(|n| **n > 1).count())
}

async fn scalar(s: &MySqlStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(s.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test]
async fn commands_work_on_mysql_and_refuse_what_needs_postgres() {
    let f = File::new().await;
    // Operator commands never create the schema.
    let o = f.run(&["stats"]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(err(&o).contains("holds no Docket schema"), "{}", err(&o));
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
    local::commands_after_an_enqueue(&f, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_mysql() {
    let f = File::new().await;
    let o = f.run(&["demo", "--jobs", "600", "--workers", "2"]);
    assert!(o.status.success(), "{}\n{}", out(&o), err(&o));
    let text = out(&o);
    assert!(text.contains("_demo on mysql://"), "{text}");
    assert!(text.contains("succeeded, unsent        0"), "{text}");
    let demo = File::on(format!("{}_demo", f.url));
    let s = demo.store().await;
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
    drop(s);
    // A `<database>_demo` the demo did not make is never dropped.
    let name: String = sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
        .fetch_one(demo.store().await.pool())
        .await
        .unwrap();
    let base = format!("{name}_b");
    let admin = f.store().await;
    for sql in [
        format!("CREATE DATABASE `{base}`"),
        format!("CREATE DATABASE `{base}_demo`"),
        format!("CREATE TABLE `{base}_demo`.precious (x INT)"),
    ] {
        sqlx::raw_sql(&sql).execute(admin.pool()).await.unwrap();
    }
    let theirs = File::on(f.url.rsplit_once('/').unwrap().0.to_string() + "/" + &base);
    let o = theirs.run(&["demo", "--jobs", "10"]);
    assert_eq!(code(&o), 6, "{}", err(&o));
    assert_eq!(
        scalar(
            &admin,
            &format!("SELECT count(*) FROM information_schema.tables WHERE table_schema = '{base}_demo' AND table_name = 'precious'")
        )
        .await,
        1,
        "their database survived"
    );
}

/// The server is killed (SIGKILL) and restarted mid-run on a private `mariadbd`: workers
/// reconnect, every job succeeds, no success without its run, nothing left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_killed_and_restarted_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<std::sync::mpsc::Sender<()>>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<u16>();
    let data = dir.path().to_path_buf();
    // The server is started, killed and restarted by one thread that lives through the test
    // (it dies with the thread that started it).
    let server = std::thread::spawn(move || {
        let mut db = docket_testkit::mariadb::PrivateMariaDb::start(&data);
        ready_tx.send(db.port).unwrap();
        while let Ok(done) = rx.recv() {
            db.kill();
            std::thread::sleep(Duration::from_millis(1500));
            db.run();
            let _ = done.send(());
        }
    });
    let port = ready_rx.recv().unwrap();
    let admin = format!("mysql://root@127.0.0.1:{port}/mysql");
    {
        let s = MySqlStore::connect(&admin, 1).await.unwrap();
        sqlx::raw_sql("CREATE DATABASE chaos")
            .execute(s.pool())
            .await
            .unwrap();
    }
    let f = File::on(format!("mysql://root@127.0.0.1:{port}/chaos"));
    let o = f.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("x", 3_000));
    assert!(o.status.success(), "{}", err(&o));
    let log = f.dir.join("exec.log");
    let mut workers: Vec<Proc> = (0..2)
        .map(|n| {
            f.worker(
                &[
                    "--queue",
                    "x",
                    "--concurrency",
                    "8",
                    "--lease",
                    "3s",
                    "--poll",
                    "200ms",
                    "--exec",
                    &logged(&log, "true"),
                ],
                Some(&f.dir.join(format!("w{n}.err"))),
            )
        })
        .collect();
    eventually(Duration::from_secs(60), "work under way", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.lines().count() > 200)
    })
    .await;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    tx.send(done_tx).unwrap();
    tokio::task::spawn_blocking(move || done_rx.recv().unwrap())
        .await
        .unwrap();
    let s = f.store().await;
    eventually(
        Duration::from_secs(180),
        "every job succeeded after the restart",
        || async { scalar(&s, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'").await == 0 },
    )
    .await;
    for w in workers.iter() {
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        assert!(
            w.wait().unwrap().success(),
            "a worker exited badly after the restart"
        );
    }
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    end_state(&s, &runs, 3_000).await;
    drop(tx);
    server.join().unwrap();
}
