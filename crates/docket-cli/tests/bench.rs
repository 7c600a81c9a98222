//! `docket bench --scenario drain --json` end to end: real worker processes drain a real
//! queue, each job is verified done exactly once, and the JSON carries the fields the
//! performance issue names. The floor is compared when `shared/bench/sql-floor.sh` is beside
//! the project (as on the developers' machines); without it the floor fields are absent.

use crate::common;

use common::{bench_sizes, code, err, json_lines, out, Cli};
use docket_testkit::TestDb;

fn floor_script_present() -> bool {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .any(|d| d.join("../shared/bench/sql-floor.sh").is_file())
}

#[tokio::test]
async fn drain_bench_prints_one_json_object_per_scenario_and_verifies_every_job() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&[
        "bench",
        "--scenario",
        "drain",
        "--jobs",
        "3000",
        "--workers",
        "2",
        "--concurrency",
        "50",
        "--batch",
        "50",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let objects = json_lines(&o);
    let drain = objects
        .iter()
        .find(|v| v["scenario"] == "drain")
        .unwrap_or_else(|| panic!("no drain object in {objects:?}"));
    assert_eq!(drain["jobs"], 3000);
    assert_eq!(drain["workers"], 2);
    let rate = drain["jobs_per_s"].as_f64().expect("jobs_per_s");
    assert!(rate > 0.0, "{drain}");
    let secs = drain["seconds"].as_f64().expect("seconds");
    assert!((rate * secs - 3000.0).abs() < 1.0, "{drain}");
    if floor_script_present() {
        let floor = drain["floor_jobs_per_s"]
            .as_f64()
            .expect("floor_jobs_per_s");
        let ratio = drain["ratio"].as_f64().expect("ratio");
        assert!(
            floor > 0.0 && (ratio - rate / floor).abs() < 1e-9,
            "{drain}"
        );
        // Batch 50 differs from the floor's 100: the floor at Docket's batch is reported too.
        assert!(
            objects.iter().any(
                |v| v["scenario"] == "drain_vs_floor_at_docket_batch" && v["floor_batch"] == 50
            ),
            "{objects:?}"
        );
    } else {
        assert!(drain["floor_jobs_per_s"].is_null(), "{drain}");
    }
    // The bench's own check, repeated: every job completed — the workers run the library's
    // default, so each success deleted its row — each on its first claim, and the drain
    // workers exited on their own (no worker connection is left on the server).
    assert_completed_once(&db, 3000).await;
    let left = db
        .scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND application_name = 'docket/{schema}_bench'",
        )
        .await;
    assert_eq!(left, 0, "bench worker connections left behind");
}

/// `--scenario mixed` reports the nominal ratio (the target's) and, beside it, the ideal of
/// the handlers as they measured their own sleeps — never shorter than the nominal one (a
/// sleep ends at or after its deadline), and the drain never beats it — and the worker's
/// peak RSS.
#[tokio::test]
async fn the_mixed_bench_reports_the_handlers_measured_ideal_next_to_the_nominal_one() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&["bench", "--scenario", "mixed", "--jobs", "1000", "--json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).lines().last().unwrap()).unwrap();
    assert_eq!(v["scenario"], "mixed", "{v}");
    let nominal = v["ratio"].as_f64().unwrap();
    let note = v["note"].as_str().unwrap();
    let measured = v["extra"]["ratio_to_handlers_ideal"].as_f64().unwrap();
    let each_ms = v["extra"]["handler_ms"].as_f64().unwrap();
    // The worker reports its peak resident set; a no-op worker with 50 slots is tens of MiB.
    let rss = v["extra"]["peak_rss_mib"].as_f64().unwrap();
    assert!(rss > 1.0 && rss < 1024.0, "peak RSS {rss} MiB: {note}");
    assert!(each_ms >= 5.0, "a 5 ms sleep measured {each_ms} ms: {note}");
    assert!(
        measured >= 1.0 && measured <= nominal,
        "measured ratio {measured}, nominal {nominal}: {note}"
    );
    assert_completed_once(&db, 1000).await;
}

