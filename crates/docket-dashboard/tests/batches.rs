//! Batches on the dashboard: the workflows page lists the newest batches (names from job
//! data escaped), a batch's page shows its counts and callbacks, and an open batch is closed
//! from it — refused without the CSRF token, then applied, audited and shown. And a
//! workflow's held edge is skipped from its page the same way.

mod common;

use common::*;
use docket_core::batches::Batch;
use docket_core::*;
use docket_dashboard::Options;
use docket_testkit::TestDb;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_listed_shown_and_closed_from_its_page() {
    let db = TestDb::new().await;
    let s = &db.store;
    let spec = Batch::new("<b>import</b>")
        .job(NewJob::new("bq", "k", json!({})))
        .on_complete(NewJob::new("bq", "done", json!({})))
        .open()
        .spec(&Limits::default())
        .unwrap()
        .clone();
    let b = s.open_batch(&spec).await.unwrap();
    let base = serve(s.clone(), Options::default()).await;
    let list = page_text(&base, "/workflows").await;
    let row = section(&list, &format!("data-batch=\"{}\"", b.id), "</tr>");
    assert!(
        row.contains("&lt;b&gt;import&lt;/b&gt;") && !row.contains("<b>import"),
        "{row}"
    );
    assert!(
        row.contains("state open") && row.contains("on_complete (not fired)"),
        "{row}"
    );

    let page = page_text(&base, &format!("/workflows/{}", b.id)).await;
    assert!(page.contains("A batch, open: 1 members"), "{page}");
    assert!(
        page.contains("Close batch") && page.contains("data-confirm"),
        "{page}"
    );
    let token = csrf_of(&page);
    let c = client();
    let r = post(&c, format!("{base}/workflows/{}/close", b.id), "").await;
    assert_eq!(r.status(), 403, "no token");
    assert!(
        s.batch(b.id).await.unwrap().closed_at.is_none(),
        "nothing refused was written"
    );
    let r = post(
        &c,
        format!("{base}/workflows/{}/close", b.id),
        format!("_csrf={token}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    assert!(s.batch(b.id).await.unwrap().closed_at.is_some());
    assert_eq!(s.audit_log(1).await.unwrap()[0].action, "batch.close");

    // The member ends; the callback fired is a link to its job.
    let held = claim_ready(s, "bq", 5).await;
    s.complete_nodes(
        "test",
        &[docket_core::workflow::NodeDone {
            lease: held[0].lease(),
            output: None,
        }],
    )
    .await
    .unwrap();
    let fired = s.batch(b.id).await.unwrap().callbacks[0].1.expect("fired");
    let page = page_text(&base, &format!("/workflows/{}", b.id)).await;
    assert!(page.contains("A batch, succeeded"), "{page}");
    assert!(page.contains(&format!("/jobs/{}", fired.0)), "{page}");
    assert!(
        !page.contains("Close batch"),
        "a closed batch offers no close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_edge_is_skipped_from_the_workflow_page() {
    use docket_core::workflow::{Dep, OnFailure, Workflow};
    let db = TestDb::new().await;
    let s = &db.store;
    let g = Workflow::new("held")
        .add("p", NewJob::new("hq", "k", json!({})))
        .add_after(
            "c",
            NewJob::new("hq", "k", json!({})),
            [Dep::Edge {
                node: "p".into(),
                on_failure: OnFailure::Hold,
            }],
        )
        .graph(&Limits::default())
        .unwrap()
        .clone();
    let wf = s.enqueue_workflow(&g).await.unwrap();
    let (p, c) = (wf.job("p").unwrap(), wf.job("c").unwrap());
    let base = serve(s.clone(), Options::default()).await;
    let page = page_text(&base, &format!("/workflows/{}", wf.id)).await;
    assert!(!page.contains("Skip edge"), "nothing to skip while p runs");
    let held = claim_ready(s, "hq", 5).await;
    s.fail_many(
        "test",
        &[Failure {
            lease: held[0].lease(),
            class: FailureClass::Discard,
            message: "no".into(),
            retry_in: None,
        }],
    )
    .await
    .unwrap();
    let page = page_text(&base, &format!("/workflows/{}", wf.id)).await;
    let action = format!("/workflows/{}/edges/{}/{}/skip", wf.id, p.0, c.0);
    assert!(
        page.contains("Skip edge") && page.contains(&action),
        "{page}"
    );
    let token = csrf_of(&page);
    let client = client();
    let r = post(&client, format!("{base}{action}"), "").await;
    assert_eq!(r.status(), 403, "no token");
    assert_eq!(s.get(c).await.unwrap().state, JobState::Waiting);
    let r = post(&client, format!("{base}{action}"), format!("_csrf={token}")).await;
    assert_eq!(r.status(), 303);
    assert_eq!(s.get(c).await.unwrap().state, JobState::Pending);
    assert_eq!(
        s.audit_log(1).await.unwrap()[0].action,
        "workflow.skip_edge"
    );
    let r = post(&client, format!("{base}{action}"), format!("_csrf={token}")).await;
    assert_ne!(r.status(), 303, "an edge is skipped once");
    let page = page_text(&base, &format!("/workflows/{}", wf.id)).await;
    assert!(!page.contains("Skip edge"), "{page}");
}
