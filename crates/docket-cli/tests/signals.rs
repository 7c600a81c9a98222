//! Real processes and real signals: a SIGKILL that is known to hit the maintenance leader, a
//! SIGSTOPped leader that is replaced and learns it, the second SIGTERM, and an `--exec` job
//! at the shutdown deadline whose command ignores SIGTERM.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use docket_core::{JobState, Store};
use docket_testkit::{checker, TestDb};

async fn leader(db: &TestDb) -> Option<String> {
    sqlx::query_scalar(&format!(
        "SELECT owner FROM {}.leader WHERE name = 'maintenance' AND expires_at > now()",
        db.schema
    ))
    .fetch_optional(&db.pool)
    .await
    .unwrap()
}

async fn enqueue(db: &TestDb, n: usize) {
    let o = run_with_stdin(
        {
            let mut c = docket(db);
            c.args(["enqueue", "--bulk", "-"]);
            c
        },
        &ndjson("c", n),
    );
    assert!(o.status.success(), "{}", err(&o));
    db.exec("UPDATE {schema}.jobs SET backoff_base_ms = 50, backoff_cap_ms = 50")
        .await;
}

fn owner_from(path: &Path) -> Option<String> {
    owner_of(&std::fs::read_to_string(path).unwrap_or_default())
}

async fn wait_owner(path: &Path) -> String {
    eventually(
        Duration::from_secs(20),
        "the worker printed its owner",
        || async { owner_from(path).is_some() },
    )
    .await;
    owner_from(path).unwrap()
}

fn start(db: &TestDb, body: &str, stderr: &Path) -> Proc {
    spawn_worker(
        db,
        &[
            "--queue",
            "c",
            "--concurrency",
            "2",
            "--lease",
            "2s",
            "--poll",
            "100ms",
            "--exec",
            body,
        ],
        Some(stderr),
    )
}

/// Worker A leads and holds two jobs whose first attempt never ends; B serves the same queue.
/// A is SIGKILLed: B takes over the leadership once A's row expires, reaps A's two leases and
/// re-runs those jobs; everything succeeds once, and the checker finds nothing stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_leader_is_replaced_and_its_leases_are_reaped() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let (a_err, b_err) = (dir.join("a.err"), dir.join("b.err"));
    // Attempt 1 of every job hangs; a re-run finishes at once.
    let body = logged(&log, r#"[ "$DOCKET_ATTEMPT" = 1 ] && sleep 60; true"#);
    enqueue(&db, 2).await;
    let mut a = start(&db, &body, &a_err);
    let a_owner = wait_owner(&a_err).await;
    eventually(
        Duration::from_secs(20),
        "A leads and runs both jobs",
        || async {
            leader(&db).await.as_deref() == Some(a_owner.as_str())
                && count(&db, "running").await == 2
        },
    )
    .await;
    let mut b = start(&db, &body, &b_err);
    let b_owner = wait_owner(&b_err).await;
    signal(a.id(), "KILL");
    let sa = a.wait().unwrap();
    eventually(Duration::from_secs(30), "B leads", || async {
        leader(&db).await.as_deref() == Some(b_owner.as_str())
    })
    .await;
    eventually(Duration::from_secs(30), "A's jobs re-run by B", || async {
        count(&db, "succeeded").await == 2
    })
    .await;
    signal(b.id(), "TERM");
    let sb = b.wait().unwrap();
    checker::assert_exit("A", sa, "", checker::Exit::Killed);
    checker::assert_exit(
        "B",
        sb,
        &std::fs::read_to_string(&b_err).unwrap(),
        checker::Exit::Clean,
    );
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    let report = checker::check(&db, &runs, &["succeeded"]).await;
    assert_eq!(report.reaped, 2, "A's two leases, reaped by B");
    assert_eq!(report.rerun_jobs, 2);
    let reap_owners: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT DISTINCT old_owner FROM {}.audit WHERE writer = 'reap'",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(reap_owners, vec![a_owner], "only A's leases were reaped");
}

