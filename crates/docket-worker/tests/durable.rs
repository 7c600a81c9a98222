//! Durable jobs through the runtime, on every engine. Outputs: a handler's `ctx.set_output` is written by
//! its fenced completion and read back typed (`store.output::<T>`, `store.wait_output::<T>`)
//! although the worker deletes plain successes; an output over the configured bound ends the
//! job dead with the reason; an in-transaction handler's output commits with its writes;
//! progress a running handler reports reaches the job with the next heartbeat; a step
//! recorded by one run is not run again by the next, and a name used twice fails the job; a
//! durable sleep parks the job until its time; a wait for a signal resumes once, with the
//! signal or with its timeout.

use std::sync::Arc;
use std::time::Duration;

use docket_core::*;
use docket_testkit::conformance::{Harness, MySqlHarness, PgHarness, SqliteHarness};
use docket_worker::{
    JobContext, JobError, JobResult, OutputError, Outputs, Registry, RunReport, Shutdown, Signal,
    TxJob, Worker, WorkerConfig,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    charge: String,
    cents: i64,
}

/// A job run inside its completing transaction that records an output.
#[derive(Serialize, Deserialize)]
struct Booked {
    n: i64,
}

impl<S: InTransaction> TxJob<S> for Booked {
    const KIND: &'static str = "booked";
    async fn run(self, ctx: JobContext, _tx: &mut S::Conn) -> JobResult {
        ctx.set_output(&json!({"booked": self.n}))?;
        Ok(())
    }
}

fn config() -> WorkerConfig {
    // The default completion deletes a plain success: outputs must survive it.
    let mut c = WorkerConfig::default()
        .queue("q", 4)
        .lease(Duration::from_secs(10));
    c.poll_interval = Duration::from_millis(100);
    c
}

fn registry<S: InTransaction>() -> Registry<S> {
    let mut r = Registry::default();
    r.register_fn("charge", |args, ctx: JobContext| async move {
        let cents = args["cents"].as_i64().unwrap_or(0);
        ctx.set_output(&Receipt {
            charge: format!("ch_{}", ctx.id),
            cents,
        })?;
        Ok(())
    });
    r.register_fn("plain", |_, _| async { Ok(()) });
    r.register_fn("huge", |_, ctx: JobContext| async move {
        ctx.set_output(&"x".repeat(500))?;
        Ok(())
    });
    r.register_fn("fails_after_output", |_, ctx: JobContext| async move {
        ctx.set_output(&1)?;
        Err(JobError::discard("no"))
    });
    r.register_tx::<Booked>();
    r
}

async fn run_until<S: Store>(
    store: S,
    cfg: WorkerConfig,
    reg: Registry<S>,
    done: impl std::future::Future<Output = ()>,
) -> RunReport {
    let worker = Arc::new(Worker::new(store, reg, cfg).expect("worker"));
    let shutdown = Shutdown::default();
    let (w, s) = (worker.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w.run(s).await.expect("run") });
    tokio::time::timeout(Duration::from_secs(60), done)
        .await
        .expect("done in time");
    shutdown.graceful.cancel();
    task.await.expect("worker task")
}

/// The job's state, `None` once its row is gone.
async fn state_of<S: Store>(s: &S, id: JobId) -> Option<JobState> {
    s.job_output(id).await.map(|o| o.state).ok()
}

/// Polls until `cond` holds (the testkit's one waiting helper, bounded).
async fn until<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    docket_testkit::eventually(Duration::from_secs(50), what, cond).await
}

async fn put<S: Store>(s: &S, kind: &str, args: serde_json::Value) -> JobId {
    s.enqueue(&NewJob::new("q", kind, args)).await.unwrap().id
}

