//! Workflows through the runtime, on every engine: a worker with the library's defaults
//! (plain successes deleted) runs a graph's nodes after their parents, keeps each node's row
//! and output, hands a child its parents' outputs by name (`ctx.dep_output`), and a failed
//! node's `cancel` dependents never run while the rest of the graph finishes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket_core::workflow::{Dep, OnFailure, Workflow};
use docket_core::*;
use docket_testkit::conformance::{Harness, MySqlHarness, PgHarness, SqliteHarness};
use docket_worker::{JobContext, JobError, Outputs, Registry, Shutdown, Worker, WorkerConfig};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    charge: String,
    cents: i64,
}

/// Which nodes ran, in the order they started (by kind; the `join` kind by node name).
type Ran = Arc<Mutex<Vec<String>>>;

fn registry<S: Store>(ran: Ran) -> Registry<S> {
    let mut r = Registry::default();
    let log = ran.clone();
    r.register_fn("charge", move |args, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("charge".into());
            ctx.set_output(&Receipt {
                charge: format!("ch_{}", ctx.id),
                cents: args["cents"].as_i64().unwrap_or(0),
            })?;
            Ok(())
        }
    });
    let log = ran.clone();
    r.register_fn("email", move |_, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("email".into());
            let receipt: Receipt = ctx
                .dep_output("charge")
                .await?
                .ok_or_else(|| JobError::discard("charge left no receipt"))?;
            ctx.set_output(&format!("emailed {}", receipt.charge))?;
            Ok(())
        }
    });
    let log = ran.clone();
    r.register_fn("join", move |_, ctx: JobContext| {
        let log = log.clone();
        async move {
            // By node: two nodes run this kind ("join" and "after_fanout"), and the order
            // checked below is the "join" node's.
            let node = ctx.workflow().map_or("join", |(_, n)| n).to_string();
            log.lock().unwrap().push(node);
            let deps = ctx.deps().await?;
            let all: Vec<String> = deps
                .iter()
                .map(|d| format!("{}={}", d.node, d.state))
                .collect();
            ctx.set_output(&all)?;
            Ok(())
        }
    });
    let log = ran.clone();
    r.register_fn("fan", move |_, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("fan".into());
            let leaf = |i: i64| NewJob::new("q", "leaf", json!({ "i": i }));
            ctx.spawn(
                "leaves",
                (1..=3).map(|i| (format!("leaf{i}"), leaf(i))).collect(),
                Some(("sum".into(), NewJob::new("q", "sum", json!({})))),
            )
            .await?;
            Ok(())
        }
    });
    let log = ran.clone();
    r.register_fn("leaf", move |args, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("leaf".into());
            ctx.set_output(&args["i"].as_i64().unwrap_or(0))?;
            Ok(())
        }
    });
    let log = ran.clone();
    r.register_fn("sum", move |_, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("sum".into());
            let total: i64 = ctx
                .deps()
                .await?
                .iter()
                .filter_map(|d| d.output.as_ref().and_then(|v| v.as_i64()))
                .sum();
            ctx.set_output(&total)?;
            Ok(())
        }
    });
    let log = ran;
    r.register_fn("fails", move |_, _| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push("fails".into());
            Err(JobError::discard("declined"))
        }
    });
    r
}

