//! Job data round-trips exactly: integers beyond 2^64 and decimals with more digits than a
//! float64 holds are stored, claimed and handed to typed handlers as written, through the
//! function path and the COPY path (money amounts are job args).

use crate::common;

use std::sync::{Arc, Mutex};

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{Job, JobContext, JobResult, Registry, Shutdown, Worker};
use serde::{Deserialize, Serialize};

const ARGS: &str = r#"{"amount":12345678901234567890.123456789012345678,"big":123456789012345678901234567890,"cents":9007199254740993,"tiny":0.1}"#;

#[derive(Serialize, Deserialize)]
struct Pay {
    amount: serde_json::Number,
    big: u128,
    cents: i64,
    tiny: serde_json::Number,
}

static SEEN: Mutex<Vec<(String, u128, i64, String)>> = Mutex::new(Vec::new());

impl Job for Pay {
    const KIND: &'static str = "pay";
    async fn run(self, _ctx: JobContext) -> JobResult {
        SEEN.lock().unwrap().push((
            self.amount.to_string(),
            self.big,
            self.cents,
            self.tiny.to_string(),
        ));
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_numbers_and_decimals_round_trip_exactly() {
    let db = TestDb::new().await;
    let args: serde_json::Value = serde_json::from_str(ARGS).unwrap();
    // One by the function path, 1,000 by COPY.
    db.store
        .enqueue(&NewJob::new("q", "pay", args.clone()))
        .await
        .unwrap();
    let bulk: Vec<NewJob> = (0..1000)
        .map(|_| NewJob::new("q", "pay", args.clone()))
        .collect();
    db.store.enqueue_many(&bulk).await.unwrap();
    let stored: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT DISTINCT args::text FROM {}.jobs_all",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        stored,
        vec![r#"{"big": 123456789012345678901234567890, "tiny": 0.1, "cents": 9007199254740993, "amount": 12345678901234567890.123456789012345678}"#.to_string()]
    );
    // Read back by the library exactly as written.
    let rec = db.store.get(JobId(1)).await.unwrap();
    assert_eq!(rec.args, args);
    assert!(serde_json::to_string(&rec.args)
        .unwrap()
        .contains("12345678901234567890.123456789012345678"));

    // A typed handler gets the digits, not a float64's approximation.
    let mut r = Registry::default();
    r.register::<Pay>();
    let w = Arc::new(Worker::new(db.second_store(4).await, r, config("q", 20)).unwrap());
    w.drain(Shutdown::default()).await.unwrap();
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), 1001);
    for (amount, big, cents, tiny) in seen {
        assert_eq!(amount, "12345678901234567890.123456789012345678");
        assert_eq!(big, 123456789012345678901234567890);
        assert_eq!(cents, 9007199254740993);
        assert_eq!(tiny, "0.1");
    }
}
