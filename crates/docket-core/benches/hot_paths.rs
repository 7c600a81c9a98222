//! Criterion micro-benchmarks of the client-side work done for every job, where repeatable
//! counts beat the noisy end-to-end drain: validating a job before it is enqueued (every
//! enqueue path, once per job) and computing the next tick of a cron schedule (the leader's
//! scheduler, once per due definition).
//!
//! Run: `cargo bench -p docket-core --bench hot_paths` (results in docs/benchmarks.md).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use docket_core::{validate, CronSchedule, Limits, NewJob};
use serde_json::json;

fn typical_job() -> NewJob {
    NewJob::new(
        "emails",
        "send_welcome",
        json!({"user_id": 48213, "template": "welcome", "locale": "en-GB",
               "to": "someone@example.com", "tags": ["signup", "web"]}),
    )
    .metadata(json!({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}))
}

fn validation(c: &mut Criterion) {
    let limits = Limits::default();
    let job = typical_job();
    c.bench_function("validate_new_job", |b| {
        b.iter(|| validate::new_job(black_box(&job), &limits).unwrap())
    });
    let big = NewJob::new(
        "reports",
        "render",
        json!({"rows": (0..2000).map(|i| json!({"id": i, "name": format!("row {i}")})).collect::<Vec<_>>()}),
    );
    c.bench_function("validate_new_job_64k_args", |b| {
        b.iter(|| validate::new_job(black_box(&big), &limits).unwrap())
    });
}

fn cron(c: &mut Criterion) {
    let s = CronSchedule::parse("*/5 9-17 * * 1-5", "Europe/London").unwrap();
    let from = chrono::DateTime::parse_from_rfc3339("2026-03-29T00:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    c.bench_function("cron_next_after", |b| {
        b.iter(|| s.next_after(black_box(from)).unwrap())
    });
}

criterion_group!(benches, validation, cron);
criterion_main!(benches);
