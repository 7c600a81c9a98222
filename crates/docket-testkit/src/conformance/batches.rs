//! Batches: a set of jobs, added to until closed; once closed and every member has ended,
//! each callback whose occasion holds is enqueued — `on_complete` always, `on_failure` when
//! a member ended dead or cancelled, `on_success` when all succeeded (perhaps after a
//! retry) — at most once each, with the counts; counted on every path that ends a member
//! (completion, failure, the reaper, an operator's cancel, a retry), and only by a write
//! that held the member's claim.

use std::time::Duration;

use docket_core::batches::{Batch, BatchError, BatchResult, BatchStatus, Callback, JobSpec};
use docket_core::workflow::{NodeDone, Workflow};
use docket_core::*;
use serde_json::json;

use super::*;

fn member(n: i64) -> NewJob {
    NewJob::new("q", "member", json!({ "n": n }))
}

fn callback(kind: &str) -> NewJob {
    NewJob::new("cb", kind, json!({ "from": "batch" }))
}

fn done(c: &ClaimedJob) -> NodeDone {
    NodeDone {
        lease: lease(c),
        output: None,
    }
}

fn discard(c: &ClaimedJob) -> Failure {
    Failure {
        lease: lease(c),
        class: FailureClass::Discard,
        message: "broken".into(),
        retry_in: None,
    }
}

fn spec(b: Batch) -> docket_core::BatchSpec {
    b.spec(&Limits::default()).expect("a valid batch").clone()
}

fn fired(b: &BatchStatus, c: Callback) -> Option<JobId> {
    b.callbacks
        .iter()
        .find(|(x, _)| *x == c)
        .and_then(|(_, j)| *j)
}

/// Every callback job enqueued so far, oldest first.
async fn callbacks<S: Store>(s: &S) -> Vec<JobRecord> {
    let mut v = s
        .list(&JobFilter {
            queue: Some("cb".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    v.sort_by_key(|r| r.id);
    v
}

/// A closed batch of three: nothing fires while a member is unfinished (nor for a stale
/// attempt's completion); when the last ends dead, `on_complete` and `on_failure` fire
/// once, carrying the counts, and `on_success` does not. Members are the batch's workflow
/// nodes `#1`..`#3`.
pub async fn a_batch_fires_its_callbacks_when_every_member_ended<H: Harness>(h: &H) {
    let s = h.store();
    let b = Batch::new("import")
        .job(member(1))
        .job(member(2))
        .job(member(3).max_attempts(1))
        .on_success(callback("all_good"))
        .on_complete({
            // A number of more digits than an f64 holds is kept exactly on its way through
            // the stored callback (found by the batch_spec fuzz target).
            let mut j = callback("finished");
            j.metadata =
                serde_json::from_str(&format!(r#"{{"big":5{}}}"#, "0".repeat(66))).unwrap();
            j
        })
        .on_failure(callback("some_failed"));
    let opened = s.open_batch(&spec(b)).await.expect("open_batch");
    assert_eq!(opened.jobs.len(), 3);
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.total, st.unfinished), ("running", 3, 3));
    assert!(st.closed_at.is_some());

    // A stale attempt of #1: claimed briefly, reaped back to pending, claimed again.
    let old = claim(s, "q", 1, "w1", Duration::from_secs(5)).await;
    assert_eq!(old[0].id, opened.jobs[0]);
    assert_eq!(
        docket_core::workflow::marker(&old[0].metadata),
        Some((opened.id, "#1"))
    );
    assert!(docket_core::batches::is_member(&old[0].metadata));
    h.advance(Duration::from_secs(6)).await;
    assert_eq!(s.reap(10).await.unwrap().jobs.len(), 1);
    h.advance(Duration::from_secs(3600)).await;
    let held = claim(s, "q", 5, "w2", LONG).await;
    assert_eq!(held.len(), 3);
    let out = s.complete_nodes("w1", &[done(&old[0])]).await.unwrap();
    assert!(out.applied.is_empty(), "a stale attempt completes nothing");
    assert_eq!(s.batch(opened.id).await.unwrap().unfinished, 3);

    let by_id = |id: JobId| held.iter().find(|c| c.id == id).expect("claimed");
    s.complete_nodes(
        "w2",
        &[done(by_id(opened.jobs[0])), done(by_id(opened.jobs[1]))],
    )
    .await
    .unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.unfinished, st.succeeded), (1, 2));
    assert!(
        callbacks(s).await.is_empty(),
        "nothing fires before the last member ends"
    );

    s.fail_many("w2", &[discard(by_id(opened.jobs[2]))])
        .await
        .unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!(
        (
            st.state(),
            st.unfinished,
            st.succeeded,
            st.dead,
            st.cancelled
        ),
        ("failed", 0, 2, 1, 0)
    );
    assert!(st.ended_at.is_some());
    let cbs = callbacks(s).await;
    let kinds: Vec<&str> = cbs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, vec!["finished", "some_failed"]);
    assert_eq!(fired(&st, Callback::OnComplete), Some(cbs[0].id));
    assert_eq!(fired(&st, Callback::OnFailure), Some(cbs[1].id));
    assert_eq!(fired(&st, Callback::OnSuccess), None);
    let got = claim(s, "cb", 5, "w", LONG).await;
    let result = BatchResult::of(&got[0].metadata).expect("the callback's result");
    assert_eq!(
        result,
        BatchResult {
            id: opened.id,
            name: "import".into(),
            callback: Callback::OnComplete,
            total: 3,
            succeeded: 2,
            dead: 1,
            cancelled: 0,
        }
    );
    assert_eq!(got[0].args, json!({"from": "batch"}));
    assert_eq!(
        got[0].metadata["big"].to_string(),
        format!("5{}", "0".repeat(66)),
        "the callback's metadata is kept exactly"
    );
    assert_eq!(
        BatchResult::of(&got[1].metadata).map(|r| r.callback),
        Some(Callback::OnFailure)
    );
}

