//! Random batches for the chaos tests: opened through `docket batches` (half of them open,
//! grown with `add`, then closed), and the checks after the kills — every batch ended as its
//! members did, each callback whose occasion held ran as exactly one job (none of the
//! others), after every member had finished, told the right counts.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Output;

use rand::{Rng, SeedableRng};

/// One batch: whether each member's command fails (exit 65: dead at once), and whether it
/// is opened open (members added in two steps, then closed) rather than closed at once.
pub struct Batch {
    pub fails: Vec<bool>,
    pub grown: bool,
}

/// `count` random batches of 1..=`max` members, a member failing one time in ten.
pub fn random(seed: u64, count: usize, max: usize) -> Vec<Batch> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let n = rng.gen_range(1..=max);
            Batch {
                fails: (0..n).map(|_| rng.gen_bool(0.1)).collect(),
                grown: rng.gen_bool(0.5),
            }
        })
        .collect()
}

/// The command of the chaos workers: members as the workflow chaos's, and each callback
/// (kind `cb`) appends `JOB DOCKET_BATCH` to `cb_log` (one short line: an atomic append).
pub fn command(cb_log: &Path) -> String {
    format!(
        r#"case "$DOCKET_KIND" in fail) exit 65;; cb) printf '%s %s\n' "$DOCKET_JOB_ID" "$DOCKET_BATCH" >> '{}';; *) sleep 0.02;; esac"#,
        cb_log.display()
    )
}

fn member(fails: bool) -> serde_json::Value {
    serde_json::json!({"queue": "wf", "kind": if fails { "fail" } else { "ok" }})
}

fn run_json(run: &impl Fn(&[&str]) -> Output, args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert_eq!(super::code(&o), 0, "{args:?}: {}", super::err(&o));
    serde_json::from_str(super::out(&o).trim()).unwrap()
}

/// Opens every batch with `docket batches` (queue `wf`; callbacks of kind `cb`); each
/// batch's id and its members' job ids.
pub fn open(
    run: impl Fn(&[&str]) -> Output,
    dir: &Path,
    batches: &[Batch],
) -> Vec<(i64, Vec<i64>)> {
    let cb = serde_json::json!({"queue": "wf", "kind": "cb"});
    batches
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let half = if b.grown {
                b.fails.len() / 2
            } else {
                b.fails.len()
            };
            let first: Vec<serde_json::Value> =
                b.fails[..half].iter().map(|&f| member(f)).collect();
            let path = dir.join(format!("batch-{i}.json"));
            let spec = serde_json::json!({"name": format!("batch-{i}"), "jobs": first,
                "on_success": cb, "on_complete": cb, "on_failure": cb, "close": !b.grown});
            std::fs::write(&path, spec.to_string()).unwrap();
            let v = run_json(&run, &["batches", "open", path.to_str().unwrap(), "--json"]);
            let id = v["id"].as_i64().expect("the batch's id");
            let mut jobs: Vec<i64> = v["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j.as_i64().unwrap())
                .collect();
            if b.grown {
                let rest: Vec<serde_json::Value> =
                    b.fails[half..].iter().map(|&f| member(f)).collect();
                let path = dir.join(format!("batch-{i}-more.json"));
                std::fs::write(&path, serde_json::Value::Array(rest).to_string()).unwrap();
                let v = run_json(
                    &run,
                    &[
                        "batches",
                        "add",
                        &id.to_string(),
                        path.to_str().unwrap(),
                        "--json",
                    ],
                );
                jobs.extend(
                    v["jobs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|j| j.as_i64().unwrap()),
                );
                run_json(&run, &["batches", "close", &id.to_string(), "--json"]);
            }
            assert_eq!(jobs.len(), b.fails.len());
            (id, jobs)
        })
        .collect()
}

