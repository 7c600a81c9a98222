//! TLS and connection failures, through the real binary: a private cluster serving TLS with a
//! certificate from a CA the test made; every sslmode; client certificates; and errors that
//! name their cause (exit 3), never the password.

use crate::common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{code, err};
use docket_postgres::connect;
use docket_testkit::tls::{tls_cluster, write_private, TestCa};

fn docket(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docket"))
        .env("DATABASE_URL", url)
        .env("DOCKET_SCHEMA", "tls_test")
        .env_remove("DOCKET_HOME")
        .args(args)
        .output()
        .expect("run docket")
}

/// Whether a connection made from `url` the way Docket makes it is encrypted, by the
/// server's own account (pg_stat_ssl).
async fn encrypted(url: &str) -> bool {
    let mut target = connect::parse(url).expect("parse");
    let pool = connect::pool(&mut target, "tls-check", 1)
        .await
        .expect("connect");
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("pg_stat_ssl");
    pool.close().await;
    ssl
}

fn assert_tls_failure(o: &Output, cause: &[&str]) {
    let e = err(o);
    assert_eq!(code(o), 3, "{e}");
    assert!(e.contains("TLS"), "names TLS: {e}");
    let lower = e.to_lowercase();
    assert!(
        cause.iter().any(|c| lower.contains(&c.to_lowercase())),
        "names the cause {cause:?}: {e}"
    );
    assert!(
        !e.contains("is PostgreSQL running"),
        "no misleading hint: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sslmode_against_a_test_ca() {
    let ca = TestCa::new("docket test CA");
    let other = TestCa::new("some other CA");
    // The server's certificate names only 127.0.0.1, so "localhost" is a wrong host name.
    // certuser must present a client certificate over TLS and may not connect without TLS.
    let cluster = tls_cluster(
        &ca,
        &["127.0.0.1"],
        "hostssl all certuser 127.0.0.1/32 cert\nhost all certuser 127.0.0.1/32 reject",
    );
    let port = cluster.cluster.port();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = ca.write_cert(dir.path(), "ca.crt");
    let other_file = other.write_cert(dir.path(), "other.crt");
    let (client_cert, client_key) = ca.leaf(&["certuser"], true);
    let cert_file = dir.path().join("client.crt");
    let key_file = dir.path().join("client.key");
    std::fs::write(&cert_file, client_cert).unwrap();
    write_private(&key_file, &client_key);
    let admin = docket_testkit::pool(&cluster.url(), "admin", 1).await;
    sqlx::raw_sql("CREATE ROLE certuser LOGIN; GRANT CREATE ON DATABASE postgres TO certuser")
        .execute(&admin)
        .await
        .unwrap();

    let ip = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let localhost = format!("postgres://postgres@localhost:{port}/postgres");
    let ca_q = format!("sslrootcert={}", ca_file.display());

    // Works: require, verify-full with the right CA and host, verify-ca (host not checked),
    // key=value form, disable; and each says so in pg_stat_ssl.
    let require = format!("{ip}?sslmode=require");
    let o = docket(&require, &["migrate"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    for (url, tls) in [
        (require.clone(), true),
        (format!("{ip}?sslmode=verify-full&{ca_q}"), true),
        (format!("{localhost}?sslmode=verify-ca&{ca_q}"), true),
        (
            format!(
                "host=127.0.0.1 port={port} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{}'",
                ca_file.display()
            ),
            true,
        ),
        (format!("{ip}?sslmode=prefer"), true),
        (format!("{ip}?sslmode=disable"), false),
    ] {
        let o = docket(&url, &["stats", "--json"]);
        assert_eq!(code(&o), 0, "{url}: {}", err(&o));
        assert_eq!(encrypted(&url).await, tls, "{url}");
    }

    // A wrong CA and a wrong host name: exit 3, the TLS cause named.
    let o = docket(
        &format!(
            "{ip}?sslmode=verify-full&sslrootcert={}",
            other_file.display()
        ),
        &["stats"],
    );
    assert_tls_failure(&o, &["UnknownIssuer", "unknown issuer"]);
    let o = docket(
        &format!("{localhost}?sslmode=verify-full&{ca_q}"),
        &["stats"],
    );
    assert_tls_failure(&o, &["NotValidForName", "not valid for name"]);
    // No CA given: the system roots do not know the test CA.
    let o = docket(&format!("{ip}?sslmode=verify-full"), &["stats"]);
    assert_tls_failure(&o, &["UnknownIssuer", "unknown issuer"]);

    // Client certificates: certuser gets in with its certificate, not without one.
    let cert_url = format!(
        "postgres://certuser@127.0.0.1:{port}/postgres?sslmode=verify-full&{ca_q}&sslcert={}&sslkey={}",
        cert_file.display(),
        key_file.display()
    );
    // certuser may not use the schema postgres made: a clear error naming both.
    let o = docket(&cert_url, &["migrate"]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(
        err(&o).contains("certuser") && err(&o).contains("tls_test"),
        "{}",
        err(&o)
    );
    let o = docket(&cert_url, &["--schema", "cert_test", "migrate"]);
    assert_eq!(code(&o), 0, "client certificate: {}", err(&o));
    assert!(encrypted(&cert_url).await);
    let o = docket(
        &format!("postgres://certuser@127.0.0.1:{port}/postgres?sslmode=verify-full&{ca_q}"),
        &["--schema", "cert_test", "stats"],
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("certuser"), "{}", err(&o));
    let o = docket(
        &format!("postgres://certuser@127.0.0.1:{port}/postgres?sslmode=disable"),
        &["stats"],
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
}

#[tokio::test]
async fn connection_errors_name_their_cause_at_once_and_never_the_password() {
    let free = docket_localpg::free_port().unwrap();
    // Refused: at once (not after the pool's 10 s acquire time-out), with the right hint.
    let started = Instant::now();
    let o = docket(
        &format!("postgres://postgres:hunter2@127.0.0.1:{free}/postgres"),
        &["stats"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("connection refused"), "{}", err(&o));
    assert!(
        err(&o).contains("is PostgreSQL running there"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("hunter2"), "{}", err(&o));

    // A database that does not exist is not "is PostgreSQL running?".
    let server = docket_testkit::server_url();
    let (host, port) = docket_testkit::host_port(&server);
    let o = docket(
        &format!("postgres://postgres@{host}:{port}/no_such_database_here"),
        &["stats"],
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(
        err(&o).contains("\"no_such_database_here\" does not exist"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("is PostgreSQL running"), "{}", err(&o));

    // Malformed strings: exit 5, and no secret echoed, in every form.
    for url in [
        format!("postgres://u:hunter2@127.0.0.1:{free}/db?sslmode=sometimes"),
        format!("postgres://u:hunter2@127.0.0.1:{free}/db?passwd=hunter2"),
        "host=127.0.0.1 password='hunter2".to_string(),
    ] {
        let o = docket(&url, &["stats"]);
        assert_eq!(code(&o), 5, "{url}: {}", err(&o));
        assert!(!err(&o).contains("hunter2"), "{url}: {}", err(&o));
    }
    // Another engine's URL with a wrong password: unavailable (3), the password redacted.
    let url = "mysql://root:hunter2@127.0.0.1:1/db".to_string();
    let o = docket(&url, &["stats"]);
    assert_eq!(code(&o), 3, "{url}: {}", err(&o));
    assert!(!err(&o).contains("hunter2"), "{url}: {}", err(&o));
    // key=value with a password against a closed port: the password stays out.
    let o = docket(
        &format!("host=127.0.0.1 port={free} user=postgres password=hunter2 dbname=x"),
        &["stats"],
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(!err(&o).contains("hunter2"), "{}", err(&o));
}
