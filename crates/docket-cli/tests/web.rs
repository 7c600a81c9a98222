//! `docket dashboard` and `docket work --metrics-listen` as processes: bad input and an open
//! dashboard beyond loopback are refused before anything starts; the dashboard serves its
//! pages and metrics; a worker's endpoint counts the jobs it ran.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use docket_testkit::TestDb;

fn get(url: &str) -> (u16, String) {
    let o = Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[tokio::test]
async fn bad_input_and_an_open_dashboard_beyond_loopback_are_refused() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    assert_fails(
        &cli,
        &["dashboard", "--listen", "0.0.0.0:0"],
        5,
        "without authentication",
    );
    assert_fails(
        &cli,
        &["dashboard", "--listen", "localhost"],
        5,
        "not an address",
    );
    assert_fails(
        &cli,
        &["dashboard", "--base-path", "admin/"],
        5,
        "base path",
    );
    assert_fails(&cli, &["dashboard", "--refresh", "0s"], 5, "refresh");
    assert_fails(
        &cli,
        &["work", "--exec", "true", "--metrics-listen", "nowhere"],
        5,
        "--metrics-listen",
    );
    let o = cli
        .cmd()
        .args(["dashboard", "--listen", "0.0.0.0:0"])
        .env("DOCKET_DASHBOARD_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(
        err(&o).contains("DOCKET_DASHBOARD_TOKEN must be"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("short"), "the secret is not echoed");
    let o = cli
        .cmd()
        .args(["dashboard"])
        .env("DOCKET_DASHBOARD_USER", "ops")
        .output()
        .unwrap();
    assert_eq!(code(&o), 5);
    assert!(err(&o).contains("needs both"), "{}", err(&o));
}

#[tokio::test]
async fn the_dashboard_serves_pages_and_a_worker_exports_metrics() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run_stdin(&["enqueue", "--bulk", "-"], &ndjson("mq", 20));
    assert_eq!(code(&o), 0, "{}", err(&o));

    let token = "a-token-of-the-test-1234567890";
    let mut c = cli.cmd();
    c.args(["dashboard", "--listen", "0.0.0.0:0"])
        .env("DOCKET_DASHBOARD_TOKEN", token);
    let (_dash, addr) = spawn_and_wait(c, "docket: dashboard on http://");
    let port = addr
        .split(['/', ' '])
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let base = format!("http://127.0.0.1:{port}");
    let (status, _) = get(&format!("{base}/"));
    assert_eq!(status, 303, "closed without the token");
    let o = Command::new("curl")
        .args([
            "-s",
            "-H",
            &format!("Authorization: Bearer {token}"),
            &format!("{base}/"),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("data-queue=\"mq\""));

    let mut c = cli.cmd();
    c.args([
        "work",
        "--queue",
        "mq",
        "--exec",
        "true",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let (mut worker, addr) = spawn_and_wait(c, "docket: metrics on http://");
    let url = format!("http://{}", addr.trim());
    let want = r#"docket_jobs_completed_total{queue="mq",kind="k",outcome="succeeded"} 20"#;
    // The database gauges are read at most every 5 s: wait for one read after the last job.
    let drained = r#"docket_queue_jobs{queue="mq",state="pending"} 0"#;
    let mut last = String::new();
    for _ in 0..400 {
        let (status, body) = get(&url);
        if status == 200 && body.contains(want) && body.contains(drained) {
            last.clear();
            break;
        }
        last = body;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        last.is_empty(),
        "never counted 20 jobs and an empty queue:\n{last}"
    );
    signal(worker.id(), "TERM");
    assert!(worker.wait().unwrap().success());
}

/// A worker's /metrics beyond loopback is closed without DOCKET_METRICS_TOKEN (refused at
/// start), and with it answers only the bearer token.
#[tokio::test]
async fn worker_metrics_beyond_loopback_need_a_token() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&["migrate"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let work = [
        "work",
        "--queue",
        "mq",
        "--exec",
        "true",
        "--metrics-listen",
        "0.0.0.0:0",
    ];
    assert_fails(&cli, &work, 5, "without authentication");
    let token = "a-metrics-token-of-the-test-123";
    let mut c = cli.cmd();
    c.args(work).env("DOCKET_METRICS_TOKEN", token);
    let (mut worker, addr) = spawn_and_wait(c, "docket: metrics on http://");
    let port = addr
        .trim()
        .split('/')
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let url = format!("http://127.0.0.1:{port}/metrics");
    assert_eq!(get(&url).0, 401, "no token");
    let o = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(&url)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "200");
    signal(worker.id(), "TERM");
    assert!(worker.wait().unwrap().success());
}