/// The leader is SIGSTOPped past its leadership's expiry: the other worker takes over. When
/// the first resumes, its renewal fails and it says so (it does not go on reaping as if it
/// still led); the new leader keeps the row, and no live lease is reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigstopped_leader_is_replaced_and_learns_it_lost() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let (a_err, b_err) = (dir.join("a.err"), dir.join("b.err"));
    let body = logged(&log, "sleep 0.05");
    let mut a = start(&db, &body, &a_err);
    let a_owner = wait_owner(&a_err).await;
    eventually(Duration::from_secs(20), "A leads", || async {
        leader(&db).await.as_deref() == Some(a_owner.as_str())
    })
    .await;
    let mut b = start(&db, &body, &b_err);
    let b_owner = wait_owner(&b_err).await;
    signal(a.id(), "STOP");
    eventually(
        Duration::from_secs(30),
        "B leads while A is stopped",
        || async { leader(&db).await.as_deref() == Some(b_owner.as_str()) },
    )
    .await;
    signal(a.id(), "CONT");
    eventually(Duration::from_secs(30), "A learns it lost", || async {
        std::fs::read_to_string(&a_err).is_ok_and(|e| e.contains("lost maintenance leadership"))
    })
    .await;
    // Work keeps flowing through both, with B leading.
    enqueue(&db, 40).await;
    eventually(Duration::from_secs(60), "all done", || async {
        count(&db, "succeeded").await == 40
    })
    .await;
    assert_eq!(leader(&db).await.as_deref(), Some(b_owner.as_str()));
    stop_all_cleanly(&mut [("A", &mut a, &a_err), ("B", &mut b, &b_err)]);
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    checker::check(&db, &runs, &["succeeded"]).await;
}

/// The first SIGTERM starts a graceful stop that would wait 60 s for the running job; the
/// second stops at once: the command is ended, the job released (pending, its attempt not
/// counted) and the worker exits 0 within seconds.
#[tokio::test]
async fn a_second_sigterm_stops_at_once_and_releases_the_job() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let err_path = dir.join("w.err");
    enqueue(&db, 1).await;
    let mut w = spawn_worker(
        &db,
        &[
            "-v",
            "--queue",
            "c",
            "--lease",
            "30s",
            "--shutdown-timeout",
            "60s",
            "--exec",
            "sleep 120",
        ],
        Some(&err_path),
    );
    eventually(Duration::from_secs(20), "running", || async {
        count(&db, "running").await == 1
    })
    .await;
    signal(w.id(), "TERM");
    eventually(
        Duration::from_secs(20),
        "the first SIGTERM was taken",
        || async {
            std::fs::read_to_string(&err_path).is_ok_and(|e| e.contains("worker stopping"))
        },
    )
    .await;
    assert!(
        w.try_wait().unwrap().is_none(),
        "the first SIGTERM waits for the job"
    );
    assert_eq!(count(&db, "running").await, 1);
    let took = term_and_time_clean_exit(w, &err_path).await;
    assert!(
        took < Duration::from_secs(20),
        "the second SIGTERM took {took:?}"
    );
    let rec = db.store.list(&Default::default()).await.unwrap().remove(0);
    assert_eq!(rec.state, JobState::Pending);
    assert_eq!(rec.attempt, 1);
    assert_eq!(
        rec.max_attempts, 26,
        "the interrupted attempt is not counted"
    );
    println!("second SIGTERM to exit: {took:?}");
}

/// At the shutdown deadline an `--exec` job whose command ignores SIGTERM is ended for good
/// (SIGTERM, the kill grace, SIGKILL) and released; the worker exits 0 and the command's
/// process is gone.
#[tokio::test]
async fn an_exec_job_at_the_shutdown_deadline_is_killed_and_released() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let err_path = dir.join("w.err");
    let pid_file = dir.join("pid");
    enqueue(&db, 1).await;
    let body = format!(
        "trap '' TERM; echo $$ > {}; while true; do sleep 0.1; done",
        pid_file.display()
    );
    let w = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "30s",
            "--kill-grace",
            "500ms",
            "--shutdown-timeout",
            "1s",
            "--exec",
            &body,
        ],
        Some(&err_path),
    );
    eventually(Duration::from_secs(20), "the command runs", || async {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty())
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let took = term_and_time_clean_exit(w, &err_path).await;
    assert!(
        took >= Duration::from_secs(1),
        "stopped before the deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the command that ignored SIGTERM outlived its worker"
    );
    let rec = db.store.list(&Default::default()).await.unwrap().remove(0);
    assert_eq!(
        (rec.state, rec.attempt, rec.max_attempts),
        (JobState::Pending, 1, 26)
    );
    println!("deadline stop took {took:?}");
}
