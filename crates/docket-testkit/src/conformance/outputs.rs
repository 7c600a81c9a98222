//! Job outputs: stored only by the completion of the claim that holds the job, read back
//! with [`Store::job_output`], kept past a plain success's retention for their own window,
//! and bounded on every engine whatever the caller checked. Progress: written only under
//! the claim that holds the job, read back by `get`, checked before any write.

use std::time::Duration;

use docket_core::output::MAX_OUTPUT_BYTES;
use docket_core::*;
use serde_json::json;

use super::*;

fn output(lease: Lease, value: serde_json::Value) -> Output {
    Output { lease, value }
}

/// An output is written with the success, read back with the job's state and finish time,
/// and kept — even where a plain success is pruned at once — until the outputs' window
/// has passed too; a plain success completed by delete leaves nothing to read.
pub async fn an_output_is_kept_for_its_window<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let plain = put(s, job("q")).await;
    let c = claim(s, "q", 2, "w", LONG).await;
    let (with, without) = if c[0].id == id {
        (&c[0], &c[1])
    } else {
        (&c[1], &c[0])
    };
    assert_eq!(without.id, plain);
    let v = json!({"charged": 1250, "currency": "EUR", "note": "ünïcode \"quoted\""});
    let out = s
        .complete_outputs("w", &[output(lease(with), v.clone())])
        .await
        .unwrap();
    assert_eq!(out.applied, vec![lease(with)]);
    assert!(out.lost.is_empty());
    let done = s
        .complete_delete_many("w", &[lease(without)])
        .await
        .unwrap();
    assert_eq!(done.applied.len(), 1);

    let o = s.job_output(id).await.unwrap();
    assert_eq!(o.state, JobState::Succeeded);
    assert_eq!(o.output.as_ref(), Some(&v));
    let rec = get(s, id).await;
    assert_eq!(o.finished_at, rec.finished_at);
    assert!(matches!(
        s.job_output(plain).await,
        Err(StoreError::NotFound(_))
    ));

    let retention = Retention {
        finished: Duration::ZERO,
        dead: Duration::ZERO,
        outputs: Duration::from_secs(3600),
        batch: 100,
    };
    h.advance(Duration::from_secs(1)).await;
    assert_eq!(s.prune(&retention).await.unwrap().finished, 0);
    assert_eq!(s.job_output(id).await.unwrap().output, Some(v));
    h.advance(Duration::from_secs(3600)).await;
    assert_eq!(s.prune(&retention).await.unwrap().finished, 1);
    assert!(matches!(
        s.job_output(id).await,
        Err(StoreError::NotFound(_))
    ));
}

/// A job not yet finished has no output; a missing one is `NotFound`; a batch writes the
/// outputs whose leases hold and reports the others lost, recording nothing for them.
pub async fn a_batch_records_only_held_leases<H: Harness>(h: &H) {
    let s = h.store();
    let pending = put(s, job("p")).await;
    let o = s.job_output(pending).await.unwrap();
    assert_eq!(
        (o.state, o.output, o.finished_at),
        (JobState::Pending, None, None)
    );
    assert!(matches!(
        s.job_output(JobId(987_654_321)).await,
        Err(StoreError::NotFound(_))
    ));

    let a = put(s, job("q")).await;
    let b = put(s, job("q")).await;
    let c = claim(s, "q", 2, "w", LONG).await;
    let (la, lb) = (lease(&c[0]), lease(&c[1]));
    let stale_b = Lease {
        id: lb.id,
        attempt: lb.attempt + 1,
    };
    let out = s
        .complete_outputs(
            "w",
            &[
                output(stale_b, json!("stale")),
                output(la, json!([1, 2, 3])),
            ],
        )
        .await
        .unwrap();
    assert_eq!(out.applied, vec![la]);
    assert_eq!(out.lost.len(), 1);
    assert_eq!(out.lost[0].lease, stale_b);
    assert_eq!(
        s.job_output(a).await.unwrap().output,
        Some(json!([1, 2, 3]))
    );
    let ob = s.job_output(b).await.unwrap();
    assert_eq!((ob.state, ob.output), (JobState::Running, None));
    assert_eq!(c.iter().map(|j| j.id).collect::<Vec<_>>().len(), 2);
    // The holder of b still completes it, with its own output.
    let out = s
        .complete_outputs("w", &[output(lb, json!(null))])
        .await
        .unwrap();
    assert_eq!(out.applied, vec![lb]);
    let ob = s.job_output(b).await.unwrap();
    assert_eq!(
        (ob.state, ob.output),
        (JobState::Succeeded, Some(json!(null)))
    );
}

/// An output over the hard cap (or with a NUL) is refused with a validation error before
/// anything is written: the job is still running under its lease, and completes after.
pub async fn an_output_over_the_cap_writes_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    let l = lease(&c[0]);
    for bad in [
        json!("x".repeat(MAX_OUTPUT_BYTES)),
        json!({"nul": "a\u{0}b"}),
    ] {
        let err = s
            .complete_outputs("w", &[output(l, bad)])
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
        let o = s.job_output(id).await.unwrap();
        assert_eq!((o.state, o.output), (JobState::Running, None));
    }
    let out = s
        .complete_outputs("w", &[output(l, json!(1))])
        .await
        .unwrap();
    assert_eq!(out.applied, vec![l]);
}

/// Progress is written under the claim that holds the job (the lease is not extended), read
/// back by `get` with the database time, refused for a stale attempt or another owner, and
/// checked before any write: an out-of-range report fails the batch and writes nothing.
pub async fn progress_is_written_only_under_the_claim<H: Harness>(h: &H) {
    let s = h.store();
    let id = put(s, job("q")).await;
    let c = claim(s, "q", 1, "w", LONG).await;
    let l = lease(&c[0]);
    let before = get(s, id).await;
    assert_eq!(before.progress, None);
    let report = |lease, percent, message: &str| Progress {
        lease,
        percent,
        message: message.into(),
    };
    let out = s
        .progress_many(
            "w",
            &[report(l, 10.0, "first"), report(l, 42.5, "charging <card>")],
        )
        .await
        .unwrap();
    assert_eq!(out.applied, vec![l]);
    let now = get(s, id).await;
    let p = now.progress.clone().expect("progress recorded");
    assert_eq!((p.percent, p.message.as_str()), (42.5, "charging <card>"));
    assert!(p.at >= before.attempted_at.unwrap(), "{p:?}");
    assert_eq!(
        now.lease_expires_at, before.lease_expires_at,
        "the lease is not extended"
    );
    assert_eq!(
        s.list(&JobFilter::default()).await.unwrap()[0].progress,
        None,
        "lists leave it out"
    );

    let stale = Lease {
        id: l.id,
        attempt: l.attempt + 1,
    };
    for (owner, lease) in [("w", stale), ("other", l)] {
        let out = s
            .progress_many(owner, &[report(lease, 99.0, "stale")])
            .await
            .unwrap();
        assert!(out.applied.is_empty());
        assert_eq!(out.lost.len(), 1);
    }
    for bad in [
        report(l, 100.5, ""),
        report(l, f32::NAN, ""),
        report(
            l,
            1.0,
            &"x".repeat(docket_core::progress::MAX_PROGRESS_MESSAGE + 1),
        ),
    ] {
        let err = s.progress_many("w", &[bad]).await.unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    }
    assert_eq!(
        get(s, id).await.progress,
        Some(p),
        "nothing stale or invalid was written"
    );
}