/// After the run: each batch succeeded or failed as its members did, its counts exact;
/// each callback due ran as exactly the one job its batch recorded, told the batch's counts,
/// and started after every member had finished; no other callback ran. `finished_ns`: each
/// job's `finished_at` (from `docket jobs list`), `first_start`: each job's first logged
/// start. Returns the callbacks checked.
pub fn check(
    run: impl Fn(&[&str]) -> Output,
    batches: &[Batch],
    ids: &[(i64, Vec<i64>)],
    cb_log: &str,
    finished_ns: &HashMap<i64, i128>,
    first_start: &HashMap<i64, i128>,
) -> usize {
    // (batch, callback) -> the distinct jobs that ran it, and what each was told.
    let mut ran: HashMap<(i64, String), HashSet<i64>> = HashMap::new();
    let mut told: HashMap<i64, serde_json::Value> = HashMap::new();
    for line in cb_log.lines() {
        let (job, json) = line.split_once(' ').expect("JOB DOCKET_BATCH");
        let job: i64 = job.parse().unwrap();
        let v: serde_json::Value = serde_json::from_str(json).expect("DOCKET_BATCH is JSON");
        let key = (
            v["id"].as_i64().unwrap(),
            v["callback"].as_str().unwrap().to_string(),
        );
        ran.entry(key).or_default().insert(job);
        told.insert(job, v);
    }
    let mut checked = 0;
    for (b, (id, members)) in batches.iter().zip(ids) {
        let failed = b.fails.iter().filter(|&&f| f).count() as i64;
        let n = b.fails.len() as i64;
        let v = run_json(&run, &["batches", "show", &id.to_string(), "--json"]);
        let st = &v["batch"];
        assert_eq!(st["unfinished"], 0, "batch {id}: {st}");
        assert_eq!(
            (st["succeeded"].as_i64(), st["dead"].as_i64()),
            (Some(n - failed), Some(failed)),
            "batch {id}"
        );
        let last_finish = members
            .iter()
            .map(|m| {
                finished_ns
                    .get(m)
                    .copied()
                    .unwrap_or_else(|| panic!("member {m} finished"))
            })
            .max()
            .unwrap();
        let recorded: HashMap<String, Option<i64>> = st["callbacks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c[0].as_str().unwrap().to_string(), c[1].as_i64()))
            .collect();
        for (cb, due) in [
            ("on_complete", true),
            ("on_failure", failed > 0),
            ("on_success", failed == 0),
        ] {
            let jobs = ran.get(&(*id, cb.to_string())).cloned().unwrap_or_default();
            if !due {
                assert!(jobs.is_empty(), "batch {id}: {cb} ran though not due");
                assert_eq!(
                    recorded[cb], None,
                    "batch {id}: {cb} recorded though not due"
                );
                continue;
            }
            assert_eq!(
                jobs.len(),
                1,
                "batch {id}: {cb} ran as {jobs:?}, not one job"
            );
            let job = *jobs.iter().next().unwrap();
            assert_eq!(recorded[cb], Some(job), "batch {id}: {cb}'s job");
            let t = &told[&job];
            assert_eq!(
                (t["total"].as_i64(), t["dead"].as_i64()),
                (Some(n), Some(failed)),
                "batch {id}: {cb} told {t}"
            );
            // finished_at has millisecond precision on SQLite and MariaDB.
            let fin = last_finish / 1_000_000 * 1_000_000;
            assert!(
                first_start[&job] >= fin,
                "batch {id}: {cb} started before its last member finished"
            );
            checked += 1;
        }
    }
    checked
}

/// `docket batches` end to end through `run` in scratch directory `dir`: a refused file
/// writes nothing and exits with the invalid-input code; an open batch grows with `add`,
/// refuses `add` once closed, and after `docket work --exec` ran its members its
/// `on_complete` and `on_failure` callbacks' commands read `DOCKET_BATCH`; `list` and
/// `show` tell it; a missing batch is not found. Returns what the callbacks were told.
pub fn batch_through_the_cli(
    run: impl Fn(&[&str]) -> Output,
    dir: &Path,
) -> Vec<serde_json::Value> {
    let o = run(&["migrate"]);
    assert_eq!(super::code(&o), 0, "{}", super::err(&o));
    let bad = dir.join("bad-batch.json");
    std::fs::write(
        &bad,
        r#"{"name":"b","jobs":[{"kind":"ok"},{"kind":"bad kind"}],"on_success":{"kind":"cb"}}"#,
    )
    .unwrap();
    let o = run(&["batches", "open", bad.to_str().unwrap()]);
    assert_eq!(super::code(&o), 5, "{}", super::err(&o));
    assert!(super::err(&o).contains("job #1"), "{}", super::err(&o));
    let o = run(&["jobs", "list", "--json"]);
    assert_eq!(super::out(&o).trim(), "[]", "nothing was enqueued");

    let good = dir.join("batch.json");
    std::fs::write(
        &good,
        r#"{"name":"import","close":false,"jobs":[{"queue":"bq","kind":"ok"}],
            "on_complete":{"queue":"bq","kind":"cb"},"on_failure":{"queue":"bq","kind":"cb"},
            "on_success":{"queue":"bq","kind":"cb"}}"#,
    )
    .unwrap();
    let v = run_json(&run, &["batches", "open", good.to_str().unwrap(), "--json"]);
    let id = v["id"].as_i64().unwrap().to_string();
    let more = dir.join("more.json");
    std::fs::write(
        &more,
        r#"[{"queue":"bq","kind":"fail"},{"queue":"bq","kind":"ok"}]"#,
    )
    .unwrap();
    let v = run_json(
        &run,
        &["batches", "add", &id, more.to_str().unwrap(), "--json"],
    );
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2);
    let o = run(&["batches", "close", &id]);
    assert_eq!(super::code(&o), 0, "{}", super::err(&o));
    assert!(
        super::out(&o).contains("running (3 members: 3 unfinished)"),
        "{}",
        super::out(&o)
    );
    let o = run(&["batches", "add", &id, more.to_str().unwrap()]);
    assert_eq!(
        super::code(&o),
        5,
        "a closed batch takes nothing: {}",
        super::err(&o)
    );
    assert!(super::err(&o).contains("is closed"), "{}", super::err(&o));

    let told = dir.join("told.log");
    let script = format!(
        r#"case "$DOCKET_KIND" in fail) exit 65;; cb) printf '%s\n' "$DOCKET_BATCH" >> '{}';; esac"#,
        told.display()
    );
    let o = run(&[
        "work", "--queue", "bq", "--exec", &script, "--drain", "--poll", "100ms",
    ]);
    assert_eq!(super::code(&o), 0, "{}", super::err(&o));
    let o = run(&["batches", "show", &id]);
    assert_eq!(super::code(&o), 0, "{}", super::err(&o));
    let shown = super::out(&o);
    assert!(
        shown.contains("failed (3 members: 2 succeeded, 1 dead)")
            && shown.contains("on_success (not fired)")
            && shown.contains("#3"),
        "{shown}"
    );
    let list = run_json(&run, &["batches", "list", "--json"]);
    assert_eq!(list[0]["name"], "import");
    let o = run(&["batches", "show", "999999"]);
    assert_eq!(super::code(&o), 4, "{}", super::err(&o));
    assert!(
        super::err(&o).contains("no batch 999999"),
        "{}",
        super::err(&o)
    );
    let mut lines: Vec<serde_json::Value> = std::fs::read_to_string(&told)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.sort_by_key(|v| v["callback"].as_str().unwrap_or_default().to_string());
    lines
}
