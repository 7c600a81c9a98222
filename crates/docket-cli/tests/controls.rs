//! `docket queues|keys|cron` and `docket jobs skip`, run as a user would, with the state
//! they leave in the database and the exit codes of bad input.

use crate::common;

use common::*;
use docket_testkit::TestDb;

fn ok(o: &std::process::Output) -> String {
    assert_eq!(code(o), 0, "stderr: {}", err(o));
    out(o)
}

#[tokio::test]
async fn queue_controls_from_the_command_line() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    // A queue nobody knows is refused as a likely typo, and nothing is written; --new sets
    // one up before its first job.
    let o = cli.run(&["queues", "pause", "mail"]);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert!(err(&o).contains("no queue mail is known"), "{}", err(&o));
    assert!(err(&o).contains("--new"), "{}", err(&o));
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.queues").await, 0);
    ok(&cli.run(&["queues", "pause", "mail", "--new"]));
    let s = ok(&cli.run(&["stats"]));
    assert!(s.contains("paused"), "stats shows the pause:\n{s}");
    let o = ok(&cli.run(&[
        "queues",
        "limit",
        "mail",
        "--max-running",
        "5",
        "--rate",
        "10/1s",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["limits"]["max_running"], 5);
    assert_eq!(v["limits"]["rate"]["limit"], 10);
    assert!(v["paused_at"].is_string(), "limits keep the pause: {v}");
    // Flags not given keep their value; `none` removes one.
    ok(&cli.run(&[
        "queues",
        "limit",
        "mail",
        "--key-max-running",
        "2",
        "--rate",
        "none",
    ]));
    let row = db
        .scalar("SELECT (max_running * 100 + key_max_running)::bigint FROM {schema}.queues WHERE name = 'mail' AND rate_limit IS NULL")
        .await;
    assert_eq!(row, 502);
    let list = ok(&cli.run(&["queues", "list", "--json"]));
    assert!(list.contains("\"key_max_running\":2"), "{list}");
    ok(&cli.run(&["queues", "resume", "mail"]));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.queues WHERE paused_at IS NOT NULL")
            .await,
        0
    );
    for (args, what) in [
        (
            &["queues", "limit", "mail", "--rate", "10/xyz"][..],
            "duration",
        ),
        (
            &["queues", "limit", "mail", "--max-running", "0"],
            "outside",
        ),
        (
            &["queues", "limit", "mail", "--max-running", "many"],
            "whole number",
        ),
        (&["queues", "limit", "mail"], "at least one"),
        (&["queues", "pause", "bad queue!"], "queue name"),
        (&["keys", "limit", "t1", "--rate", "0/1s"], "outside"),
    ] {
        assert_fails(&cli, args, 5, what);
    }
    assert_eq!(
        db.scalar("SELECT max_running::bigint FROM {schema}.queues")
            .await,
        5,
        "nothing changed"
    );
    ok(&cli.run(&[
        "keys",
        "limit",
        "tenant-1",
        "--max-running",
        "1",
        "--rate",
        "5/1m",
    ]));
    let keys = ok(&cli.run(&["keys", "list", "--json"]));
    assert!(
        keys.contains("tenant-1") && keys.contains("\"max_running\":1"),
        "{keys}"
    );
    ok(&cli.run(&[
        "keys",
        "limit",
        "tenant-1",
        "--max-running",
        "none",
        "--rate",
        "none",
    ]));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.key_limits").await,
        0
    );

    // Every change above is in the audit log, by the CLI's user, with before and after for
    // limits; `docket audit` reads it.
    let log: serde_json::Value =
        serde_json::from_str(&ok(&cli.run(&["audit", "--json", "--limit", "100"]))).unwrap();
    let actions: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for a in ["queue.pause", "queue.limits", "queue.resume", "key.limits"] {
        assert!(actions.contains(&a), "{a} missing from {actions:?}");
    }
    let limits = log
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["action"] == "queue.limits")
        .unwrap();
    assert!(
        limits["actor"].as_str().unwrap().starts_with("cli:"),
        "{limits}"
    );
    assert_eq!(limits["target"], "mail");
    assert_eq!(
        limits["detail"]["before"]["max_running"],
        serde_json::Value::Null
    );
    assert_eq!(limits["detail"]["after"]["max_running"], 5);
    let text = ok(&cli.run(&["audit"]));
    assert!(
        text.contains("queue.pause") && text.contains("cli:"),
        "{text}"
    );

    // The row a pause left: removable once no job of the queue waits or runs.
    ok(&cli.run(&["enqueue", "--queue", "mail", "--kind", "k", "--args", "{}"]));
    let o = cli.run(&["queues", "remove", "mail"]);
    assert_eq!(code(&o), 6, "{}", err(&o));
    assert!(err(&o).contains("pending or running"), "{}", err(&o));
    db.exec("DELETE FROM {schema}.jobs WHERE queue = 'mail'")
        .await;
    ok(&cli.run(&["queues", "remove", "mail"]));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.queues WHERE name = 'mail'")
            .await,
        0
    );
    let o = cli.run(&["queues", "remove", "mail"]);
    assert_eq!(code(&o), 4, "{}", err(&o));
}

