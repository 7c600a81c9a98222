//! What the JetStream source's tests share: a client of the test server, streams of a
//! test's own, a typed job, and the record of runs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use docket_nats::{SourceConfig, StreamSpec};
use docket_testkit::nats;
use docket_worker::{Job, JobContext, JobResult};
use serde::{Deserialize, Serialize};

pub async fn client() -> async_nats::Client {
    async_nats::connect(nats::server_url())
        .await
        .unwrap_or_else(|e| panic!("connect to NATS: {e}"))
}

/// A job stream of the test's own (capturing `<prefix>.>`) and its dead-letter stream
/// (capturing `<prefix>dead.>`), deleted when the test ends.
pub struct Streams {
    pub js: jetstream::Context,
    pub jobs: String,
    pub dead: String,
    pub prefix: String,
}

impl Streams {
    pub async fn new(js: &jetstream::Context) -> Streams {
        let (jobs, prefix) = (nats::stream_name(), nats::subject_prefix());
        let dead = format!("{jobs}D");
        for (name, subject) in [
            (&jobs, format!("{prefix}.>")),
            (&dead, format!("{prefix}dead.>")),
        ] {
            let spec = StreamSpec::new(name.clone(), vec![subject]);
            docket_nats::stream::ensure(js, &spec, Duration::from_secs(30))
                .await
                .expect("create the stream");
        }
        Streams {
            js: js.clone(),
            jobs,
            dead,
            prefix,
        }
    }

    pub fn subject(&self) -> String {
        format!("{}.jobs", self.prefix)
    }

    /// A source's settings for quick tests: a 1 s lease, retries after 10-50 ms.
    pub fn config(&self) -> SourceConfig {
        SourceConfig {
            dead_letter: format!("{}dead.jobs", self.prefix),
            ack_wait: Duration::from_secs(1),
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(50),
            idle_wait: Duration::from_millis(100),
            ..SourceConfig::new(&self.jobs, "workers")
        }
    }

    /// The dead-letter stream's messages: their headers (`Docket-*`) and payload.
    pub async fn dead_letters(&self) -> Vec<(BTreeMap<String, String>, Vec<u8>)> {
        let mut s = self.js.get_stream(&self.dead).await.expect("stream");
        let last = s.info().await.expect("info").state.last_sequence;
        let mut out = Vec::new();
        for seq in 1..=last {
            let m = s.get_raw_message(seq).await.expect("message");
            let headers = m
                .headers
                .iter()
                .map(|(k, v)| {
                    let v = v.first().map(|v| v.to_string()).unwrap_or_default();
                    (k.to_string(), v)
                })
                .collect();
            out.push((headers, m.payload.to_vec()));
        }
        out
    }

    pub async fn consumer_info(&self) -> jetstream::consumer::Config {
        let s = self.js.get_stream(&self.jobs).await.expect("stream");
        let mut c = s
            .get_consumer::<pull::Config>("workers")
            .await
            .expect("consumer");
        c.info().await.expect("info").config.clone()
    }

    pub async fn drop_it(self) {
        let _ = self.js.delete_stream(&self.jobs).await;
        let _ = self.js.delete_stream(&self.dead).await;
    }
}

#[derive(Serialize, Deserialize)]
pub struct SendEmail {
    pub to: String,
}

/// Runs of each job: (kind, id, attempt).
pub type Runs = Arc<Mutex<Vec<(String, i64, i32)>>>;

impl Job for SendEmail {
    const KIND: &'static str = "send_email";
    async fn run(self, _ctx: JobContext) -> JobResult {
        assert_eq!(self.to, "a@example.com");
        Ok(())
    }
}

/// The runs of `kind`, by id and attempt (jobs run side by side, so in no fixed order).
pub fn runs_of(runs: &Runs, kind: &str) -> Vec<(i64, i32)> {
    let r = runs.lock().unwrap();
    let mut of: Vec<(i64, i32)> = r
        .iter()
        .filter(|(k, _, _)| k == kind)
        .map(|(_, id, a)| (*id, *a))
        .collect();
    of.sort();
    of
}
