//! Durable jobs under chaos, with real processes: worker processes (this test binary, run as
//! a worker by the ignored `chaos_worker_process`) are SIGKILLed every 1–2 s and SIGSTOPped
//! past their lease while they run jobs of five memoized steps, each step appending its
//! execution to a side-effect log before its record. Every job must end succeeded with the
//! composed output, and no step may run in a claim after the claim that recorded it. Then
//! jobs race signals against their timeouts: each resumes with one answer. The invariant
//! checker audits every write of both.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{JobContext, Registry, Shutdown, Signal, Worker, WorkerConfig};
use rand::Rng;
use serde_json::json;

const STEPS: i64 = 5;

/// One line per execution of a step's closure, written before the step is recorded:
/// `job step fence`, or `resume job answer` for a wait's answer.
fn append(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("side-effect log");
    f.write_all(format!("{line}\n").as_bytes()).expect("append");
}

/// Run as a worker process: `DOCKET_CHAOS_URL`, `DOCKET_CHAOS_SCHEMA`, `DOCKET_CHAOS_LOG`.
#[test]
#[ignore = "a worker process of the chaos tests below, started by them"]
fn chaos_worker_process() {
    let url = std::env::var("DOCKET_CHAOS_URL").expect("DOCKET_CHAOS_URL");
    let schema = std::env::var("DOCKET_CHAOS_SCHEMA").expect("DOCKET_CHAOS_SCHEMA");
    let log = PathBuf::from(std::env::var("DOCKET_CHAOS_LOG").expect("DOCKET_CHAOS_LOG"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let store = docket_postgres::PgStore::connect(&url, &schema, 6)
            .await
            .expect("connect");
        let mut reg = Registry::default();
        let l = log.clone();
        reg.register_fn("five_steps", move |args, ctx: JobContext| {
            let log = l.clone();
            async move {
                let n = args["n"].as_i64().unwrap_or(0);
                let mut sum = 0i64;
                for k in 0..STEPS {
                    let (log, fence, id) = (log.clone(), ctx.fence, ctx.id);
                    let v: i64 = ctx
                        .step(&format!("s{k}"), || async move {
                            append(&log, &format!("{id} {k} {fence}"));
                            tokio::time::sleep(Duration::from_millis(60)).await;
                            Ok(n * 10 + k)
                        })
                        .await?;
                    sum += v;
                }
                ctx.set_output(&sum)?;
                Ok(())
            }
        });
        let l = log.clone();
        reg.register_fn("race", move |args, ctx: JobContext| {
            let log = l.clone();
            async move {
                let ms = args["timeout_ms"].as_u64().unwrap_or(1000);
                let answer = match ctx
                    .wait_signal::<String>("go", Duration::from_millis(ms))
                    .await?
                {
                    Signal::Received(v) => v,
                    Signal::TimedOut => "timeout".to_string(),
                };
                append(&log, &format!("resume {} {answer}", ctx.id));
                ctx.set_output(&answer)?;
                Ok(())
            }
        });
        let mut cfg = WorkerConfig::default()
            .queue("steps", 8)
            .queue("race", 50)
            .lease(Duration::from_secs(2));
        cfg.poll_interval = Duration::from_millis(100);
        cfg.reap_interval = Duration::from_millis(250);
        let w = Worker::new(store, reg, cfg).expect("worker");
        w.run(Shutdown::on_signals()).await.expect("run");
    });
}

struct Workers {
    url: String,
    schema: String,
    log: PathBuf,
    procs: Vec<Child>,
}

