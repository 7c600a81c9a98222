//! Chaos: SIGKILL of worker processes, server restarts, and terminated connections — each a
//! real fault against real processes and a real server, checked by the invariant checker.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use docket_localpg::StopMode;
use docket_testkit::{checker, PrivateCluster, TestDb};
use rand::Rng;

/// Enqueues `n` jobs in queue `x` with a short backoff (so reaped jobs come back quickly).
async fn load(db: &TestDb, n: usize) {
    let lines: String = ndjson("x", n);
    let mut c = docket(db)
        .args(["enqueue", "--bulk", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success());
    db.exec("UPDATE {schema}.jobs SET backoff_base_ms = 100, backoff_cap_ms = 200")
        .await;
}

/// A worker whose stderr goes to `<log>.<n>.err` (checked for panics at the end).
/// Even-numbered workers complete by deleting the row (the library's default), odd ones keep
/// it, so both completions meet every fault here, side by side; the checker counts a
/// fenced delete as that attempt's success.
fn worker(db: &TestDb, log: &std::path::Path, n: usize) -> Proc {
    let err = log.with_extension(format!("{n}.err"));
    let exec = logged(log, "true");
    let mut args = vec![
        "--queue",
        "x",
        "--concurrency",
        "8",
        "--lease",
        "2s",
        "--poll",
        "200ms",
        "--exec",
        &exec,
    ];
    if n.is_multiple_of(2) {
        args.push("--delete-succeeded");
    }
    spawn_worker(db, &args, Some(&err))
}

/// Jobs of `loaded` that succeeded: the even workers delete a succeeded job's row, so the
/// succeeded rows alone undercount; what is not yet succeeded is still in the table.
async fn done_of(db: &TestDb, loaded: i64) -> i64 {
    loaded
        - db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state <> 'succeeded'")
            .await
}

/// Stops the survivors (each must exit 0 without a panic), then runs the checker.
async fn finish(db: &TestDb, workers: &mut [Proc], log: &std::path::Path) -> checker::CheckReport {
    for w in workers.iter() {
        // A worker respawned a moment ago may still be starting.
        wait_handles_sigterm(w.id()).await;
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        let status = w.wait().unwrap();
        assert!(
            status.success(),
            "a surviving worker exited {status} after SIGTERM"
        );
    }
    assert_no_worker_panicked(log.parent().unwrap());
    assert_eq!(count(db, "running").await, 0, "nothing left running");
    let runs = checker::parse_log(&std::fs::read_to_string(log).unwrap_or_default());
    assert!(!runs.is_empty(), "the execution log is missing");
    let report = checker::check(db, &runs, &["succeeded"]).await;
    println!("{report:?}");
    report
}

/// Jobs of the kill test, and the most SIGKILLs it deals before letting the survivors drain.
/// Bounded so the test measures faults, not the machine: each job is three processes
/// (`sh`, two `date`s), and the CI machine runs this next to the other chaos tests (20,000
/// jobs under unbounded kills once needed more than 400 s there, 88 s alone here).
const KILL_JOBS: usize = 6_000;
const MAX_KILLS: usize = 25;

/// 6,000 jobs across 4 `docket work` processes; every ~2 s a random one is SIGKILLed and a
/// replacement started, up to 25 times, then the survivors finish. Every job ends succeeded,
/// exactly one accepted completion each, none from a stale token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_nine_workers_repeatedly() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    load(&db, KILL_JOBS).await;
    let mut workers: Vec<Proc> = (0..4).map(|n| worker(&db, &log, n)).collect();
    let mut kills = 0;
    let started = Instant::now();
    let mut rng = rand::thread_rng();
    let left = || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state <> 'succeeded'")
            .await
    };
    while kills < MAX_KILLS {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1500..2500))).await;
        if left().await == 0 {
            break;
        }
        let victim = rng.gen_range(0..workers.len());
        signal(workers[victim].id(), "KILL");
        let status = workers[victim].wait().unwrap();
        checker::assert_exit("victim", status, "", checker::Exit::Killed);
        workers[victim] = worker(&db, &log, 4 + kills);
        kills += 1;
    }
    // The survivors and replacements must finish everything, the reaped leases included.
    eventually(
        Duration::from_secs(600),
        "every job succeeded after the kills",
        || async { left().await == 0 },
    )
    .await;
    let report = finish(&db, &mut workers, &log).await;
    assert_eq!(report.jobs, KILL_JOBS as i64);
    assert!(
        kills >= 3,
        "only {kills} kills: the run was too short to mean anything"
    );
    assert!(
        report.reaped >= 1,
        "{kills} SIGKILLs of busy workers left no lease to reap: the faults missed"
    );
    assert!(
        report.rerun_jobs >= 1,
        "no job ran twice: the kills hit nothing"
    );
    println!(
        "{KILL_JOBS} jobs, {kills} SIGKILLs, {} leases reaped, {} jobs ran more than once, {:?}",
        report.reaped,
        report.rerun_jobs,
        started.elapsed()
    );
}