#[tokio::test]
async fn a_dead_head_is_listed_and_skipped_from_the_command_line() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    for _ in 0..3 {
        ok(&cli.run(&[
            "enqueue",
            "--queue",
            "o",
            "--kind",
            "step",
            "--ordering-key",
            "order-9",
            "--concurrency-key",
            "t1",
        ]));
    }
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE ordering_key = 'order-9' AND concurrency_key = 't1'")
            .await,
        3
    );
    assert_eq!(
        code(&cli.run(&["enqueue", "--kind", "step", "--ordering-key", ""])),
        5,
        "an empty key is refused"
    );
    // The head dies (as a worker would record it after its last attempt).
    db.exec(
        "UPDATE {schema}.jobs SET state = 'dead', finished_at = now(), attempt = 1
         WHERE id = (SELECT min(id) FROM {schema}.jobs)",
    )
    .await;
    let head = db
        .scalar("SELECT min(id) FROM {schema}.jobs")
        .await
        .to_string();
    let blocked = ok(&cli.run(&["keys", "blocked"]));
    assert!(
        blocked.contains("order-9") && blocked.contains("jobs skip"),
        "{blocked}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&cli.run(&["keys", "blocked", "--json"]))).unwrap();
    assert_eq!(v[0]["head"].to_string(), head);
    assert_eq!(v[0]["waiting"], 2);
    ok(&cli.run(&["jobs", "skip", &head]));
    assert_eq!(ok(&cli.run(&["keys", "blocked", "--json"])).trim(), "[]");
    let o = cli.run(&["jobs", "skip", &head]);
    assert_eq!(code(&o), 6, "skipping twice is a conflict: {}", err(&o));
    assert_eq!(code(&cli.run(&["jobs", "skip", "999999"])), 4);
}

