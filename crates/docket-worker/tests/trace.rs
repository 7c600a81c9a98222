//! W3C trace context from the enqueuing span to the run (feature `otel`): the job's
//! `docket.job` span is a child of the span that enqueued it, in the same trace; a forged or
//! malformed `traceparent` only means the run starts a trace of its own. One test in this
//! binary: the tracing subscriber is process-wide.

use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{Registry, Shutdown, Worker, WorkerConfig};
use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::json;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_continues_the_trace_that_enqueued_it() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("docket-test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let db = TestDb::new().await;
    let (trace_id, parent) = {
        let span = tracing::info_span!("http.request");
        let _g = span.enter();
        let sc = span.context().span().span_context().clone();
        assert!(sc.is_valid(), "the test's span is sampled");
        let job = docket_worker::trace::traced(NewJob::new("t", "traced", json!({})));
        let tp = job.metadata["traceparent"].as_str().unwrap().to_string();
        assert!(tp.contains(&sc.trace_id().to_string()), "{tp}");
        db.store.enqueue(&job).await.unwrap();
        (sc.trace_id(), sc.span_id())
    };
    // Outside any span nothing is added; a forged context is ignored at run time.
    let plain = docket_worker::trace::traced(NewJob::new("t", "plain", json!({})));
    assert!(plain.metadata.get("traceparent").is_none());
    db.store
        .enqueue(&NewJob::new("t", "plain", json!({})).metadata(
            json!({"traceparent": "00-not-a-trace-context-at-all-0000000000000000000-01"}),
        ))
        .await
        .unwrap();

    let mut r = Registry::default();
    r.register_fn("traced", |_, _| async { Ok(()) });
    r.register_fn("plain", |_, _| async { Ok(()) });
    let mut cfg = WorkerConfig::default().queue("t", 2);
    cfg.poll_interval = Duration::from_millis(100);
    let w = Worker::new(db.second_store(4).await, r, cfg).unwrap();
    tokio::time::timeout(Duration::from_secs(60), w.drain(Shutdown::default()))
        .await
        .unwrap()
        .unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let runs: Vec<_> = spans.iter().filter(|s| s.name == "docket.job").collect();
    assert_eq!(
        runs.len(),
        2,
        "one span per run: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let traced: Vec<_> = runs
        .iter()
        .filter(|s| s.span_context.trace_id() == trace_id)
        .collect();
    assert_eq!(
        traced.len(),
        1,
        "exactly the traced job joins the enqueuer's trace"
    );
    assert_eq!(
        traced[0].parent_span_id, parent,
        "the run is the enqueuing span's child"
    );
    let forged = runs
        .iter()
        .find(|s| s.span_context.trace_id() != trace_id)
        .unwrap();
    assert!(
        forged.span_context.is_valid(),
        "a malformed context starts a trace of its own"
    );
}
