//! `docket-bench` runs its scenarios against a real server, with worker processes that are
//! this binary again: the scale scenario (no workers) and a short churn (one worker process,
//! pruning), each printing its JSON and, for churn, drawing its chart into a directory it
//! creates.

use std::process::Command;

use docket_testkit::{fresh_schema, server_url};

fn bench(schema: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_docket-bench"))
        .env("DATABASE_URL", server_url())
        .env_remove("DOCKET_SCHEMA")
        .args(["--schema", schema])
        .args(args)
        .output()
        .expect("run docket-bench")
}

fn json_lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[test]
fn scale_prints_claim_latency_at_each_size() {
    let o = bench(
        &fresh_schema(),
        &[
            "scale",
            "--sizes",
            "500,2000",
            "--finished",
            "100",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = json_lines(&o);
    let sizes: Vec<u64> = rows.iter().map(|r| r["jobs"].as_u64().unwrap()).collect();
    assert_eq!(sizes, vec![500, 2000]);
    assert!(rows
        .iter()
        .all(|r| r["scenario"] == "scale" && r["p50_ms"].as_f64() > Some(0.0)));
}

#[test]
fn churn_runs_a_worker_process_of_its_own_and_draws_its_chart() {
    let dir = tempfile::tempdir().unwrap();
    let charts = dir.path().join("new");
    let o = bench(
        &fresh_schema(),
        &[
            "churn",
            "--duration",
            "10s",
            "--rate",
            "200",
            "--workers",
            "1",
            "--chart-dir",
            charts.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = json_lines(&o);
    let result = rows
        .iter()
        .find(|r| r["scenario"] == "churn")
        .expect("churn result");
    assert!(result["jobs"].as_u64().unwrap_or(0) > 0, "{result}");
    assert!(rows.iter().any(|r| r["scenario"] == "churn_sample"));
    assert!(charts.join("bench-churn.png").is_file());
}