#[tokio::test]
async fn periodic_jobs_from_the_command_line() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    ok(&cli.run(&[
        "cron",
        "add",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
        "--kind",
        "report",
        "--args",
        "{\"full\":true}",
        "--missed",
        "all",
    ]));
    let list = ok(&cli.run(&["cron", "list"]));
    assert!(
        list.contains("nightly") && list.contains("Europe/Berlin"),
        "{list}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&cli.run(&["cron", "list", "--json"]))).unwrap();
    let next =
        chrono::DateTime::parse_from_rfc3339(v[0]["next_tick_at"].as_str().unwrap()).unwrap();
    let local = next.with_timezone(&chrono_tz::Europe::Berlin);
    assert_eq!(
        local.format("%H:%M").to_string(),
        "03:00",
        "03:00 in Berlin"
    );
    // A valid definition, then one bad part at a time.
    let add = |cron: &'static str, extra: &[&'static str]| {
        let mut v = vec!["cron", "add", "x", "--cron", cron, "--kind", "k"];
        v.extend_from_slice(extra);
        v
    };
    for (args, what) in [
        (add("61 * * * *", &[]), "cron expression"),
        (add("* * * * *", &["--tz", "Mars/Base"]), "time zone"),
        (add("* * * * *", &["--missed", "some"]), "missed"),
        (add("* * * * *", &["--args", "{"]), "JSON"),
        (
            vec![
                "cron",
                "add",
                "bad name",
                "--cron",
                "* * * * *",
                "--kind",
                "k",
            ],
            "periodic name",
        ),
    ] {
        assert_fails(&cli, &args, 5, what);
    }
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.periodic").await, 1);
    // Pause, run now, resume: each audited; unknown names are "not found".
    ok(&cli.run(&["cron", "pause", "nightly"]));
    assert!(
        ok(&cli.run(&["cron", "list"])).contains("UTC"),
        "paused since a time"
    );
    let ran: serde_json::Value =
        serde_json::from_str(&ok(&cli.run(&["cron", "run", "nightly", "--json"]))).unwrap();
    let job = ran["job"].as_i64().unwrap();
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) FROM {{schema}}.jobs WHERE id = {job} AND kind = 'report' \
             AND metadata->>'run_now' = 'true'"
        ))
        .await,
        1
    );
    ok(&cli.run(&["cron", "resume", "nightly"]));
    for bad in [["cron", "pause", "nope"], ["cron", "run", "nope"]] {
        assert_eq!(code(&cli.run(&bad)), 4);
    }
    let audit = ok(&cli.run(&["audit"]));
    for action in ["cron.pause", "cron.run", "cron.resume"] {
        assert!(audit.contains(action), "{action} audited: {audit}");
    }
    ok(&cli.run(&["cron", "remove", "nightly"]));
    assert_eq!(code(&cli.run(&["cron", "remove", "nightly"])), 4);
}

/// `docket jobs why`: the gate that holds a job, in words and as JSON; a hostile key is
/// printed escaped; an unknown id is "not found".
#[tokio::test]
async fn jobs_why_names_the_gate_with_job_data_escaped() {
    use docket_core::{ClaimRequest, NewJob, Store};
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let key = "acct\u{1b}[2J";
    let first = db
        .store
        .enqueue(&NewJob::new("q", "k", serde_json::json!({})).ordering_key(key))
        .await
        .unwrap()
        .id;
    let second = db
        .store
        .enqueue(&NewJob::new("q", "k", serde_json::json!({})).ordering_key(key))
        .await
        .unwrap()
        .id;
    let got = db
        .store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 5,
            owner: "w".into(),
            lease: std::time::Duration::from_secs(600),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let id = second.to_string();
    let text = ok(&cli.run(&["jobs", "why", &id]));
    assert!(text.contains("is pending, held by:"), "{text}");
    assert!(
        text.contains(&format!("job {first} before it is running")),
        "{text}"
    );
    assert!(
        text.contains("acct\\u{1b}[2J"),
        "the key is escaped: {text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "no raw escape reaches the terminal"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&cli.run(&["jobs", "why", &id, "--json"]))).unwrap();
    assert_eq!(v["gates"][0]["gate"], "ordering_behind");
    assert_eq!(v["gates"][0]["key"], key);
    assert_eq!(v["gates"][0]["job"], first.0);
    let running = ok(&cli.run(&["jobs", "why", &first.to_string()]));
    assert!(
        running.contains("is running, not waiting to run"),
        "{running}"
    );
    let o = cli.run(&["jobs", "why", "999999999"]);
    assert_eq!(code(&o), 4, "{}", err(&o));
}

/// `docket workers` lists a running `docket work` process from the registry — its owner,
/// pid and queues — and it is gone from the list as soon as the worker stops cleanly.
#[tokio::test]
async fn workers_lists_a_running_worker_until_it_stops() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    let (_dir, scratch) = scratch();
    let err_file = scratch.join("worker.err");
    let mut w = spawn_worker(
        &db,
        &[
            "--queue",
            "mail",
            "--queue",
            "sms",
            "--concurrency",
            "3",
            "--exec",
            "true",
        ],
        Some(&err_file),
    );
    let pid = w.id();
    let listed = || async {
        let o = cli.run(&["workers", "--json"]);
        assert_eq!(code(&o), 0, "{}", err(&o));
        serde_json::from_str::<serde_json::Value>(&out(&o)).unwrap()
    };
    eventually(
        std::time::Duration::from_secs(20),
        "the worker listed",
        || async { listed().await.as_array().is_some_and(|a| a.len() == 1) },
    )
    .await;
    let v = listed().await;
    assert_eq!(v[0]["pid"], pid);
    assert_eq!(v[0]["queues"], serde_json::json!(["mail", "sms"]));
    assert_eq!(v[0]["concurrency"], 6);
    let owner = owner_of(&std::fs::read_to_string(&err_file).unwrap()).expect("owner on stderr");
    assert_eq!(v[0]["owner"], owner);
    let text = ok(&cli.run(&["workers"]));
    assert!(text.contains(&owner) && text.contains("mail,sms"), "{text}");
    stop_all_cleanly(&mut [("worker", &mut w, &err_file)]);
    assert_eq!(
        listed().await,
        serde_json::json!([]),
        "a stopped worker leaves the live list"
    );
    // ... and is listed with --gone, with how it ended, and the leadership's last holder.
    let o = cli.run(&["workers", "--gone", "1h", "--json"]);
    let gone: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(gone[0]["owner"], owner, "{gone}");
    assert_eq!(gone[0]["status"]["status"], "stopped", "{gone}");
    let text = ok(&cli.run(&["workers", "--gone", "1h"]));
    assert!(text.contains("stopped 20"), "{text}");
    assert!(text.contains("leader: "), "{text}");
    assert_fails(&cli, &["workers", "--gone", "30d"], 5, "gone");
}