/// The server restarts mid-run (fast, then immediate shutdown) on a cluster of the test's
/// own: workers reconnect, nothing is lost, nothing stays running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restarts_mid_run() {
    let cluster = PrivateCluster::start();
    let db = TestDb::on(&cluster.url(), 4).await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    load(&db, 4_000).await;
    let mut workers: Vec<Proc> = (0..2).map(|n| worker(&db, &log, n)).collect();
    for mode in [StopMode::Fast, StopMode::Immediate] {
        let before = done_of(&db, 4_000).await;
        eventually(
            Duration::from_secs(60),
            "progress before the restart",
            || async { done_of(&db, 4_000).await > before + 500 },
        )
        .await;
        let c = cluster.cluster.clone();
        tokio::task::spawn_blocking(move || {
            c.stop(mode).unwrap();
            c.start().unwrap();
        })
        .await
        .unwrap();
    }
    eventually(
        Duration::from_secs(180),
        "all jobs done after the restarts",
        || async {
            db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state <> 'succeeded'")
                .await
                == 0
        },
    )
    .await;
    let report = finish(&db, &mut workers, &log).await;
    assert_eq!(report.jobs, 4_000);
}

/// All of the workers' backends are terminated, again and again, mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_mid_run() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    load(&db, 4_000).await;
    let mut workers: Vec<Proc> = (0..2).map(|n| worker(&db, &log, n)).collect();
    let app = format!("docket/{}", db.schema);
    let mut rounds = 0;
    let mut killed = 0;
    while db
        .scalar("SELECT count(*) FROM {schema}.jobs WHERE state <> 'succeeded'")
        .await
        > 0
    {
        tokio::time::sleep(Duration::from_millis(400)).await;
        // A worker that gave up fails the test here, instead of leaving it waiting for ever.
        for (n, w) in workers.iter_mut().enumerate() {
            if let Some(status) = w.try_wait().unwrap() {
                let said = std::fs::read_to_string(log.with_extension(format!("{n}.err")));
                panic!(
                    "worker {n} exited {status} mid-run: {}",
                    said.unwrap_or_default()
                );
            }
        }
        if rounds < 15 {
            killed += db.terminate_app(&app).await;
            rounds += 1;
        }
    }
    assert!(
        killed >= 15,
        "terminated {killed} backends in {rounds} rounds"
    );
    let report = finish(&db, &mut workers, &log).await;
    assert_eq!(report.jobs, 4_000);
    println!("terminated {killed} backends in {rounds} rounds");
}