async fn outputs_are_written_and_read_back<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let charge = put(&s, "charge", json!({"cents": 1250})).await;
    let plain = put(&s, "plain", json!({})).await;
    let booked = put(&s, "booked", json!({"n": 7})).await;
    let failed = put(&s, "fails_after_output", json!({})).await;
    assert_eq!(
        s.output::<Receipt>(charge).await.unwrap(),
        None,
        "not run yet"
    );
    // A waiter from before the run: woken by the completion (or its next read).
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            s.wait_output::<Receipt>(charge, Duration::from_secs(60))
                .await
        })
    };
    let s2 = s.clone();
    let report = run_until(s.clone(), config(), registry(), async move {
        until("every job ended", || async {
            state_of(&s2, charge).await == Some(JobState::Succeeded)
                && state_of(&s2, booked).await == Some(JobState::Succeeded)
                && state_of(&s2, failed).await == Some(JobState::Dead)
                && state_of(&s2, plain).await.is_none()
        })
        .await;
    })
    .await;
    assert_eq!(report.metrics.fenced, 0, "{report:?}");
    assert_eq!(report.metrics.completed, 3, "{report:?}");
    let want = Receipt {
        charge: format!("ch_{charge}"),
        cents: 1250,
    };
    assert_eq!(waiter.await.unwrap().unwrap(), want);
    assert_eq!(s.output::<Receipt>(charge).await.unwrap(), Some(want));
    assert_eq!(
        s.output::<serde_json::Value>(booked).await.unwrap(),
        Some(json!({"booked": 7}))
    );
    // A plain success is deleted as before; a failed run records nothing.
    assert!(matches!(
        s.output::<Receipt>(plain).await,
        Err(OutputError::Store(StoreError::NotFound(_)))
    ));
    assert!(matches!(
        s.output::<i64>(failed).await,
        Err(OutputError::Ended {
            state: JobState::Dead,
            ..
        })
    ));
    assert!(matches!(
        s.output::<Vec<String>>(charge).await,
        Err(OutputError::Decode { .. })
    ));
}

async fn an_output_over_the_bound_ends_the_job_dead<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = put(&s, "huge", json!({})).await;
    let cfg = config().max_output_bytes(100);
    let s2 = s.clone();
    run_until(s.clone(), cfg, registry(), async move {
        until("the job is dead", || async {
            state_of(&s2, id).await == Some(JobState::Dead)
        })
        .await;
    })
    .await;
    let rec = s.get(id).await.unwrap();
    let msg = &rec.errors.last().expect("an error").message;
    assert!(msg.contains("output") && msg.contains("100"), "{msg}");
    let err = s
        .wait_output::<String>(id, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, OutputError::Ended { .. }), "{err:?}");
}

async fn a_wait_for_a_job_nobody_runs_times_out<H: Harness>() {
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = put(&s, "charge", json!({})).await;
    let err = s
        .wait_output::<Receipt>(id, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, OutputError::TimedOut { .. }), "{err:?}");
    assert!(matches!(
        s.wait_output::<Receipt>(JobId(424_242), Duration::from_secs(5))
            .await,
        Err(OutputError::Store(StoreError::NotFound(_)))
    ));
}

async fn progress_reaches_the_job_while_it_runs<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = put(&s, "slow", json!({})).await;
    let go = Arc::new(tokio::sync::Notify::new());
    let mut reg = registry::<H::S>();
    let g = go.clone();
    reg.register_fn("slow", move |_, ctx: JobContext| {
        let g = g.clone();
        async move {
            ctx.progress(10.0, "starting");
            ctx.progress(250.0, "step 2 of 3: \u{1b}[2J");
            g.notified().await;
            Ok(())
        }
    });
    let mut cfg = config();
    cfg.heartbeat_interval = Duration::from_millis(100);
    let s2 = s.clone();
    let g = go.clone();
    run_until(s.clone(), cfg, reg, async move {
        until("progress is written", || async {
            s2.get(id).await.unwrap().progress.is_some()
        })
        .await;
        let p = s2.get(id).await.unwrap().progress.unwrap();
        // The latest report, clamped; the raw text is kept, escaped when shown.
        assert_eq!(
            (p.percent, p.message.as_str()),
            (100.0, "step 2 of 3: \u{1b}[2J")
        );
        g.notify_one();
        until("the job is done", || async {
            state_of(&s2, id).await.is_none()
        })
        .await;
    })
    .await;
}