/// `docket jobs list` filters as the dashboard does (one parser): by kind, keys, a JSON path
/// into args, the last error and creation time; a bad filter is exit 5 naming it.
#[tokio::test]
async fn jobs_list_filters_like_the_dashboard() {
    let db = TestDb::new().await;
    let cli = Cli { db: &db };
    for (kind, args, key) in [
        ("send", r#"{"user_id": 7}"#, "u-7"),
        ("send", r#"{"user_id": 8}"#, "u-8"),
        ("bill", r#"{"user_id": 7}"#, "u-7"),
    ] {
        ok(&cli.run(&[
            "enqueue",
            "--queue",
            "q",
            "--kind",
            kind,
            "--args",
            args,
            "--ordering-key",
            key,
        ]));
    }
    let ids = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut full = vec!["jobs", "list", "--json"];
        full.extend_from_slice(args);
        let v: serde_json::Value = serde_json::from_str(&ok(&cli.run(&full))).unwrap();
        v.as_array().unwrap().clone()
    };
    assert_eq!(ids(&["--kind", "send"]).len(), 2);
    let seven = ids(&["--field", "args.user_id = 7"]);
    assert_eq!(seven.len(), 2);
    assert!(seven.iter().all(|j| j["args"]["user_id"] == 7));
    assert_eq!(ids(&["--kind", "send", "--ordering-key", "u-8"]).len(), 1);
    assert_eq!(
        ids(&["--kind", "send", "--since", "2999-01-01T00:00"]).len(),
        0
    );
    assert_eq!(ids(&["--kind", "send", "--limit", "1"]).len(), 1);
    assert_eq!(ids(&["--error", "nothing failed like this"]).len(), 0);
    // The parts of the pending jobs: none failed yet, none is scheduled for later.
    assert_eq!(ids(&["--state", "pending"]).len(), 3);
    assert_eq!(ids(&["--state", "retrying"]).len(), 0);
    ok(&cli.run(&[
        "enqueue", "--queue", "q", "--kind", "later", "--args", "{}", "--delay", "1h",
    ]));
    let later = ids(&["--state", "scheduled"]);
    assert_eq!(later.len(), 1, "{later:?}");
    assert_eq!(later[0]["kind"], "later");
    for (args, what) in [
        (&["jobs", "list", "--since", "yesterday"][..], "since"),
        (&["jobs", "list", "--field", "user_id"], "field"),
        (
            &["jobs", "list", "--kind", "k", "--priority", "high"],
            "priority",
        ),
    ] {
        assert_fails(&cli, args, 5, what);
    }
}
