//! The design's boundary tests that need real worker processes: a crash after the claim, a
//! paused worker, a crash after a side effect, and retries running out.

use crate::common;

use std::time::Duration;

use common::*;
use docket_core::{JobId, JobState, Store};
use docket_testkit::{checker, TestDb};

async fn enqueue_one(db: &TestDb, kind: &str) -> JobId {
    let o = docket(db)
        .args(["enqueue", "--queue", "c", "--kind", kind])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id: i64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // Retry quickly after a reap (test setup; production uses the 10 s backoff).
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET backoff_base_ms = 50, backoff_cap_ms = 50 WHERE id = {id}"
    ))
    .await;
    JobId(id)
}

async fn wait_lease_expired(db: &TestDb) {
    eventually(Duration::from_secs(30), "lease expired by the database clock", || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running' AND lease_expires_at >= now()")
            .await
            == 0
    })
    .await;
}

/// 2. A worker crashes after its claim commits, before processing: the lease expires, the
/// job is reclaimed and completed by another worker.
#[tokio::test]
async fn crash_after_claim_before_processing() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let id = enqueue_one(&db, "k").await;
    // Worker A's command kills A itself (its parent) the moment the job is handed over.
    let mut a = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--exec",
            "kill -9 $PPID; sleep 3",
        ],
        None,
    );
    let status = tokio::task::spawn_blocking(move || a.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!status.success(), "A died by SIGKILL");
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(
        (rec.state, rec.attempt),
        (JobState::Running, 1),
        "claimed, committed, abandoned"
    );
    let mut b = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--poll",
            "100ms",
            "--exec",
            &logged(&log, "true"),
        ],
        None,
    );
    eventually(Duration::from_secs(30), "B completes the job", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    signal(b.id(), "TERM");
    b.wait().unwrap();
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.attempt, 2);
    assert_eq!(rec.errors.len(), 1);
    assert_eq!(rec.errors[0].class, "lease_expired");
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    checker::check(&db, &runs, &["succeeded"]).await;
}

