//! The decisions without a database: a claim's choice over candidate rows, its budget, and
//! what a failure or an expired lease becomes — the rules PostgreSQL's `claim_controlled()`,
//! `fail_jobs()` and `reap_expired()` implement (docket-postgres schema/current.sql), stated
//! here so the two can be compared. The connection is a fake that answers the claim's
//! reads from maps.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use docket_core::local::Bucket;
use docket_core::*;

use crate::claim::{budget, choose, Candidate, Candidates, ClaimTx, QueueRow};
use crate::exec::{Arg, Conn, Inserted, Row, Value};
use crate::writes::{failure_state, reaped_state};

#[derive(Default)]
struct Fake {
    /// Concurrency keys' own limits: (max_running, bucket).
    key_limits: HashMap<String, (Option<i32>, Option<Bucket>)>,
    /// Running jobs per concurrency key.
    key_running: HashMap<String, i64>,
    /// (ordering key, id) pairs with an earlier unfinished job of the key.
    behind: HashSet<(String, i64)>,
    running_in_queue: i64,
    /// Key locks another claim holds.
    locked: HashSet<String>,
    /// What a further pass reads.
    past: Vec<Candidate>,
}

fn text(a: &Arg<'_>) -> String {
    match a {
        Arg::Text(t) => t.to_string(),
        other => panic!("expected text, got {other:?}"),
    }
}

fn row(cols: &[(&str, Value)]) -> Row {
    Row::new(
        cols.iter().map(|(n, _)| n.to_string()).collect(),
        cols.iter().map(|(_, v)| v.clone()).collect(),
    )
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

impl Conn for Fake {
    async fn execute(&mut self, _name: &'static str, _args: &[Arg<'_>]) -> Result<u64> {
        Ok(0)
    }

    async fn fetch_all(&mut self, name: &'static str, args: &[Arg<'_>]) -> Result<Vec<Row>> {
        Ok(match name {
            "key_limit" => match self.key_limits.get(&text(&args[0])) {
                None => vec![],
                Some((max, b)) => vec![row(&[
                    ("max_running", opt_int(max.map(i64::from))),
                    ("rate_limit", opt_int(b.map(|b| i64::from(b.rate)))),
                    ("rate_period_ms", opt_int(b.map(|b| b.period_ms))),
                    ("tokens", b.map_or(Value::Null, |b| Value::Float(b.tokens))),
                    ("refilled_at", opt_int(b.map(|b| b.refilled_at))),
                ])],
            },
            "key_running" => vec![row(&[(
                "n",
                Value::Int(*self.key_running.get(&text(&args[0])).unwrap_or(&0)),
            )])],
            "ordering_behind" => {
                let id = match args[1] {
                    Arg::Int(i) => i,
                    _ => panic!("id"),
                };
                let behind = self.behind.contains(&(text(&args[0]), id));
                vec![row(&[("b", Value::Int(behind.into()))])]
            }
            "running_in_queue" => vec![row(&[("n", Value::Int(self.running_in_queue))])],
            "candidates_past_held" => std::mem::take(&mut self.past)
                .into_iter()
                .map(|(id, o, c)| {
                    row(&[
                        ("id", Value::Int(id)),
                        ("ordering_key", o.map_or(Value::Null, Value::Text)),
                        ("concurrency_key", c.map_or(Value::Null, Value::Text)),
                    ])
                })
                .collect(),
            other => panic!("the claim's choice does not read {other}"),
        })
    }

    async fn insert(&mut self, _name: &'static str, _args: &[Arg<'_>]) -> Result<Inserted> {
        Ok(Inserted::Id(1))
    }
}

impl ClaimTx for Fake {
    async fn try_key(&mut self, k: &str) -> Result<bool> {
        Ok(!self.locked.contains(k))
    }
}

fn req(limit: i32, controlled: Option<i32>) -> ClaimRequest {
    ClaimRequest {
        queue: "q".into(),
        limit,
        owner: "w".into(),
        lease: Duration::from_secs(30),
        starvation: None,
        controlled,
    }
}

fn job(id: i64, okey: Option<&str>, ckey: Option<&str>) -> Candidate {
    (id, okey.map(Into::into), ckey.map(Into::into))
}

async fn chosen(
    c: &mut Fake,
    r: &ClaimRequest,
    q: &QueueRow,
    rows: Vec<Candidate>,
) -> (Vec<i64>, bool) {
    let mut b = budget(c, r, q, 0).await.unwrap();
    let ch = choose(
        c,
        r,
        q,
        0,
        &mut b,
        Candidates {
            rows,
            keyed: true,
            depth: 1000,
        },
    )
    .await
    .unwrap();
    (ch.chosen, ch.held_back)
}

#[tokio::test]
async fn a_concurrency_key_runs_at_most_its_limit_and_the_rest_goes_on() {
    // claim_controlled: a key's own max_running, else the queue's key_max_running.
    let mut c = Fake::default();
    c.key_limits.insert("a".into(), (Some(2), None));
    c.key_running.insert("a".into(), 1);
    let q = QueueRow {
        key_max_running: Some(1),
        ..Default::default()
    };
    let rows = vec![
        job(1, None, Some("a")),
        job(2, None, Some("a")),
        job(3, None, Some("b")),
        job(4, None, Some("b")),
        job(5, None, None),
    ];
    let (ids, held) = chosen(&mut c, &req(10, None), &q, rows).await;
    // a: its own limit 2, one running → one more; b: the queue's 1 → one; 5 unkeyed.
    assert_eq!(ids, [1, 3, 5]);
    assert!(held, "work was left for full keys");
}

