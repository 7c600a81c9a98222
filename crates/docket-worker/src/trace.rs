//! W3C trace context from the span that enqueues a job to the span that runs it.
//!
//! [`traced`] writes the current span's context into the job's metadata as `traceparent`
//! (and `tracestate` when there is one), the header names of the W3C Trace Context spec; the
//! run's `docket.job` span takes it as its parent, so a trace shows the request that
//! enqueued, the wait, and the run. Built with the `otel` feature (OpenTelemetry through
//! `tracing-opentelemetry`); without it both ends are no-ops and nothing is written.

use docket_core::NewJob;

/// Metadata key of the carried W3C `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// Metadata key of the carried W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";

/// The job with the current span's trace context in its metadata (unchanged without the
/// `otel` feature or outside any sampled trace).
pub fn traced(job: NewJob) -> NewJob {
    #[cfg(feature = "otel")]
    {
        let mut job = job;
        for (k, v) in otel::current() {
            if let serde_json::Value::Object(m) = &mut job.metadata {
                m.insert(k, serde_json::Value::String(v));
            } else {
                job.metadata = serde_json::json!({ k: v });
            }
        }
        job
    }
    #[cfg(not(feature = "otel"))]
    job
}

/// Makes `span` a child of the context carried in `metadata`, when there is a valid one.
/// A malformed `traceparent` (any role can write metadata) is ignored: the run then starts
/// a trace of its own.
pub fn adopt_parent(span: &tracing::Span, metadata: &serde_json::Value) {
    #[cfg(feature = "otel")]
    otel::adopt(span, metadata);
    #[cfg(not(feature = "otel"))]
    let _ = (span, metadata);
}

#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::{TRACEPARENT, TRACESTATE};

    pub(super) fn current() -> Vec<(String, String)> {
        let cx = tracing::Span::current().context();
        if !cx.span().span_context().is_valid() {
            return Vec::new();
        }
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        carrier
            .into_iter()
            .filter(|(k, _)| k == TRACEPARENT || k == TRACESTATE)
            .collect()
    }

    pub(super) fn adopt(span: &tracing::Span, metadata: &serde_json::Value) {
        let get = |k: &str| metadata.get(k).and_then(|v| v.as_str());
        let Some(tp) = get(TRACEPARENT) else { return };
        // 55 characters: version-traceid-spanid-flags. Anything else is not a context.
        if tp.len() != 55 {
            return;
        }
        let mut carrier = HashMap::new();
        carrier.insert(TRACEPARENT.to_string(), tp.to_string());
        if let Some(ts) = get(TRACESTATE).filter(|s| s.len() <= 512) {
            carrier.insert(TRACESTATE.to_string(), ts.to_string());
        }
        let cx = TraceContextPropagator::new().extract(&carrier);
        if cx.span().span_context().is_valid() {
            let _ = span.set_parent(cx);
        }
    }
}