async fn a_workflow_runs_through_a_worker_with_the_defaults<H: Harness>() {
    let h = H::fresh().await;
    let s = h.store().clone();
    let job = |kind: &str, args| NewJob::new("q", kind, args);
    let g = Workflow::new("signup")
        .add("charge", job("charge", json!({"cents": 1250})))
        .add_after("email", job("email", json!({})), ["charge"])
        .add("risky", job("fails", json!({})))
        .add_after("after_risky", job("email", json!({})), ["risky"])
        .add("fanout", job("fan", json!({})))
        .add_after("after_fanout", job("join", json!({})), ["fanout"])
        .add_after(
            "join",
            job("join", json!({})),
            [
                Dep::from("email"),
                Dep::Edge {
                    node: "risky".into(),
                    on_failure: OnFailure::Ignore,
                },
            ],
        )
        .graph(&Limits::default())
        .expect("valid")
        .clone();
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let id = |n: &str| wf.job(n).unwrap();
    let ran: Ran = Default::default();
    let mut cfg = WorkerConfig::default().queue("q", 4);
    cfg.poll_interval = Duration::from_millis(100);
    let worker = Arc::new(Worker::new(s.clone(), registry(ran.clone()), cfg).expect("worker"));
    let shutdown = Shutdown::default();
    let (w, sd) = (worker.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w.run(sd).await.expect("run") });
    let s2 = s.clone();
    let join = id("join");
    let after_fanout = id("after_fanout");
    docket_testkit::eventually(Duration::from_secs(50), "the joins finish", move || {
        let s = s2.clone();
        async move {
            s.get(join).await.is_ok_and(|j| j.state.is_terminal())
                && s.get(after_fanout)
                    .await
                    .is_ok_and(|j| j.state.is_terminal())
        }
    })
    .await;
    shutdown.graceful.cancel();
    task.await.expect("worker task");

    // Every node's row is kept (the default deletes plain successes), with its outcome.
    let state = |n: &'static str| {
        let s = s.clone();
        async move { s.get(id(n)).await.unwrap().state }
    };
    assert_eq!(state("charge").await, JobState::Succeeded);
    assert_eq!(state("email").await, JobState::Succeeded);
    assert_eq!(state("risky").await, JobState::Dead);
    assert_eq!(state("after_risky").await, JobState::Cancelled);
    assert_eq!(state("join").await, JobState::Succeeded);
    let receipt: Receipt = s.output(id("charge")).await.unwrap().unwrap();
    assert_eq!(
        s.output::<String>(id("email")).await.unwrap().as_deref(),
        Some(format!("emailed {}", receipt.charge).as_str()),
        "the child read its parent's output by name"
    );
    assert_eq!(
        s.output::<Vec<String>>(id("join")).await.unwrap(),
        Some(vec![
            "email=succeeded".to_string(),
            "risky=dead".to_string()
        ])
    );
    // The fan-out: three leaves and their sum ran after it, and its old dependent after
    // the sum (the spawn made it wait for the join too).
    let w = s.workflow(wf.id).await.unwrap();
    let spawned = |n: &str| w.nodes.iter().find(|x| x.name == n).map(|x| x.id).unwrap();
    assert_eq!(s.output::<i64>(spawned("sum")).await.unwrap(), Some(6));
    let sum_end = s.get(spawned("sum")).await.unwrap().finished_at;
    let after = s.get(id("after_fanout")).await.unwrap();
    assert_eq!(after.state, JobState::Succeeded);
    assert!(
        after.attempted_at >= sum_end,
        "the old dependent ran after the spawned join"
    );
    // Each node started after its parents, and a cancelled dependent never started.
    let ran = ran.lock().unwrap().clone();
    let pos = |n: &str| {
        ran.iter()
            .position(|r| r == n)
            .unwrap_or_else(|| panic!("{n} ran: {ran:?}"))
    };
    assert!(pos("charge") < pos("email"), "{ran:?}");
    assert!(
        pos("email") < pos("join") && pos("fails") < pos("join"),
        "{ran:?}"
    );
    assert_eq!(ran.iter().filter(|r| *r == "email").count(), 1, "{ran:?}");
    for n in ["charge", "email", "join"] {
        let parents = s.dep_outputs(id(n)).await.unwrap();
        let me = s.get(id(n)).await.unwrap();
        for p in parents {
            let parent = s.get(p.id).await.unwrap();
            assert!(
                me.attempted_at >= parent.finished_at,
                "{n} started before its parent {} ended",
                p.node
            );
        }
    }
}

macro_rules! engines {
    ($($m:ident: $h:ty),*) => {
        $(
            mod $m {
                use super::*;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn a_workflow_runs_through_a_worker_with_the_defaults() {
                    super::a_workflow_runs_through_a_worker_with_the_defaults::<$h>().await;
                }
            }
        )*
    };
}

engines!(postgres: PgHarness, sqlite: SqliteHarness, mysql: MySqlHarness);