#[tokio::test]
async fn an_ordering_key_runs_one_job_in_id_order_behind_an_unfinished_head() {
    let mut c = Fake::default();
    c.behind.insert(("o1".into(), 1));
    let rows = vec![
        job(1, Some("o1"), None),
        job(2, Some("o2"), None),
        job(3, Some("o2"), None),
        job(4, None, None),
    ];
    let (ids, held) = chosen(&mut c, &req(10, None), &QueueRow::default(), rows).await;
    // o1's job waits for an earlier one; o2 runs one job per batch.
    assert_eq!(ids, [2, 4]);
    assert!(held);
}

#[tokio::test]
async fn a_key_another_claim_holds_is_skipped_not_waited_for() {
    let mut c = Fake::default();
    c.locked.insert("c:a".into());
    let rows = vec![job(1, None, Some("a")), job(2, None, None)];
    let (ids, held) = chosen(&mut c, &req(10, None), &QueueRow::default(), rows).await;
    assert_eq!(ids, [2]);
    assert!(held);
}

#[tokio::test]
async fn a_key_bucket_bounds_its_jobs_in_one_batch() {
    let mut c = Fake::default();
    let bucket = Bucket {
        rate: 10,
        period_ms: 1000,
        tokens: 2.0,
        refilled_at: 0,
    };
    c.key_limits.insert("a".into(), (None, Some(bucket)));
    let rows = (1..=5).map(|i| job(i, None, Some("a"))).collect();
    let (ids, _) = chosen(&mut c, &req(10, None), &QueueRow::default(), rows).await;
    assert_eq!(ids, [1, 2], "two tokens, two jobs");
}

#[tokio::test]
async fn controlled_work_only_for_free_slots() {
    // claim_controlled's p_controlled: keyed jobs count against it, unkeyed ones of an
    // unlimited queue do not.
    let mut c = Fake::default();
    let rows = vec![
        job(1, None, Some("a")),
        job(2, None, Some("b")),
        job(3, None, None),
        job(4, None, Some("c")),
    ];
    let (ids, held) = chosen(&mut c, &req(10, Some(1)), &QueueRow::default(), rows).await;
    assert_eq!(ids, [1, 3]);
    assert!(held);
}

#[tokio::test]
async fn a_further_pass_reads_past_held_keys() {
    let mut c = Fake::default();
    c.key_limits.insert("a".into(), (Some(0), None));
    c.past = vec![job(9, None, None)];
    let q = QueueRow::default();
    let r = req(2, None);
    let mut b = budget(&mut c, &r, &q, 0).await.unwrap();
    // The first pass reads a full depth of one held key's jobs only.
    let rows = (1..=3).map(|i| job(i, None, Some("a"))).collect();
    let ch = choose(
        &mut c,
        &r,
        &q,
        0,
        &mut b,
        Candidates {
            rows,
            keyed: true,
            depth: 3,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        ch.chosen,
        [9],
        "the next pass left key a out and found job 9"
    );
}

#[tokio::test]
async fn the_budget_is_the_limit_capped_by_free_slots_and_tokens() {
    let mut c = Fake {
        running_in_queue: 3,
        ..Default::default()
    };
    let q = QueueRow {
        max_running: Some(5),
        bucket: Some(Bucket {
            rate: 100,
            period_ms: 1000,
            tokens: 10.5,
            refilled_at: 0,
        }),
        ..Default::default()
    };
    assert_eq!(budget(&mut c, &req(10, None), &q, 0).await.unwrap().n, 2);
    c.running_in_queue = 0;
    assert_eq!(budget(&mut c, &req(50, None), &q, 0).await.unwrap().n, 5);
    // A limited queue's jobs are all controlled: only for free slots.
    assert_eq!(budget(&mut c, &req(10, Some(1)), &q, 0).await.unwrap().n, 1);
}

#[test]
fn a_failure_retries_while_attempts_remain_then_dies() {
    // fail_jobs: retry → pending while attempt < max_attempts, else dead; discard → dead;
    // cancel (or a requested cancel) → cancelled.
    use FailureClass::*;
    assert_eq!(failure_state(Retry, 1, 3, false), JobState::Pending);
    assert_eq!(failure_state(Retry, 3, 3, false), JobState::Dead);
    assert_eq!(failure_state(Discard, 1, 3, false), JobState::Dead);
    assert_eq!(failure_state(Cancel, 1, 3, false), JobState::Cancelled);
    assert_eq!(failure_state(Retry, 1, 3, true), JobState::Cancelled);
}

#[test]
fn an_expired_lease_is_retried_while_attempts_remain() {
    // reap_expired: pending while attempt < max_attempts, dead after; a requested cancel wins.
    assert_eq!(reaped_state(1, 3, false), JobState::Pending);
    assert_eq!(reaped_state(3, 3, false), JobState::Dead);
    assert_eq!(reaped_state(1, 3, true), JobState::Cancelled);
}