async fn recorded_steps_are_not_run_again<H: Harness>()
where
    H::S: InTransaction,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = s
        .enqueue(
            &NewJob::new("q", "three_steps", json!({})).backoff(Backoff {
                base: Duration::from_millis(10),
                cap: Duration::from_millis(10),
            }),
        )
        .await
        .unwrap()
        .id;
    let twice = put(&s, "twice", json!({})).await;
    let runs: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let mut reg = registry::<H::S>();
    let r = runs.clone();
    reg.register_fn("three_steps", move |_, ctx: JobContext| {
        let r = r.clone();
        async move {
            let a: i64 = ctx
                .step("a", || async {
                    r[0].fetch_add(1, Ordering::SeqCst);
                    Ok(1)
                })
                .await?;
            let b: String = ctx
                .step("b", || async {
                    // Fails on its first run: the job is retried, "a" is not run again.
                    if r[1].fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(JobError::retry("b failed once"));
                    }
                    Ok(format!("b after {a}"))
                })
                .await?;
            let c: Vec<i64> = ctx
                .step("c", || async {
                    r[2].fetch_add(1, Ordering::SeqCst);
                    Ok(vec![a, 3])
                })
                .await?;
            ctx.set_output(&json!({"a": a, "b": b, "c": c}))?;
            Ok(())
        }
    });
    reg.register_fn("twice", |_, ctx: JobContext| async move {
        ctx.step("x", || async { Ok(1) }).await?;
        ctx.step("x", || async { Ok(2) }).await?;
        Ok(())
    });
    let s2 = s.clone();
    run_until(s.clone(), config(), reg, async move {
        until("both jobs ended", || async {
            state_of(&s2, id).await == Some(JobState::Succeeded)
                && state_of(&s2, twice).await == Some(JobState::Dead)
        })
        .await;
    })
    .await;
    let counts: Vec<usize> = runs.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [1, 2, 1], "a recorded step ran again");
    assert_eq!(
        s.output::<serde_json::Value>(id).await.unwrap(),
        Some(json!({"a": 1, "b": "b after 1", "c": [1, 3]}))
    );
    let steps = s.job_steps(id).await.unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(
        steps[0].attempt < steps[1].attempt,
        "b was recorded by the second run"
    );
    let rec = s.get(twice).await.unwrap();
    let msg = &rec.errors.last().expect("an error").message;
    assert!(msg.contains("used twice"), "{msg}");
}

/// Steps of many jobs running at once share batched writes: each step still gets its own
/// value back (also two steps of one job awaited together), and each job's record holds
/// exactly its own steps.
async fn steps_of_many_jobs_each_get_their_own_record<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let mut reg = registry::<H::S>();
    reg.register_fn("stepper", |args, ctx: JobContext| async move {
        let n = args["n"].as_i64().unwrap_or(-1);
        for i in 0..4 {
            let got: String = ctx
                .step(&format!("s{i}"), || async move { Ok(format!("{n}:{i}")) })
                .await?;
            assert_eq!(got, format!("{n}:{i}"), "a step got another's value");
        }
        let (x, y) = tokio::join!(
            ctx.step("x", || async move { Ok(n * 10) }),
            ctx.step("y", || async move { Ok(n * 100) })
        );
        let (x, y): (i64, i64) = (x?, y?);
        ctx.set_output(&json!([x, y]))?;
        Ok(())
    });
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push((n, put(&s, "stepper", json!({ "n": n })).await));
    }
    let cfg = config().queue("q", 16);
    let (s2, all) = (s.clone(), ids.clone());
    run_until(s.clone(), cfg, reg, async move {
        until("every stepper succeeded", || async {
            for (_, id) in &all {
                if state_of(&s2, *id).await != Some(JobState::Succeeded) {
                    return false;
                }
            }
            true
        })
        .await;
    })
    .await;
    for (n, id) in ids {
        assert_eq!(
            s.output::<serde_json::Value>(id).await.unwrap(),
            Some(json!([n * 10, n * 100]))
        );
        let steps = s.job_steps(id).await.unwrap();
        let mut got: Vec<(String, serde_json::Value)> =
            steps.into_iter().map(|r| (r.name, r.output)).collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want: Vec<(String, serde_json::Value)> = (0..4)
            .map(|i| (format!("s{i}"), json!(format!("{n}:{i}"))))
            .collect();
        want.push(("x".into(), json!(n * 10)));
        want.push(("y".into(), json!(n * 100)));
        assert_eq!(got, want, "job {n}'s steps");
    }
}