/// A batch settles again after an operator retries its failure: `on_success` fires then,
/// once; `on_complete` and `on_failure`, which already fired, never again — not on the
/// second settle, not on a close repeated. The reaper's dead end counts like a failure.
pub async fn a_batch_callback_fires_once_per_occasion<H: Harness>(h: &H) {
    let s = h.store();
    let b = Batch::new("retried")
        .job(member(1))
        .job(member(2).max_attempts(1))
        .on_success(callback("all_good"))
        .on_complete(callback("finished"))
        .on_failure(callback("some_failed"));
    let opened = s.open_batch(&spec(b)).await.unwrap();
    let held = claim(s, "q", 5, "w", Duration::from_secs(5)).await;
    let first = held.iter().find(|c| c.id == opened.jobs[0]).unwrap();
    s.complete_nodes("w", &[done(first)]).await.unwrap();
    // #2 (one attempt) expires: the reaper ends it dead.
    h.advance(Duration::from_secs(6)).await;
    let reaped = s.reap(10).await.unwrap();
    assert_eq!(reaped.jobs.len(), 1);
    assert_eq!(reaped.jobs[0].state, JobState::Dead);
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.unfinished, st.succeeded, st.dead), (0, 1, 1));
    assert_eq!(callbacks(s).await.len(), 2, "on_complete and on_failure");

    s.retry(opened.jobs[1], 1).await.unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.unfinished, st.dead), ("running", 1, 0));
    assert!(st.ended_at.is_none());
    let again = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(again.len(), 1);
    s.complete_nodes("w", &[done(&again[0])]).await.unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.succeeded, st.dead), ("succeeded", 2, 0));
    let cbs = callbacks(s).await;
    let kinds: Vec<&str> = cbs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec!["finished", "some_failed", "all_good"],
        "each callback once"
    );
    s.close_batch(opened.id).await.unwrap();
    assert_eq!(
        callbacks(s).await.len(),
        3,
        "a repeated close fires nothing"
    );
    let success = cbs.iter().find(|r| r.kind == "all_good").unwrap();
    assert_eq!(
        BatchResult::of(&success.metadata).map(|r| (r.succeeded, r.dead)),
        Some((2, 0))
    );
}

