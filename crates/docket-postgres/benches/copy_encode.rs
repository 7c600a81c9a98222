//! Criterion micro-benchmark of the client side of bulk enqueue: validating 10,000 jobs and
//! encoding them as COPY rows (the work `enqueue_many` does in Rust before streaming a large
//! batch). The database side is measured by `docket bench --scenario enqueue`.
//!
//! Run: `cargo bench -p docket-postgres --bench copy_encode` (results in docs/benchmarks.md).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use docket_core::{validate, Limits, NewJob};
use docket_postgres::encode_copy;
use serde_json::json;

fn jobs(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            NewJob::new(
                "bench",
                "noop",
                json!({ "n": i, "to": "someone@example.com" }),
            )
        })
        .collect()
}

fn bulk(c: &mut Criterion) {
    let n = 10_000;
    let batch = jobs(n);
    let ids: Vec<i64> = (1..=n as i64).collect();
    let now = chrono::Utc::now();
    let limits = Limits::default();
    let mut g = c.benchmark_group("bulk_enqueue_client");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("validate_10k", |b| {
        b.iter(|| {
            for j in black_box(&batch) {
                validate::new_job(j, &limits).unwrap();
            }
        })
    });
    g.bench_function("encode_copy_10k", |b| {
        b.iter(|| encode_copy(black_box(&batch), &ids, now).unwrap().0.len())
    });
    g.finish();
}

criterion_group!(benches, bulk);
criterion_main!(benches);
