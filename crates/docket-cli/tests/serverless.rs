//! What keeps a serverless compute awake: an idle `docket work --serverless` sends statements
//! only in its polls' wake-ups (the default worker, with its once-a-second leader loop, does
//! not), and `docket work --drain` leaves no connection behind. Statements are read from the
//! server's own log (`log_statement = all`) on a cluster of the test's own.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use common::*;
use docket_testkit::{PrivateCluster, TestDb};

/// Timestamps of the statements a connection tagged `app` sent, and which were claims. A log
/// entry starts with its timestamp; a statement's further lines follow without one.
fn statements(cluster: &PrivateCluster, app: &str) -> Vec<(DateTime<Utc>, bool, String)> {
    let log = std::fs::read_to_string(cluster.cluster.log_file()).unwrap();
    let tag = format!("[{app}] LOG:");
    let mut entries: Vec<(DateTime<Utc>, String)> = Vec::new();
    let mut ours = false;
    for line in log.lines() {
        let ts = line
            .get(..23)
            .and_then(|t| NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.3f").ok());
        match ts {
            Some(ts) => {
                ours = line.contains(&tag)
                    && (line.contains("statement:") || line.contains("execute"));
                if ours {
                    entries.push((ts.and_utc(), line.to_string()));
                }
            }
            None if ours => entries.last_mut().expect("entry").1.push_str(line),
            None => {}
        }
    }
    entries
        .into_iter()
        .map(|(t, text)| (t, text.contains("claim("), text))
        .collect()
}

fn worker(db: &TestDb, extra: &[&str]) -> Proc {
    docket(db)
        .args([
            "work",
            "--queue",
            "q",
            "--concurrency",
            "4",
            "--exec",
            "true",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
        .into()
}

/// Statements sent from 2 s after the first one until the worker was told to stop (`until`)
/// that were more than 1.5 s from every claim (the polls), and the number of claims. Half the
/// serverless worker's poll: a loaded machine may run the maintenance that follows a claim,
/// or the claim itself (a new connection), late — but not that late.
fn off_poll(stmts: &[(DateTime<Utc>, bool, String)], until: DateTime<Utc>) -> (Vec<String>, usize) {
    let Some(first) = stmts.first().map(|s| s.0) else {
        return (Vec::new(), 0);
    };
    let settled = first + chrono::Duration::seconds(2);
    let claims: Vec<DateTime<Utc>> = stmts.iter().filter(|s| s.1).map(|s| s.0).collect();
    let near = |t: DateTime<Utc>| {
        claims
            .iter()
            .any(|&c| (t - c).abs() <= chrono::Duration::milliseconds(1500))
    };
    let window = |t: DateTime<Utc>| t >= settled && t < until;
    let off = stmts
        .iter()
        .filter(|(t, is_claim, _)| window(*t) && !is_claim && !near(*t))
        .map(|(_, _, text)| text.chars().take(160).collect())
        .collect();
    (off, claims.iter().filter(|&&c| window(c)).count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_serverless_worker_queries_only_when_it_polls() {
    let cluster = PrivateCluster::start_with(
        &[
            ("log_statement", "'all'"),
            ("log_line_prefix", "'%m [%a] '"),
        ],
        |_, _| {},
    );
    let db = TestDb::on(&cluster.url(), 2).await;
    let app = format!("docket/{}", db.schema);

    // Observed for a fixed stretch of idleness: the length of the observation is the point.
    let mut w = worker(&db, &["--serverless", "--poll", "3s"]);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let stop = Utc::now();
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
    let stmts = statements(&cluster, &app);
    let (off, claims) = off_poll(&stmts, stop);
    assert!(
        claims >= 2,
        "the worker polled ({claims} claims of {} statements)",
        stmts.len()
    );
    assert!(off.is_empty(), "statements between polls: {off:#?}");

    // The same check fails for a default worker: its leader loop runs every second.
    let db2 = TestDb::on(&cluster.url(), 2).await;
    let app2 = format!("docket/{}", db2.schema);
    let mut w = worker(&db2, &["--poll", "6s"]);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let stop = Utc::now();
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
    let (off, _) = off_poll(&statements(&cluster, &app2), stop);
    assert!(!off.is_empty(), "a default worker queries between polls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_worker_exits_and_leaves_no_connection() {
    let db = TestDb::new().await;
    let o = Command::new(env!("CARGO_BIN_EXE_docket"))
        .env("DATABASE_URL", &db.url)
        .env("DOCKET_SCHEMA", &db.schema)
        .args(["enqueue", "--queue", "q", "--kind", "k", "--args", "{}"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    let o = docket(&db)
        .args([
            "work", "--queue", "q", "--drain", "--poll", "100ms", "--exec", "true",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(count(&db, "succeeded").await, 1);
    // The process is gone, so are its connections: nothing keeps the compute awake. A backend
    // leaves pg_stat_activity a moment after its client's socket closes (under a loaded
    // suite that moment was seen to outlast the exit), so wait for it, briefly.
    let connections = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'docket/{}'",
        db.schema
    );
    eventually(
        Duration::from_secs(10),
        "the exited worker's connections are gone",
        || async { db.scalar(&connections).await == 0 },
    )
    .await;
}