/// `--scenario concurrency` runs one default worker process per (N, W) asked for, in that
/// order, verifies every drain, and reports each median with the worker's peak RSS (the
/// memory target is stated at W = 200), the drain counted from the worker's start, the
/// worker's CPU a job and, when the floor script is present, the ratio.
#[tokio::test]
async fn the_concurrency_bench_runs_each_level_and_reports_the_workers_peak_rss() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&[
        "bench",
        "--scenario",
        "concurrency",
        "--levels",
        "2,20",
        "--counts",
        "400",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let rows = json_lines(&o);
    let got = bench_sizes(&rows);
    assert_eq!(got, [(400, 2), (400, 20)], "{rows:?}");
    for r in &rows {
        assert_eq!(r["scenario"], "concurrency", "{r}");
        assert!(r["jobs_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let rss = r["extra"]["peak_rss_mib"].as_f64().unwrap();
        assert!(rss > 1.0 && rss < 1024.0, "peak RSS {rss} MiB: {r}");
        // Counted from the worker's start, the same drain takes longer: a lower rate.
        let from_start = r["extra"]["runs_from_start_jobs_per_s"].as_array().unwrap();
        let drained = r["extra"]["runs_jobs_per_s"].as_array().unwrap();
        assert_eq!(from_start.len(), 1, "{r}");
        let (s, d) = (
            from_start[0].as_f64().unwrap(),
            drained[0].as_f64().unwrap(),
        );
        assert!(
            s > 0.0 && s <= d,
            "from the start {s} jobs/s, drain {d}: {r}"
        );
        // The worker's CPU a job: its start-up alone takes more than one 10 ms tick.
        let cpu = r["extra"]["worker_cpu_us_per_job"][0].as_f64().unwrap();
        assert!(cpu > 0.0, "{r}");
        if floor_script_present() {
            let (rate, floor) = (
                r["jobs_per_s"].as_f64().unwrap(),
                r["floor_jobs_per_s"].as_f64().unwrap(),
            );
            assert!(
                (r["ratio"].as_f64().unwrap() - rate / floor).abs() < 1e-6,
                "{r}"
            );
        }
    }
    // The last drain's jobs: every one completed on its first claim.
    assert_completed_once(&db, 400).await;
}

/// `--scenario keep` alternates a deleting and a keeping drain at each level and reports the
/// kept rate over the deleted one; the keeping drain really keeps: its jobs are left as
/// `succeeded`, once each.
#[tokio::test]
async fn the_keep_bench_compares_a_keeping_drain_with_the_deleting_default() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let o = cli.run(&[
        "bench",
        "--scenario",
        "keep",
        "--levels",
        "4",
        "--counts",
        "300",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let rows = json_lines(&o);
    assert_eq!(bench_sizes(&rows), [(300, 4)], "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["scenario"], "keep_succeeded", "{r}");
    let (kept, deleted) = (
        r["jobs_per_s"].as_f64().unwrap(),
        r["extra"]["deleted_jobs_per_s"].as_f64().unwrap(),
    );
    assert!(kept > 0.0 && deleted > 0.0, "{r}");
    assert!(
        (r["ratio"].as_f64().unwrap() - kept / deleted).abs() < 1e-9,
        "{r}"
    );
    // The last drain was the keeping one.
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM {schema}_bench.jobs_all WHERE state = 'succeeded' AND attempt = 1"
        )
        .await,
        300
    );
    // Kept in the packed history (migration 0035), none left in the hot table.
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}_bench.jobs").await,
        0
    );
    assert_eq!(
        db.scalar("SELECT coalesce(sum(n), 0)::bigint FROM {schema}_bench.jobs_succeeded")
            .await,
        300
    );
    for bad in [["--counts", "0"], ["--levels", "0"], ["--runs", "0"]] {
        let o = cli.run(&["bench", "--scenario", "keep", bad[0], bad[1]]);
        assert_eq!(code(&o), 5, "{bad:?}: {}", err(&o));
        assert!(err(&o).contains(bad[0]), "{bad:?}: {}", err(&o));
    }
}

/// The last drain's `n` jobs all completed on their first claim: no row is left (the default
/// worker deletes what succeeds) and the bench's completion log adds up to `n` of attempt 1.
async fn assert_completed_once(db: &TestDb, n: i64) {
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}_bench.jobs").await,
        0
    );
    assert_eq!(
        db.scalar("SELECT coalesce(sum(n), 0)::bigint FROM {schema}_bench.bench_done")
            .await,
        n
    );
    assert_eq!(
        db.scalar("SELECT coalesce(max(max_attempt), 0)::bigint FROM {schema}_bench.bench_done")
            .await,
        1
    );
}