impl Workers {
    fn spawn(&self) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "durable_chaos::chaos_worker_process",
                "--nocapture",
            ])
            .env("DOCKET_CHAOS_URL", &self.url)
            .env("DOCKET_CHAOS_SCHEMA", &self.schema)
            .env("DOCKET_CHAOS_LOG", &self.log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a worker")
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn signal(p: &Child, sig: i32) {
    #[allow(unsafe_code)]
    // SAFETY: kill(2) on a child of ours that has not been waited for.
    unsafe {
        libc::kill(p.id() as i32, sig);
    }
}

/// Every 1–2 s a fault on a random worker: a pause past its lease (the first, and every
/// fourth after), otherwise a kill (and a new worker in its place); until `done` says so or
/// the deadline passes. Returns (kills, pauses).
async fn chaos_until<F, Fut>(w: &mut Workers, within: Duration, mut done: F) -> (u32, u32)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    let (mut kills, mut stops) = (0, 0);
    loop {
        let pause = rand::thread_rng().gen_range(1000..2000);
        let until = Instant::now() + Duration::from_millis(pause);
        while Instant::now() < until {
            if done().await {
                return (kills, stops);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(Instant::now() < deadline, "not done within {within:?}");
        let i = rand::thread_rng().gen_range(0..w.procs.len());
        // The first fault and every fourth after it is a pause, the rest are kills.
        if (kills + stops) % 4 == 0 {
            // Stopped past its 2 s lease: its jobs are reaped and claimed elsewhere; when it
            // resumes, its writes are fenced.
            signal(&w.procs[i], libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(2600)).await;
            signal(&w.procs[i], libc::SIGCONT);
            stops += 1;
        } else {
            signal(&w.procs[i], libc::SIGKILL);
            let _ = w.procs[i].wait();
            w.procs[i] = w.spawn();
            kills += 1;
        }
    }
}

async fn setup() -> (TestDb, Workers, tempfile::TempDir) {
    let db = TestDb::new().await;
    // Every write the workers' statements make is audited (docket_testkit::checker).
    docket_testkit::checker::install_audit(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let mut w = Workers {
        url: db.url.clone(),
        schema: db.schema.clone(),
        log: dir.path().join("effects.log"),
        procs: Vec::new(),
    };
    for _ in 0..3 {
        let p = w.spawn();
        w.procs.push(p);
    }
    (db, w, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_survive_kills_and_pauses_and_never_run_again_once_recorded() {
    let (db, mut w, _dir) = setup().await;
    let s = &db.store;
    let n = 500i64;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new("steps", "five_steps", json!({ "n": i })).backoff(Backoff {
                base: Duration::from_millis(100),
                cap: Duration::from_millis(200),
            })
        })
        .collect();
    let ids: Vec<JobId> = s
        .enqueue_many(&jobs)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let count = || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs_all WHERE state = 'succeeded'")
            .await
    };
    let (kills, stops) = chaos_until(&mut w, Duration::from_secs(240), || async {
        count().await == n
    })
    .await;
    assert!(kills > 0 && stops > 0, "{kills} kills, {stops} pauses");
    // No write — completion, heartbeat, step record — by a token that did not hold its job.
    docket_testkit::checker::check_writes(&db, &["succeeded"]).await;

    // Every job succeeded, with the composed output.
    for (i, id) in ids.iter().enumerate() {
        let o = s.job_output(*id).await.unwrap();
        let i = i as i64;
        let want: i64 = (0..STEPS).map(|k| i * 10 + k).sum();
        assert_eq!(o.state, JobState::Succeeded, "job {id}");
        assert_eq!(o.output, Some(json!(want)), "job {id}");
    }
    // No step ran in a claim after the one that recorded it.
    let recorded: Vec<(i64, String, i32)> = sqlx::query_as(&format!(
        "SELECT job_id, name, attempt FROM {}.job_steps",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(recorded.len() as i64, n * STEPS, "every step recorded once");
    let at: std::collections::HashMap<(i64, String), i32> =
        recorded.into_iter().map(|(j, s, a)| ((j, s), a)).collect();
    let text = std::fs::read_to_string(&w.log).unwrap();
    let (mut runs, mut reruns) = (0usize, 0usize);
    for line in text.lines() {
        let f: Vec<i64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        let (job, step, fence) = (f[0], format!("s{}", f[1]), f[2] as i32);
        let rec = at[&(job, step.clone())];
        assert!(
            fence <= rec,
            "job {job} {step} ran in claim {fence} after claim {rec} recorded it"
        );
        runs += 1;
        if fence < rec {
            reruns += 1;
        }
    }
    eprintln!(
        "{n} jobs × {STEPS} steps: {kills} kills, {stops} pauses past the lease; \
         {runs} step executions, {reruns} by claims that lost the job before recording"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_racing_timeouts_resume_each_wait_once() {
    let (db, mut w, _dir) = setup().await;
    let s = db.store.clone();
    let n = 1000usize;
    let mut rng = rand::thread_rng();
    let timeouts: Vec<u64> = (0..n).map(|_| rng.gen_range(500..1500)).collect();
    let jobs: Vec<NewJob> = timeouts
        .iter()
        .map(|t| NewJob::new("race", "race", json!({ "timeout_ms": t })))
        .collect();
    let ids: Vec<JobId> = s
        .enqueue_many(&jobs)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    // Signals sent around the waits' timeouts, from a task of their own.
    let sender = {
        let (s, ids) = (s.clone(), ids.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let mut order: Vec<(u64, JobId)> = ids
                .iter()
                .map(|&id| (rand::thread_rng().gen_range(300..1800), id))
                .collect();
            order.sort();
            for (at, id) in order {
                let t = start + Duration::from_millis(at);
                tokio::time::sleep_until(t.into()).await;
                // A finished job refuses the signal: it answered already (its timeout).
                match s.signal(id, "go", &json!("signal")).await {
                    Ok(_) | Err(StoreError::WrongState { .. }) => {}
                    Err(e) => panic!("signal {id}: {e}"),
                }
            }
        })
    };
    let count = || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs_all WHERE state = 'succeeded'")
            .await
    };
    chaos_until(&mut w, Duration::from_secs(180), || async {
        count().await == n as i64
    })
    .await;
    sender.await.unwrap();
    // No park, answer or completion written by a token that did not hold its job.
    docket_testkit::checker::check_writes(&db, &["succeeded"]).await;
    let text = std::fs::read_to_string(&w.log).unwrap();
    let mut answers: std::collections::HashMap<i64, Vec<String>> = Default::default();
    for line in text.lines().filter_map(|l| l.strip_prefix("resume ")) {
        let (id, answer) = line.split_once(' ').unwrap();
        answers
            .entry(id.parse().unwrap())
            .or_default()
            .push(answer.into());
    }
    let (mut signalled, mut timed_out) = (0, 0);
    for id in &ids {
        let out = s.job_output(*id).await.unwrap().output.unwrap();
        let seen = &answers[&id.0];
        assert!(
            seen.iter().all(|a| json!(a) == out),
            "job {id} resumed with {seen:?}, its output is {out}"
        );
        if out == json!("signal") {
            signalled += 1;
        } else {
            timed_out += 1;
        }
    }
    eprintln!("{n} waits: {signalled} resumed by their signal, {timed_out} by their timeout");
    assert!(signalled > 0 && timed_out > 0, "the race was not a race");
}