/// 3. Worker A is paused (SIGSTOP) past its lease; worker B takes the job over; A resumes:
/// A's completion updates nothing and the final state is B's.
#[tokio::test]
async fn a_paused_worker_cannot_overwrite_its_successor() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let a_err = dir.join("a.stderr");
    let id = enqueue_one(&db, "k").await;
    let mut a = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--no-maintenance",
            "--exec",
            &logged(&log, "sleep 1"),
        ],
        Some(&a_err),
    );
    eventually(Duration::from_secs(20), "A started the job", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start"))
    })
    .await;
    signal(a.id(), "STOP");
    wait_lease_expired(&db).await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    let mut b = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--poll",
            "100ms",
            "--no-maintenance",
            "--exec",
            &logged(&log, "true"),
        ],
        None,
    );
    eventually(Duration::from_secs(30), "B completes the job", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    // A wakes up: its command has long finished successfully; its outcome must not land.
    signal(a.id(), "CONT");
    // A notices (watchdog, heartbeat or fenced completion) that the job is not its own.
    eventually(Duration::from_secs(20), "A gives the job up", || async {
        std::fs::read_to_string(&a_err).is_ok_and(|e| e.contains("lease"))
    })
    .await;
    signal(a.id(), "TERM");
    signal(b.id(), "TERM");
    a.wait().unwrap();
    b.wait().unwrap();
    let rec = db.store.get(id).await.unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Succeeded, 2));
    let a_owner = owner_of(&std::fs::read_to_string(&a_err).unwrap()).expect("A's owner");
    let winners: Vec<(i32, String)> = sqlx::query_as(&format!(
        "SELECT old_attempt, old_owner FROM {}.audit
         WHERE new_state = 'succeeded' OR (op = 'D' AND writer = 'complete_many')",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(winners.len(), 1);
    assert_eq!(winners[0].0, 2, "B's token won");
    assert_ne!(winners[0].1, a_owner, "A's late completion updated nothing");
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(runs.len(), 2, "A's run and B's run: {runs:?}");
    checker::check(&db, &runs, &["succeeded"]).await;
}

/// 3b. The same interleaving with the worker's own guards switched off (test-only
/// `DOCKET_NO_WORKER_GUARDS`): A keeps no watchdog and ignores lost leases, so when it resumes
/// it really sends its completion — while B holds the lease and is still running. The
/// database fence alone refuses it: B's row is untouched, B completes, and the checker finds
/// no write by A's token.
#[tokio::test]
async fn without_worker_guards_the_database_alone_fences_a_resumed_worker() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    let (_d, dir) = scratch();
    let log = dir.join("exec.log");
    let a_err = dir.join("a.stderr");
    let b_err = dir.join("b.stderr");
    let id = enqueue_one(&db, "k").await;
    // Attempt 1 (A) takes 1 s; attempt 2 (B) runs until the test lets it finish.
    let release = dir.join("release-b");
    let body = format!(
        r#"if [ "$DOCKET_ATTEMPT" = 1 ]; then sleep 1; else while [ ! -e {r} ]; do sleep 0.05; done; fi"#,
        r = release.display()
    );
    let mut a = spawn_worker_env(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "2s",
            "--no-maintenance",
            "--exec",
            &logged(&log, &body),
        ],
        Some(&a_err),
        &[("DOCKET_NO_WORKER_GUARDS", "1")],
    );
    eventually(Duration::from_secs(20), "A started the job", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start"))
    })
    .await;
    signal(a.id(), "STOP");
    wait_lease_expired(&db).await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    let mut b = spawn_worker(
        &db,
        &[
            "--queue",
            "c",
            "--lease",
            "30s",
            "--poll",
            "100ms",
            "--no-maintenance",
            "--exec",
            &logged(&log, &body),
        ],
        Some(&b_err),
    );
    eventually(Duration::from_secs(30), "B started attempt 2", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| {
            l.lines()
                .any(|l| l.starts_with("start") && l.split_whitespace().nth(2) == Some("2"))
        })
    })
    .await;
    let held = db.store.get(id).await.unwrap();
    assert_eq!((held.state, held.attempt), (JobState::Running, 2));
    // A wakes up with its command long finished and sends the completion of attempt 1.
    signal(a.id(), "CONT");
    eventually(
        Duration::from_secs(20),
        "A's completion was fenced off",
        || async {
            std::fs::read_to_string(&a_err).is_ok_and(|e| e.contains("fenced off: lease lost"))
        },
    )
    .await;
    let after = db.store.get(id).await.unwrap();
    assert_eq!(
        (after.state, after.attempt, after.lease_owner.clone()),
        (JobState::Running, 2, held.lease_owner.clone()),
        "A's late completion changed B's running job"
    );
    std::fs::write(&release, "").unwrap();
    eventually(Duration::from_secs(30), "B completes the job", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    stop_all_cleanly(&mut [("A", &mut a, &a_err), ("B", &mut b, &b_err)]);
    let runs = checker::parse_log(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(runs.len(), 2, "A's run and B's run: {runs:?}");
    let report = checker::check(&db, &runs, &["succeeded"]).await;
    assert_eq!((report.reaped, report.rerun_jobs), (1, 1));
}

/// 4. A worker crashes after an external side effect but before completion: the re-run gets
/// the same job id, and a handler that dedupes on it performs the effect once.
#[tokio::test]
async fn crash_after_side_effect_is_deduplicated_by_the_job_id() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    let fx = dir.join("effects");
    std::fs::create_dir_all(&fx).unwrap();
    let id = enqueue_one(&db, "charge").await;
    let body = format!(
        r#"if [ ! -e {fx}/$DOCKET_JOB_ID ]; then echo charged >> {fx}/ledger; touch {fx}/$DOCKET_JOB_ID; fi
[ "$DOCKET_ATTEMPT" = 1 ] && kill -9 $PPID
exit 0"#,
        fx = fx.display()
    );
    let mut a = spawn_worker(
        &db,
        &["--queue", "c", "--lease", "2s", "--exec", &body],
        None,
    );
    tokio::task::spawn_blocking(move || a.wait())
        .await
        .unwrap()
        .unwrap();
    let mut b = spawn_worker(
        &db,
        &[
            "--queue", "c", "--lease", "2s", "--poll", "100ms", "--exec", &body,
        ],
        None,
    );
    eventually(
        Duration::from_secs(30),
        "job re-run and completed",
        || async { db.store.get(id).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    signal(b.id(), "TERM");
    b.wait().unwrap();
    assert_eq!(
        db.store.get(id).await.unwrap().attempt,
        2,
        "it really ran twice"
    );
    let ledger = std::fs::read_to_string(fx.join("ledger")).unwrap();
    assert_eq!(ledger.lines().count(), 1, "the effect happened once");
}

/// 6. Retries run out: the job ends dead, visible, with its whole error history.
#[tokio::test]
async fn retries_run_out_into_a_visible_dead_job_with_history() {
    let db = TestDb::new().await;
    let o = docket(&db)
        .args([
            "enqueue",
            "--queue",
            "c",
            "--kind",
            "flaky",
            "--max-attempts",
            "3",
        ])
        .output()
        .unwrap();
    let id: i64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    for _ in 0..3 {
        // Due now (instead of waiting out the backoff), then one drain pass.
        db.exec("UPDATE {schema}.jobs SET run_at = now() WHERE state = 'pending'")
            .await;
        let o = docket(&db)
            .args([
                "work",
                "--queue",
                "c",
                "--drain",
                "--poll",
                "100ms",
                "--exec",
                "echo \"smtp down on attempt $DOCKET_ATTEMPT\" >&2; exit 3",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = docket(&db)
        .args(["jobs", "show", &id.to_string(), "--json"])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["state"], "dead");
    assert_eq!(j["attempt"], 3);
    let msgs: Vec<&str> = j["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        msgs,
        vec![
            "exit 3: smtp down on attempt 1",
            "exit 3: smtp down on attempt 2",
            "exit 3: smtp down on attempt 3"
        ]
    );
    // Still there after a prune with the default retentions (dead jobs are evidence).
    let o = docket(&db)
        .args(["prune", "--older-than", "0s", "--json"])
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["dead"], 0);
    let o = docket(&db)
        .args(["jobs", "list", "--state", "dead", "--json"])
        .output()
        .unwrap();
    let l: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(l.len(), 1);
}
