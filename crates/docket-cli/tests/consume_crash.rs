//! The crash suite's worker tests on a JetStream stream (`docket consume`): a worker killed
//! with SIGKILL mid-run loses no job, and a worker paused past its lease (SIGSTOP) writes
//! nothing when it resumes — its successor's outcome stands.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::*;
use docket_core::NewJob;
use docket_nats::async_nats::{self, jetstream};
use docket_nats::{JobQueue, StreamSpec};
use docket_testkit::nats as tnats;
use serde_json::json;

/// The job stream (`<prefix>.>`) and its dead-letter stream (`<prefix>dead.>`).
struct Streams {
    js: jetstream::Context,
    jobs: String,
    dead: String,
    prefix: String,
}

impl Streams {
    async fn new() -> Streams {
        let nc = async_nats::connect(tnats::server_url()).await.unwrap();
        let js = jetstream::new(nc);
        let (jobs, prefix) = (tnats::stream_name(), tnats::subject_prefix());
        let dead = format!("{jobs}D");
        for (name, subject) in [
            (&jobs, format!("{prefix}.>")),
            (&dead, format!("{prefix}dead.>")),
        ] {
            let spec = StreamSpec::new(name.clone(), vec![subject]);
            docket_nats::stream::ensure(&js, &spec, Duration::from_secs(30))
                .await
                .unwrap();
        }
        Streams {
            js,
            jobs,
            dead,
            prefix,
        }
    }

    async fn enqueue(&self, n: usize) -> Vec<i64> {
        let q = JobQueue::new(self.js.clone(), &format!("{}.jobs", self.prefix)).unwrap();
        let mut ids = Vec::new();
        for i in 0..n {
            let id = q
                .enqueue_new(&NewJob::new("default", "work", json!({ "n": i })), None)
                .await
                .unwrap();
            ids.push(id.0);
        }
        ids
    }

    /// A `docket consume` of this stream with `args`, its stderr to `err`.
    fn consumer(&self, args: &[&str], err: &Path, env: &[(&str, &str)]) -> Proc {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_docket"));
        c.env_remove("DATABASE_URL")
            .env("DOCKET_NATS_URL", tnats::server_url())
            .envs(env.iter().copied())
            .args([
                "consume",
                "--stream",
                &self.jobs,
                "--dead-letter",
                &format!("{}dead.jobs", self.prefix),
                "--backoff-base",
                "50ms",
                "--backoff-cap",
                "100ms",
            ])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(err).unwrap());
        Proc::spawn(&mut c)
    }

    async fn dead_letters(&self) -> u64 {
        let mut s = self.js.get_stream(&self.dead).await.unwrap();
        s.info().await.unwrap().state.messages
    }

    async fn drop_it(self) {
        let _ = self.js.delete_stream(&self.jobs).await;
        let _ = self.js.delete_stream(&self.dead).await;
    }
}

/// Wraps `body` (run in a subshell, so its `exit` ends only it) so every run is logged as
/// `start JOB ATTEMPT` and `end JOB ATTEMPT EXIT`.
fn logged_rc(log: &Path, body: &str) -> String {
    format!(
        r#"echo "start $DOCKET_JOB_ID $DOCKET_ATTEMPT" >> {l}; ( {body} )
rc=$?; echo "end $DOCKET_JOB_ID $DOCKET_ATTEMPT $rc" >> {l}; exit $rc"#,
        l = log.display()
    )
}

/// The runs the log shows: job → attempts of the runs that ended with exit 0.
fn runs(log: &Path) -> BTreeMap<i64, Vec<i64>> {
    let mut out: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() == 4 && f[0] == "end" && f[3] == "0" {
            out.entry(f[1].parse().unwrap())
                .or_default()
                .push(f[2].parse().unwrap());
        }
    }
    out
}

/// A consumer SIGKILLed with ten jobs running: every job still runs to success (the killed
/// deliveries come back after the lease), none is dead-lettered, and only jobs that were in
/// flight at the kill ran twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_run_loses_no_job() {
    let st = Streams::new().await;
    let (_d, dir) = scratch();
    let log = dir.join("runs.log");
    let ids = st.enqueue(200).await;
    let body = logged_rc(&log, "cat > /dev/null; sleep 0.05");
    let a = st.consumer(
        &["--lease", "2s", "--concurrency", "10", "--exec", &body],
        &dir.join("a.err"),
        &[],
    );
    eventually(Duration::from_secs(60), "A ran 30 jobs", || async {
        runs(&log).len() >= 30
    })
    .await;
    signal(a.id(), "KILL");
    drop(a);
    let b = st.consumer(
        &[
            "--lease",
            "2s",
            "--concurrency",
            "10",
            "--drain",
            "--exec",
            &body,
        ],
        &dir.join("b.err"),
        &[],
    );
    let status = tokio::task::spawn_blocking(move || b.into_inner().wait())
        .await
        .unwrap()
        .unwrap();
    let b_err = std::fs::read_to_string(dir.join("b.err")).unwrap_or_default();
    assert!(status.success(), "B drained: {b_err}");
    let done = runs(&log);
    let missing: Vec<i64> = ids
        .iter()
        .filter(|i| !done.contains_key(i))
        .copied()
        .collect();
    assert!(missing.is_empty(), "jobs never run to success: {missing:?}");
    let twice: BTreeSet<i64> = done
        .iter()
        .filter(|(_, f)| f.len() > 1)
        .map(|(id, _)| *id)
        .collect();
    assert!(
        twice.len() <= 10,
        "only jobs in flight at the kill run again: {twice:?}"
    );
    assert_eq!(st.dead_letters().await, 0);
    st.drop_it().await;
}

