//! `docket enqueue --bulk` streams: a file far larger than one chunk goes in whole, with the
//! process's peak memory bounded by a chunk rather than the file; a bad line near the end
//! rolls back every chunk already sent.

use crate::common;

use std::io::Write;
use std::process::Stdio;

use common::*;
use docket_testkit::TestDb;

/// The largest peak RSS (KiB) of any child this process has waited for. This test binary
/// runs one docket process at a time, so it is that process's.
fn children_max_rss_kib() -> i64 {
    #[allow(unsafe_code)]
    // SAFETY: getrusage only writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_streams_in_bounded_memory_all_or_nothing() {
    let db = TestDb::new().await;
    let (_d, dir) = scratch();
    // 300,000 lines, ~28 MB: before streaming, the whole file's jobs were held at once
    // (about 19 × the file: ~500 MB here).
    let path = dir.join("jobs.ndjson");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..300_000 {
            writeln!(
                f,
                r#"{{"queue":"bulk","kind":"send_welcome","args":{{"user_id":{i},"email":"user{i}@example.com","locale":"en"}}}}"#
            )
            .unwrap();
        }
    }
    let size_mb = std::fs::metadata(&path).unwrap().len() / 1_000_000;
    let o = docket(&db)
        .args(["enqueue", "--bulk"])
        .arg(&path)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o).trim(), "300000");
    let rss_mb = children_max_rss_kib() / 1024;
    println!("file {size_mb} MB, peak RSS {rss_mb} MB");
    assert!(
        rss_mb <= 100,
        "peak RSS {rss_mb} MB for a {size_mb} MB file"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE queue = 'bulk'")
            .await,
        300_000
    );

    // A bad line after several chunks went in: nothing of this file remains.
    let bad = dir.join("bad.ndjson");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&bad).unwrap());
        for i in 0..35_000 {
            writeln!(f, r#"{{"queue":"other","kind":"k","args":{{"i":{i}}}}}"#).unwrap();
        }
        writeln!(f, r#"{{"queue":"other","kind":"k","priority":500}}"#).unwrap();
    }
    let o = docket(&db)
        .args(["enqueue", "--bulk"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("line 35001"), "{}", err(&o));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE queue = 'other'")
            .await,
        0
    );
}
