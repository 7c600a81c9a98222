//! The transactional outbox's store contract: a relay's claim takes unkeyed messages and
//! each key's oldest unpublished one only; every later write (mark, failure) is fenced on
//! the claim's attempt; a failed publish waits out its delay; refused messages write
//! nothing; published ones are pruned after their retention. (The relay and JetStream:
//! `docket-nats`'s tests.)

use std::time::Duration;

use docket_core::outbox::{NewMessage, OutboxMessage, OutboxState, Published};
use docket_core::*;
use serde_json::json;

use super::*;

fn msg(subject: &str, n: i64) -> NewMessage {
    NewMessage::new(subject, &json!({ "n": n })).expect("a message")
}

fn ids(v: &[OutboxMessage]) -> Vec<i64> {
    v.iter().map(|m| m.id).collect()
}

fn acked(m: &OutboxMessage, seq: u64) -> Published {
    Published {
        id: m.id,
        attempt: m.attempt,
        stream_seq: seq,
        duplicate: false,
    }
}

/// A key's messages are claimable one at a time, oldest first, each only once its
/// predecessor was marked published; unkeyed messages and other keys' heads go side by side.
pub async fn a_keys_messages_are_claimed_one_at_a_time_in_order<H: Harness>(h: &H) {
    let s = h.store();
    let a1 = s.publish(&msg("orders.a", 1).key("a")).await.unwrap();
    let a2 = s.publish(&msg("orders.a", 2).key("a")).await.unwrap();
    let free = s.publish(&msg("orders.free", 3)).await.unwrap();
    let b1 = s.publish(&msg("orders.b", 4).key("b")).await.unwrap();
    let a3 = s.publish(&msg("orders.a", 5).key("a")).await.unwrap();
    assert!(
        a1 < a2 && a2 < free && free < b1 && b1 < a3,
        "ids follow writes"
    );

    let first = s.outbox_claim("r1", 100, LONG).await.unwrap();
    assert_eq!(
        ids(&first),
        vec![a1, free, b1],
        "only each key's oldest, and the unkeyed"
    );
    assert!(first.iter().all(|m| m.attempt == 1 && m.errors == 0));
    let payload: serde_json::Value = serde_json::from_str(&first[0].payload).unwrap();
    assert_eq!(payload, json!({"n": 1}), "the payload as written");
    let other = s.outbox_claim("r2", 100, LONG).await.unwrap();
    assert!(
        other.is_empty(),
        "leased heads are skipped and their keys' next wait: {other:?}"
    );

    // The unkeyed and b's acknowledgements free nothing of a.
    assert_eq!(
        s.outbox_mark(&[acked(&first[1], 10), acked(&first[2], 11)])
            .await
            .unwrap(),
        2
    );
    assert!(s.outbox_claim("r2", 100, LONG).await.unwrap().is_empty());
    // a1's frees a2, and only a2.
    assert_eq!(s.outbox_mark(&[acked(&first[0], 12)]).await.unwrap(), 1);
    let next = s.outbox_claim("r2", 100, LONG).await.unwrap();
    assert_eq!(ids(&next), vec![a2]);
    assert_eq!(s.outbox_mark(&[acked(&next[0], 13)]).await.unwrap(), 1);
    assert_eq!(
        ids(&s.outbox_claim("r1", 100, LONG).await.unwrap()),
        vec![a3]
    );
}

/// Every write after a claim carries its attempt: once a relay's lease ran out and another
/// relay claimed the message, the first one's mark and failure change nothing.
pub async fn a_stale_relay_marks_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let id = s.publish(&msg("orders.x", 1).key("k")).await.unwrap();
    let stale = s
        .outbox_claim("r1", 10, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(ids(&stale), vec![id]);
    assert!(
        s.outbox_claim("r2", 10, LONG).await.unwrap().is_empty(),
        "a live lease is not taken"
    );
    h.advance(Duration::from_secs(6)).await;
    let fresh = s.outbox_claim("r2", 10, LONG).await.unwrap();
    assert_eq!(ids(&fresh), vec![id]);
    assert_eq!(
        fresh[0].attempt,
        stale[0].attempt + 1,
        "each claim is a new attempt"
    );

    assert_eq!(
        s.outbox_mark(&[acked(&stale[0], 1)]).await.unwrap(),
        0,
        "stale mark"
    );
    assert!(
        !s.outbox_fail(id, stale[0].attempt, "late", Duration::from_secs(60))
            .await
            .unwrap(),
        "stale failure"
    );
    let st = s.outbox_stats().await.unwrap();
    assert_eq!((st.unpublished, st.in_flight, st.failing), (1, 1, 0));

    assert_eq!(s.outbox_mark(&[acked(&fresh[0], 7)]).await.unwrap(), 1);
    assert_eq!(
        s.outbox_mark(&[acked(&fresh[0], 8)]).await.unwrap(),
        0,
        "marked once"
    );
    let published = s.outbox_list(OutboxState::Published, 10).await.unwrap();
    assert_eq!(published.len(), 1);
    assert_eq!(
        published[0].stream_seq,
        Some(7),
        "the holder's ack is recorded"
    );
    let st = s.outbox_stats().await.unwrap();
    assert_eq!((st.unpublished, st.published), (0, 1));
}