async fn a_durable_sleep_parks_the_job_until_its_time<H: Harness>()
where
    H::S: InTransaction,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = put(&s, "sleepy", json!({})).await;
    let runs: Arc<[AtomicUsize; 2]> = Arc::new(Default::default());
    let mut reg = registry::<H::S>();
    let r = runs.clone();
    reg.register_fn("sleepy", move |_, ctx: JobContext| {
        let r = r.clone();
        async move {
            ctx.step("a", || async {
                r[0].fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await?;
            ctx.sleep("cool-off", Duration::from_secs(3600)).await?;
            ctx.step("b", || async {
                r[1].fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await?;
            ctx.set_output(&"woke")?;
            Ok(())
        }
    });
    let s2 = s.clone();
    // Borrowed, not moved into the block: the harness (a SQLite case's file) must outlive
    // the reads after the run, which may open a new connection.
    let h = &h;
    let report = run_until(s.clone(), config(), reg, async move {
        // Parked: pending, sleeping for an hour, holding no slot.
        until("the job sleeps", || async {
            matches!(
                s2.why(id).await.unwrap().gates.first(),
                Some(Gate::Sleeping { .. })
            )
        })
        .await;
        match s2.why(id).await.unwrap().gates.first() {
            Some(Gate::Sleeping { name, in_s, .. }) => {
                assert_eq!(name, "cool-off");
                assert!(*in_s > 3500.0, "{in_s}");
            }
            other => panic!("{other:?}"),
        }
        let rec = s2.get(id).await.unwrap();
        assert_eq!((rec.state, rec.runs()), (JobState::Pending, 0), "{rec:?}");
        // The hour passes (every time of the store moves back): it runs again, from the top.
        h.advance(Duration::from_secs(3601)).await;
        until("the job woke and succeeded", || async {
            state_of(&s2, id).await == Some(JobState::Succeeded)
        })
        .await;
    })
    .await;
    assert_eq!(report.metrics.snoozed, 1, "{report:?}");
    let counts: Vec<usize> = runs.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [1, 1], "a recorded step ran again");
    assert_eq!(
        s.output::<String>(id).await.unwrap().as_deref(),
        Some("woke")
    );
    let rec = s.get(id).await.unwrap();
    assert_eq!(rec.runs(), 1, "the sleep spent no attempt: {rec:?}");
    assert!(rec.errors.is_empty(), "{:?}", rec.errors);
}

async fn a_wait_resumes_once_with_its_signal_or_its_timeout<H: Harness>()
where
    H::S: InTransaction,
{
    let h = H::fresh().await;
    let s = h.store().clone();
    let signalled = put(&s, "approval", json!({})).await;
    let timed_out = put(&s, "approval", json!({})).await;
    let early = put(&s, "approval", json!({})).await;
    // Sent before its job ever runs: found at once.
    assert!(
        s.signal(early, "approved", &json!("early"))
            .await
            .unwrap()
            .new
    );
    let mut reg = registry::<H::S>();
    reg.register_fn("approval", |_, ctx: JobContext| async move {
        let answer = match ctx
            .wait_signal::<String>("approved", Duration::from_secs(3600))
            .await?
        {
            Signal::Received(by) => format!("approved by {by}"),
            Signal::TimedOut => "timed out".to_string(),
        };
        ctx.set_output(&answer)?;
        Ok(())
    });
    let s2 = s.clone();
    let state = |id| {
        let s2 = s2.clone();
        async move { state_of(&s2, id).await }
    };
    let waiting = |id| {
        let s2 = s2.clone();
        async move {
            matches!(
                s2.why(id).await.unwrap().gates.first(),
                Some(Gate::WaitingForSignal { .. })
            )
        }
    };
    let s3 = s.clone();
    // Borrowed, not moved into the block: the harness (a SQLite case's file) must outlive
    // the reads after the run, which may open a new connection.
    let h = &h;
    run_until(s.clone(), config(), reg, async move {
        until("both jobs wait", || async {
            waiting(signalled).await && waiting(timed_out).await
        })
        .await;
        let sent = s3
            .signal(signalled, "approved", &json!("ann"))
            .await
            .unwrap();
        assert_eq!((sent.new, sent.woke), (true, true));
        until("the signalled job ran", || async {
            state(signalled).await == Some(JobState::Succeeded)
        })
        .await;
        // The other one's hour passes.
        h.advance(Duration::from_secs(3601)).await;
        until("the other jobs ran", || async {
            state(timed_out).await == Some(JobState::Succeeded)
                && state(early).await == Some(JobState::Succeeded)
        })
        .await;
    })
    .await;
    let out = |id| {
        let s = s.clone();
        async move { s.output::<String>(id).await.unwrap().unwrap() }
    };
    assert_eq!(out(signalled).await, "approved by ann");
    assert_eq!(out(timed_out).await, "timed out");
    assert_eq!(out(early).await, "approved by early");
    for id in [signalled, timed_out] {
        let rec = s.get(id).await.unwrap();
        assert_eq!(rec.runs(), 1, "the wait spent no attempt: {rec:?}");
    }
    // A late signal to a finished job is refused.
    assert!(matches!(
        s.signal(timed_out, "approved", &json!("late")).await,
        Err(StoreError::WrongState { .. })
    ));
}

async fn a_timed_out_wait_keeps_its_answer<H: Harness>()
where
    H::S: InTransaction,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let h = H::fresh().await;
    let s = h.store().clone();
    let id = s
        .enqueue(
            &NewJob::new("q", "answer_once", json!({})).backoff(Backoff {
                base: Duration::from_secs(3600),
                cap: Duration::from_secs(3600),
            }),
        )
        .await
        .unwrap()
        .id;
    let fails = Arc::new(AtomicUsize::new(0));
    let mut reg = registry::<H::S>();
    let f = fails.clone();
    reg.register_fn("answer_once", move |_, ctx: JobContext| {
        let f = f.clone();
        async move {
            let answer = match ctx
                .wait_signal::<String>("approved", Duration::from_secs(3600))
                .await?
            {
                Signal::Received(by) => format!("approved by {by}"),
                Signal::TimedOut => "timed out".to_string(),
            };
            // Fails once after the answer: the retry must get the same answer.
            if f.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(JobError::retry("after the wait"));
            }
            ctx.set_output(&answer)?;
            Ok(())
        }
    });
    let s2 = s.clone();
    // Borrowed, not moved into the block: the harness (a SQLite case's file) must outlive
    // the reads after the run, which may open a new connection.
    let h = &h;
    run_until(s.clone(), config(), reg, async move {
        until("the job waits", || async {
            matches!(
                s2.why(id).await.unwrap().gates.first(),
                Some(Gate::WaitingForSignal { .. })
            )
        })
        .await;
        h.advance(Duration::from_secs(3601)).await;
        until("the run after the timeout failed", || async {
            !s2.get(id).await.unwrap().errors.is_empty()
        })
        .await;
        // Answered (timed out) and failed after: a signal now is kept but wakes nothing.
        let sent = s2.signal(id, "approved", &json!("ann")).await.unwrap();
        assert_eq!((sent.new, sent.woke), (true, false));
        h.advance(Duration::from_secs(3601)).await;
        until("the retry succeeded", || async {
            state_of(&s2, id).await == Some(JobState::Succeeded)
        })
        .await;
    })
    .await;
    assert_eq!(
        s.output::<String>(id).await.unwrap().as_deref(),
        Some("timed out"),
        "one wait, one answer"
    );
}