/// An open batch takes members until it is closed and fires nothing before; an operator's
/// cancel of a member counts as a failure; additions after close, to a graph's id or to no
/// batch are refused writing nothing. An empty batch closed at once succeeds at once.
pub async fn an_open_batch_takes_members_until_closed<H: Harness>(h: &H) {
    let s = h.store();
    let b = Batch::new("growing")
        .job(member(1))
        .on_complete(callback("finished"))
        .on_failure(callback("some_failed"))
        .open();
    let opened = s.open_batch(&spec(b)).await.unwrap();
    let first = claim(s, "q", 5, "w", LONG).await;
    s.complete_nodes("w", &[done(&first[0])]).await.unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.unfinished, st.succeeded), ("open", 0, 1));
    assert!(callbacks(s).await.is_empty(), "an open batch fires nothing");

    let more = [
        JobSpec::of(&member(2)).unwrap(),
        JobSpec::of(&member(3)).unwrap(),
    ];
    let added = s.add_to_batch(opened.id, &more).await.unwrap();
    assert_eq!(added.len(), 2);
    let names: Vec<String> = s
        .workflow(opened.id)
        .await
        .unwrap()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(names, vec!["#1", "#2", "#3"]);
    let st = s.close_batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.total, st.unfinished), ("running", 3, 2));
    assert!(callbacks(s).await.is_empty());
    assert!(matches!(
        s.add_to_batch(opened.id, &more).await,
        Err(StoreError::Invalid(ValidationError::Batch(
            BatchError::Closed(_)
        )))
    ));

    assert_eq!(s.cancel(added[0]).await.unwrap(), CancelOutcome::Cancelled);
    let last = claim(s, "q", 5, "w", LONG).await;
    assert_eq!(last.len(), 1);
    s.complete_nodes("w", &[done(&last[0])]).await.unwrap();
    let st = s.batch(opened.id).await.unwrap();
    assert_eq!((st.state(), st.succeeded, st.cancelled), ("failed", 2, 1));
    let kinds: Vec<String> = callbacks(s).await.into_iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec!["finished", "some_failed"]);

    // Refusals.
    let g = Workflow::new("graph").add("a", member(9));
    let wf = s
        .enqueue_workflow(g.graph(&Limits::default()).unwrap())
        .await
        .unwrap();
    let before = all(s).await.len();
    assert!(matches!(
        s.add_to_batch(wf.id, &more).await,
        Err(StoreError::Invalid(ValidationError::Batch(
            BatchError::NotABatch(_)
        )))
    ));
    assert!(matches!(
        s.add_to_batch(wf.id + 1000, &more).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.batch(wf.id + 1000).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.close_batch(wf.id).await,
        Err(StoreError::Invalid(ValidationError::Batch(
            BatchError::NotABatch(_)
        )))
    ));
    assert_eq!(
        all(s).await.len(),
        before,
        "a refused addition writes nothing"
    );

    // Empty and closed: settled at once, every member (none) succeeded.
    let empty = Batch::new("empty")
        .on_success(callback("all_good"))
        .on_complete(callback("finished"));
    let e = s.open_batch(&spec(empty)).await.unwrap();
    let st = s.batch(e.id).await.unwrap();
    assert_eq!(st.state(), "succeeded");
    assert!(
        fired(&st, Callback::OnSuccess).is_some() && fired(&st, Callback::OnComplete).is_some()
    );
    let list = s.batches(10).await.unwrap();
    assert_eq!(
        list.iter().map(|b| b.id).collect::<Vec<_>>(),
        vec![e.id, opened.id],
        "batches only, newest first"
    );
}

/// A batch refused — an invalid member or callback, an option a member cannot carry —
/// writes nothing: no job, no batch.
pub async fn a_refused_batch_writes_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let bad_kind = docket_core::BatchSpec {
        name: "bad".into(),
        jobs: vec![JobSpec::of(&member(1)).unwrap(), {
            let mut j = JobSpec::of(&member(2)).unwrap();
            j.kind = "no spaces allowed".into();
            j
        }],
        on_success: None,
        on_complete: None,
        on_failure: None,
        close: true,
    };
    let e = s.open_batch(&bad_kind).await.unwrap_err();
    assert!(e.to_string().contains("job #1"), "{e}");
    let mut bad_callback = bad_kind.clone();
    bad_callback.jobs.truncate(1);
    let mut cb = JobSpec::of(&callback("x")).unwrap();
    cb.args = json!({"big": "x".repeat(300 * 1024)});
    bad_callback.on_failure = Some(cb);
    let e = s.open_batch(&bad_callback).await.unwrap_err();
    assert!(e.to_string().contains("on_failure"), "{e}");
    let mut forged = bad_kind.clone();
    forged.jobs.truncate(1);
    forged.jobs[0].metadata = json!({"docket:batch": {"id": 1}});
    assert!(s.open_batch(&forged).await.is_err());
    let unsupported = Batch::new("keys").job(member(1).unique_key("k"));
    assert!(matches!(
        unsupported.spec(&Limits::default()),
        Err(BatchError::Unsupported { .. })
    ));
    assert!(all(s).await.is_empty(), "nothing written");
    assert!(s.batches(10).await.unwrap().is_empty(), "no batch written");
}

/// The pruner keeps an open batch — even with no member left — so the application can
/// still add to it; a closed one whose members were pruned goes like a finished workflow.
pub async fn an_open_batch_is_not_pruned<H: Harness>(h: &H) {
    let s = h.store();
    let open = s
        .open_batch(&spec(Batch::new("open").job(member(1)).open()))
        .await
        .unwrap();
    let closed = s
        .open_batch(&spec(Batch::new("closed").job(member(2))))
        .await
        .unwrap();
    let held = claim(s, "q", 5, "w", LONG).await;
    let done_all: Vec<NodeDone> = held.iter().map(done).collect();
    s.complete_nodes("w", &done_all).await.unwrap();
    h.advance(Duration::from_secs(120)).await;
    let retention = Retention {
        finished: Duration::ZERO,
        dead: Duration::ZERO,
        outputs: Duration::ZERO,
        batch: 100,
    };
    let report = s.prune(&retention).await.unwrap();
    assert_eq!(report.finished, 2, "both members");
    assert_eq!(
        report.workflow_rows, 1,
        "the closed batch's row, not the open one's"
    );
    assert!(matches!(
        s.batch(closed.id).await,
        Err(StoreError::NotFound(_))
    ));
    let more = [JobSpec::of(&member(3)).unwrap()];
    assert_eq!(s.add_to_batch(open.id, &more).await.unwrap().len(), 1);
    let st = s.batch(open.id).await.unwrap();
    assert_eq!((st.total, st.succeeded, st.unfinished), (2, 1, 1));
}
