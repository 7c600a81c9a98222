//! What keeps a serverless compute awake: an idle `docket work --serverless` sends statements
//! only in its polls' wake-ups (the default worker, with its once-a-second leader loop, does
//! not), and `docket work --drain` leaves no connection behind. Statements are read from the
//! server's own log (`log_statement = all`) on a cluster of the test's own.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use common::*;
use docket_testkit::{PrivateCluster, TestDb};

/// Timestamps of the statements a session tagged `app` sent, and which were claims. A log
/// entry starts with its timestamp; a statement's further lines follow without one.
fn statements(cluster: &PrivateCluster, app: &str) -> Vec<(DateTime<Utc>, bool)> {
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
        .map(|(t, text)| (t, text.contains("claim(")))
        .collect()
}

fn worker(db: &TestDb, extra: &[&str]) -> std::process::Child {
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
}

/// Statements sent from 2 s after the first one until the worker was told to stop (`until`)
/// that were more than 700 ms after the latest claim (the poll), and the number of claims.
fn off_poll(stmts: &[(DateTime<Utc>, bool)], until: DateTime<Utc>) -> (usize, usize) {
    let Some(first) = stmts.first().map(|s| s.0) else {
        return (0, 0);
    };
    let settled = first + chrono::Duration::seconds(2);
    let mut last_claim: Option<DateTime<Utc>> = None;
    let (mut off, mut claims) = (0, 0);
    for &(t, is_claim) in stmts {
        if is_claim {
            last_claim = Some(t);
        }
        if t < settled || t >= until {
            continue;
        }
        if is_claim {
            claims += 1;
        } else if last_claim.is_none_or(|c| t - c > chrono::Duration::milliseconds(700)) {
            off += 1;
        }
    }
    (off, claims)
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
    let mut w = worker(&db, &["--serverless", "--poll", "2s"]);
    tokio::time::sleep(Duration::from_secs(9)).await;
    let stop = Utc::now();
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
    let stmts = statements(&cluster, &app);
    let (off, claims) = off_poll(&stmts, stop);
    assert!(
        claims >= 3,
        "the worker polled ({claims} claims of {} statements)",
        stmts.len()
    );
    assert_eq!(off, 0, "statements between polls");

    // The same check fails for a default worker: its leader loop runs every second.
    let db2 = TestDb::on(&cluster.url(), 2).await;
    let app2 = format!("docket/{}", db2.schema);
    let mut w = worker(&db2, &["--poll", "4s"]);
    tokio::time::sleep(Duration::from_secs(9)).await;
    let stop = Utc::now();
    signal(w.id(), "TERM");
    assert!(w.wait().unwrap().success());
    let (off, _) = off_poll(&statements(&cluster, &app2), stop);
    assert!(off > 0, "a default worker queries between polls");
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
    // The process is gone, so are its sessions: nothing keeps the compute awake.
    let left = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'docket/{}'",
            db.schema
        ))
        .await;
    assert_eq!(left, 0);
}