/// A consumer paused (SIGSTOP) while its job runs, with its own guards off
/// (`DOCKET_NO_WORKER_GUARDS=1`: no watchdog stops the job), resumes after its successor
/// ran the job to success: its run ended meanwhile with a discard, which it must not write —
/// the job is not dead-lettered, and the resumed consumer says it wrote nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_consumer_cannot_overwrite_its_successor() {
    let st = Streams::new().await;
    let (_d, dir) = scratch();
    let log = dir.join("runs.log");
    let ids = st.enqueue(1).await;
    // The first delivery waits for the test's word on a FIFO (past the lease) and discards
    // (exit 65); later ones succeed. (Not reading its arguments first: A may be stopped
    // before it has written them.)
    let fifo = dir.join("release");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let body = logged_rc(
        &log,
        &format!(
            r#"if [ "$DOCKET_ATTEMPT" = 1 ]; then read _ < {}; exit 65; fi; cat > /dev/null"#,
            fifo.display()
        ),
    );
    let a_err = dir.join("a.err");
    let a = st.consumer(
        &["--lease", "2s", "--exec", &body],
        &a_err,
        &[("DOCKET_NO_WORKER_GUARDS", "1"), ("DOCKET_LOG", "warn")],
    );
    eventually(Duration::from_secs(30), "A started the job", || async {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("start ")
    })
    .await;
    signal(a.id(), "STOP");
    let b = st.consumer(&["--lease", "2s", "--exec", &body], &dir.join("b.err"), &[]);
    eventually(
        Duration::from_secs(30),
        "B ran the job to success",
        || async { runs(&log).get(&ids[0]).is_some_and(|f| !f.is_empty()) },
    )
    .await;
    // Only now does A's command end, while A is still stopped: its outcome waits for it.
    let release = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(release, "go\n"))
        .await
        .unwrap()
        .unwrap();
    eventually_explained(
        Duration::from_secs(30),
        "A's command ended (exit 65)",
        || async {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.starts_with("end"))
                .count()
                >= 2
        },
        || std::fs::read_to_string(&log).unwrap_or_default(),
    )
    .await;
    signal(a.id(), "CONT");
    let said = || {
        std::fs::read_to_string(&a_err)
            .unwrap_or_default()
            .contains("its outcome is not written")
    };
    eventually(
        Duration::from_secs(30),
        "A said it wrote nothing, or wrote a dead letter",
        || async { said() || st.dead_letters().await > 0 },
    )
    .await;
    // Anything A sent is in before its line; a dead letter would be there by now.
    let nc = async_nats::connect(tnats::server_url()).await.unwrap();
    nc.flush().await.unwrap();
    assert_eq!(
        st.dead_letters().await,
        0,
        "the stale discard was not written"
    );
    assert!(said());
    drop((a, b));
    st.drop_it().await;
}

/// Bad flags and an unreachable server get a clear error and consume nothing; a password in
/// the NATS URL is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_refuses_bad_flags_and_hides_its_secrets() {
    let run = |args: &[&str], url: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_docket"))
            .env_remove("DATABASE_URL")
            .env("DOCKET_NATS_URL", url)
            .arg("consume")
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let good = tnats::server_url();
    for (args, says) in [
        (
            vec!["--stream", "S", "--exec", "true", "--concurrency", "0"],
            "slots",
        ),
        (vec!["--stream", "a.b", "--exec", "true"], "names are 1-64"),
        (
            vec!["--stream", "S", "--exec", "true", "--lease", "10ms"],
            "ack wait",
        ),
        (
            vec!["--stream", "S", "--exec", "true", "--max-attempts", "0"],
            "max attempts",
        ),
        (
            vec!["--stream", "S", "--exec", "true", "--filter", "a..b"],
            "subject",
        ),
        (
            vec!["--stream", "S", "--exec", "true", "--dead-letter", "x.*"],
            "dead-letter",
        ),
        (
            vec!["--stream", "S", "--exec", "true", "--kill-grace", "2h"],
            "kill-grace",
        ),
    ] {
        let (code, err) = run(&args, &good);
        assert_ne!(code, Some(0), "{args:?} accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (code, err) = run(
        &["--stream", "S", "--exec", "true"],
        "nats://worker:hunter2secret@127.0.0.1:1",
    );
    assert_ne!(code, Some(0));
    assert!(
        !err.contains("hunter2secret"),
        "the password was printed: {err}"
    );
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

/// `docket consume --metrics-listen` serves its own counters: the jobs it ran, by outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_serves_its_job_counters() {
    let st = Streams::new().await;
    st.enqueue(3).await;
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_docket"));
    c.env_remove("DATABASE_URL")
        .env("DOCKET_NATS_URL", tnats::server_url())
        .args([
            "consume",
            "--stream",
            &st.jobs,
            "--dead-letter",
            &format!("{}dead.jobs", st.prefix),
            "--exec",
            "cat > /dev/null",
            "--metrics-listen",
            "127.0.0.1:0",
        ]);
    let (_consumer, addr) = spawn_and_wait(c, "docket: metrics on http://");
    let url = format!("http://{}", addr.trim());
    let line = r#"docket_jetstream_jobs_total{outcome="succeeded"} 3"#;
    eventually_explained(
        Duration::from_secs(30),
        "the endpoint counts the three jobs",
        || {
            let url = url.clone();
            async move { curl(&[&url]).contains(line) }
        },
        || curl(&[&url]),
    )
    .await;
    st.drop_it().await;
}
