//! The worker runtime's integration tests, as one test binary: one link instead of sixteen,
//! and one pool of test threads, so a file whose tests mostly wait (leases running out,
//! servers restarting) overlaps with the others instead of running alone. Each file under
//! `tests/` is a module here, named as before (`prefetch::…`). `trace.rs` stays a binary of
//! its own: it installs the process-wide tracing subscriber.

#[path = "../common/mod.rs"]
mod common;
#[path = "../local/mod.rs"]
#[macro_use]
mod local;

#[path = "../batches.rs"]
mod batches;
#[path = "../boundaries.rs"]
mod boundaries;
#[path = "../durable.rs"]
mod durable;
#[path = "../durable_chaos.rs"]
mod durable_chaos;
#[path = "../exact.rs"]
mod exact;
#[path = "../faults.rs"]
mod faults;
#[path = "../intransaction.rs"]
mod intransaction;
#[path = "../lifecycle.rs"]
mod lifecycle;
#[path = "../managed.rs"]
mod managed;
#[path = "../mysql.rs"]
mod mysql;
#[path = "../pooler.rs"]
mod pooler;
#[path = "../prefetch.rs"]
mod prefetch;
#[path = "../runtime.rs"]
mod runtime;
#[path = "../scheduling.rs"]
mod scheduling;
#[path = "../sqlite.rs"]
mod sqlite;
#[path = "../supervision.rs"]
mod supervision;
#[path = "../trust.rs"]
mod trust;
#[path = "../workflows.rs"]
mod workflows;