/// A connection the server cuts while the worker starts is ridden out, as a cut while it
/// runs is: the test holds the schema's migration lock, so the starting worker's migration
/// check waits on it (seen in pg_stat_activity), terminates that backend, releases the lock,
/// and the same worker process then serves a job. Before, it exited with "database
/// unavailable" (the kill of the chaos test above once met workers still starting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_while_the_worker_starts_is_ridden_out() {
    use sqlx::Connection;
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let err = dir.join("worker.err");
    let mut holder = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    // docket_postgres::migrate's lock: class "DKT" + 1, key "migrate:<schema>".
    sqlx::query("SELECT pg_advisory_xact_lock(1145787393, hashtext($1))")
        .bind(format!("migrate:{}", db.schema))
        .execute(&mut *tx)
        .await
        .unwrap();
    let mut w = spawn_worker(
        &db,
        &["--queue", "x", "--poll", "200ms", "--exec", "true"],
        Some(&err),
    );
    let app = format!("docket/{}", db.schema);
    let waiting = || async {
        db.scalar(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}' \
             AND wait_event_type = 'Lock'"
        ))
        .await
            > 0
    };
    eventually(
        Duration::from_secs(30),
        "the starting worker waits on the lock",
        waiting,
    )
    .await;
    assert!(db.terminate_app(&app).await >= 1, "its backend terminated");
    tx.commit().await.unwrap();
    load(&db, 1).await;
    eventually(Duration::from_secs(30), "the job succeeded", || async {
        count(&db, "succeeded").await == 1
    })
    .await;
    signal(w.id(), "TERM");
    let status = w.wait().unwrap();
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "the worker exited {status}: {said}");
    assert!(
        said.contains("the server cut the connection while the worker started"),
        "the retry is said: {said}"
    );
}

/// Two hundred random workflows of up to twenty nodes (some commands failing, `cancel` and
/// `ignore` edges) run by three `docket work --exec` workers — half of them deleting plain
/// successes — one SIGKILLed every 1-2 s and replaced: every workflow ends, each node as the
/// policies say, no node starts before its parents finished, a node its parent's failure
/// cancelled never starts, and every edge is consumed. Beside them 50 random batches (half
/// grown while open, then closed; one member in ten failing): each ends as its members did
/// and each callback due runs as exactly one job, told the counts, after every member
/// finished (`common::batch_chaos`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_end_correctly_while_workers_are_killed() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let graphs = dags::random(11, 200, 20);
    let ids = dags::enqueue(|a| cli.run(a), &dir, &graphs);
    let batches = batch_chaos::random(12, 50, 12);
    let batch_ids = batch_chaos::open(|a| cli.run(a), &dir, &batches);
    let cb_log = dir.join("callbacks.log");
    db.exec("UPDATE {schema}.jobs SET backoff_base_ms = 100, backoff_cap_ms = 200")
        .await;
    let spawn = |n: usize| {
        let err = log.with_extension(format!("{n}.err"));
        let exec = logged(&log, &batch_chaos::command(&cb_log));
        let mut args = vec![
            "--queue",
            "wf",
            "--concurrency",
            "8",
            "--lease",
            "2s",
            "--poll",
            "200ms",
            "--exec",
            &exec,
        ];
        if n.is_multiple_of(2) {
            args.push("--delete-succeeded");
        }
        spawn_worker(&db, &args, Some(&err))
    };
    let mut workers: Vec<Proc> = (0..3).map(spawn).collect();
    let left = || async {
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs WHERE state IN ('waiting', 'pending', 'running')",
        )
        .await
    };
    let kills = kill_randomly(&mut workers, spawn, 12, &log, left).await;
    eventually(
        Duration::from_secs(600),
        "every workflow ended after the kills",
        || async { left().await == 0 },
    )
    .await;
    for w in workers.iter() {
        signal(w.id(), "TERM");
    }
    for w in workers.iter_mut() {
        assert!(w.wait().unwrap().success(), "a survivor exited badly");
    }
    assert_no_worker_panicked(&dir);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.job_deps WHERE state = 'waiting'")
            .await,
        0,
        "every edge was consumed"
    );
    let seen = dags::observe(
        |a| cli.run(a),
        &std::fs::read_to_string(&log).unwrap_or_default(),
    );
    let (jobs, runs, rerun) = dags::check(&graphs, &ids, &seen);
    let callbacks = batch_chaos::check(
        |a| cli.run(a),
        &batches,
        &batch_ids,
        &std::fs::read_to_string(&cb_log).unwrap_or_default(),
        &seen.finished_ns,
        &seen.first_start,
    );
    assert!(
        kills >= 2,
        "only {kills} kills: the run was too short to mean anything"
    );
    println!(
        "{jobs} workflow nodes and {} batches ({callbacks} callbacks) on PostgreSQL, {kills} SIGKILLs, {runs} runs logged, {rerun} jobs ran more than once",
        batches.len()
    );
}