/// One test per case for harness `$h`.
macro_rules! cases {
    ($h:ty; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                super::$case::<$h>().await;
            }
        )*
    };
}

/// Every case, for harness `$h`.
macro_rules! every_case {
    ($h:ty) => {
        cases!($h;
            outputs_are_written_and_read_back,
            an_output_over_the_bound_ends_the_job_dead,
            progress_reaches_the_job_while_it_runs,
            recorded_steps_are_not_run_again,
            steps_of_many_jobs_each_get_their_own_record,
            a_durable_sleep_parks_the_job_until_its_time,
            a_wait_resumes_once_with_its_signal_or_its_timeout,
            a_timed_out_wait_keeps_its_answer,
            a_wait_for_a_job_nobody_runs_times_out,
        );
    };
}

mod postgres {
    use super::*;
    every_case!(PgHarness);
}

mod sqlite {
    use super::*;
    every_case!(SqliteHarness);
}

mod mysql {
    use super::*;
    every_case!(MySqlHarness);
}

/// PostgreSQL: every waiter of a store shares one LISTEN connection, so thirty callers
/// waiting at once on a pool of two connections are all woken by their jobs' completions
/// (one connection each would leave the pool empty and the waiters timing out on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_share_one_listening_connection() {
    let h = PgHarness::fresh().await;
    let small = h.db.second_store(2).await;
    let mut ids = Vec::new();
    for n in 0..30 {
        ids.push(put(h.store(), "charge", json!({"cents": n})).await);
    }
    let waiters: Vec<_> = ids
        .iter()
        .map(|&id| {
            let s = small.clone();
            tokio::spawn(async move { s.wait_output::<i64>(id, Duration::from_secs(60)).await })
        })
        .collect();
    let s = h.store();
    let claimed = s
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 30,
            owner: "w".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 30);
    let outputs: Vec<Output> = claimed
        .iter()
        .map(|j| Output {
            lease: j.lease(),
            value: json!(j.id.0 * 10),
        })
        .collect();
    assert_eq!(
        s.complete_outputs("w", &outputs)
            .await
            .unwrap()
            .applied
            .len(),
        30
    );
    for (w, id) in waiters.into_iter().zip(&ids) {
        let v = tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("woken in time")
            .unwrap()
            .unwrap();
        assert_eq!(v, id.0 * 10);
    }
}
