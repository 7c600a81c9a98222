//! `docket dashboard` and `docket work --metrics-listen` as processes: bad input and an open
//! dashboard beyond loopback are refused before anything starts; the dashboard serves its
//! pages and metrics; a worker's endpoint counts the jobs it ran.

use crate::common;

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
        if status == 200
            && body.contains(want)
            && body.contains(drained)
            && body.contains("docket_build_info{version=")
        {
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

/// `--tls-cert`/`--tls-key`: the dashboard serves HTTPS itself (a client that trusts the CA
/// reads its pages; plain HTTP gets nothing), the login cookie is `Secure` without
/// `--secure-cookie`, and a certificate that cannot be used is refused before anything
/// starts, naming the file and never printing its content.
#[tokio::test]
async fn the_dashboard_serves_https_with_its_own_certificate() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let dir = tempfile::tempdir().unwrap();
    let ca = docket_testkit::tls::TestCa::new("dashboard-test-ca");
    let ca_file = ca.write_cert(dir.path(), "ca.crt");
    let (cert, key) = ca.leaf(&["127.0.0.1"], false);
    let (cert_file, key_file) = (dir.path().join("d.crt"), dir.path().join("d.key"));
    std::fs::write(&cert_file, &cert).unwrap();
    std::fs::write(&key_file, &key).unwrap();
    let (cert_arg, key_arg) = (cert_file.to_str().unwrap(), key_file.to_str().unwrap());

    let token = "a-token-of-the-tls-test-1234567890";
    let mut c = cli.cmd();
    c.args([
        "dashboard",
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        cert_arg,
        "--tls-key",
        key_arg,
    ])
    .env("DOCKET_DASHBOARD_TOKEN", token);
    let (_dash, addr) = spawn_and_wait(c, "docket: dashboard on https://");
    let port = addr
        .split(['/', ' '])
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let https = format!("https://127.0.0.1:{port}");
    let page = curl(&[
        "--cacert",
        ca_file.to_str().unwrap(),
        "-H",
        &format!("Authorization: Bearer {token}"),
        "-w",
        "\n%{http_code}",
        &format!("{https}/"),
    ]);
    assert!(page.ends_with("\n200"), "HTTPS answers: {page}");
    assert!(page.contains("Docket"), "{page}");
    // The login cookie is Secure (the dashboard knows it serves TLS).
    let headers = curl(&[
        "--cacert",
        ca_file.to_str().unwrap(),
        "-D",
        "-",
        "-o",
        "/dev/null",
        "--data",
        &format!("token={token}"),
        &format!("{https}/login"),
    ]);
    let cookie = headers
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie"))
        .unwrap_or_else(|| panic!("a login cookie: {headers}"));
    assert!(cookie.contains("Secure"), "{cookie}");
    // Plain HTTP on the same port gets no page; a client that does not trust the CA neither.
    let plain = curl(&[
        "-w",
        "%{http_code}",
        "-o",
        "/dev/null",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert_ne!(plain, "200", "plain HTTP");
    let untrusted = curl(&[
        "-w",
        "%{http_code}",
        "-o",
        "/dev/null",
        &format!("{https}/"),
    ]);
    assert_eq!(untrusted, "000", "an unknown CA fails the handshake");

    // Unusable files: refused at once (exit 5), naming the file, never echoing its content.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate \u{1b}[31m secret-looking-text").unwrap();
    for (args, what) in [
        (
            vec!["--tls-cert", junk.to_str().unwrap(), "--tls-key", key_arg],
            "--tls-cert",
        ),
        (
            vec!["--tls-cert", cert_arg, "--tls-key", junk.to_str().unwrap()],
            "--tls-key",
        ),
        (
            vec!["--tls-cert", key_arg, "--tls-key", key_arg],
            "--tls-cert",
        ),
        (
            vec![
                "--tls-cert",
                ca_file.to_str().unwrap(),
                "--tls-key",
                key_arg,
            ],
            "do not go together",
        ),
        (
            vec!["--tls-cert", "/nonexistent/cert.pem", "--tls-key", key_arg],
            "--tls-cert",
        ),
    ] {
        let mut all = vec!["dashboard", "--listen", "127.0.0.1:0"];
        all.extend(args);
        let o = cli.run(&all);
        assert_eq!(code(&o), 5, "{all:?}: {}", err(&o));
        assert!(err(&o).contains(what), "{all:?}: {}", err(&o));
        assert!(
            !err(&o).contains("secret-looking") && !err(&o).contains("PRIVATE KEY"),
            "{}",
            err(&o)
        );
    }
    // Half a pair is a usage error.
    let o = cli.run(&[
        "dashboard",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert_arg,
    ]);
    assert_eq!(code(&o), 2, "{}", err(&o));
}