/// A failed publish is recorded (the error kept, the message released) and claimable again
/// only after its delay, with its error count for the next delay.
pub async fn a_failed_publish_waits_out_its_delay<H: Harness>(h: &H) {
    let s = h.store();
    let id = s.publish(&msg("orders.y", 1)).await.unwrap();
    let c = s.outbox_claim("r1", 10, LONG).await.unwrap();
    assert!(s
        .outbox_fail(
            id,
            c[0].attempt,
            "no stream \u{7} matches",
            Duration::from_secs(60)
        )
        .await
        .unwrap());
    let st = s.outbox_stats().await.unwrap();
    assert_eq!((st.unpublished, st.in_flight, st.failing), (1, 0, 1));
    assert_eq!(
        st.last_error.as_deref(),
        Some("no stream   matches"),
        "control characters replaced"
    );
    let failing = s.outbox_list(OutboxState::Failing, 10).await.unwrap();
    assert_eq!((failing.len(), failing[0].errors), (1, 1));
    assert!(
        s.outbox_claim("r2", 10, LONG).await.unwrap().is_empty(),
        "inside its delay"
    );
    h.advance(Duration::from_secs(61)).await;
    let again = s.outbox_claim("r2", 10, LONG).await.unwrap();
    assert_eq!(ids(&again), vec![id]);
    assert_eq!((again[0].attempt, again[0].errors), (2, 1));
}

/// Refused messages write nothing, whatever is wrong with them.
pub async fn a_refused_message_writes_nothing<H: Harness>(h: &H) {
    let s = h.store();
    let bad = [
        msg("orders.*", 1),
        msg("orders..x", 1),
        msg("has space", 1),
        msg("", 1),
        msg("ok", 1).header("Nats-Msg-Id", "forged"),
        msg("ok", 1).header("X-Line", "a\r\nInjected: yes"),
        msg("ok", 1).key(""),
        NewMessage::new("ok", &"x".repeat(docket_core::outbox::MAX_PAYLOAD + 1)).unwrap(),
    ];
    for m in &bad {
        let e = s.publish(m).await.expect_err("refused");
        assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    }
    let st = s.outbox_stats().await.unwrap();
    assert_eq!(st.unpublished, 0, "nothing written");
    // Headers and keys travel as given.
    let id = s
        .publish(
            &msg("orders.z", 1)
                .key("tenant \"7\"")
                .header("X-Trace", "t-1"),
        )
        .await
        .unwrap();
    let c = s.outbox_claim("r", 10, LONG).await.unwrap();
    assert_eq!(ids(&c), vec![id]);
    assert_eq!(c[0].key.as_deref(), Some("tenant \"7\""));
    assert_eq!(c[0].headers.get("X-Trace").map(String::as_str), Some("t-1"));
    let origin = s.outbox_origin().await.unwrap();
    assert!(
        origin.len() == 16 && origin.chars().all(|c| c.is_ascii_hexdigit()),
        "{origin:?}"
    );
    assert_eq!(s.outbox_origin().await.unwrap(), origin, "stable");
}

/// Published messages stay for their retention, then the pruner deletes them; unpublished
/// ones are never pruned.
pub async fn published_messages_are_pruned_after_their_retention<H: Harness>(h: &H) {
    let s = h.store();
    s.publish(&msg("orders.p", 1)).await.unwrap();
    let kept = s.publish(&msg("orders.p", 2)).await.unwrap();
    let c = s.outbox_claim("r", 1, LONG).await.unwrap();
    s.outbox_mark(&[acked(&c[0], 1)]).await.unwrap();
    let hour = Duration::from_secs(3600);
    assert_eq!(
        s.prune_outbox(hour, 100).await.unwrap(),
        0,
        "inside its retention"
    );
    h.advance(hour + Duration::from_secs(1)).await;
    assert_eq!(s.prune_outbox(hour, 100).await.unwrap(), 1);
    assert!(s
        .outbox_list(OutboxState::Published, 10)
        .await
        .unwrap()
        .is_empty());
    let left = s.outbox_list(OutboxState::Unpublished, 10).await.unwrap();
    assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), vec![kept]);
    let st = s.outbox_stats().await.unwrap();
    assert!(st.oldest_age_ms >= 3_600_000, "{st:?}");
}
