//! The command's integration tests, as one test binary: one link instead of fourteen, and one
//! pool of test threads, so files whose tests mostly wait on child processes overlap instead
//! of running one after another. Each file under `tests/` is a module here, named as before
//! (`chaos::…`). `sqlite.rs` and `mysql.rs` stay binaries of their own: each fills in the
//! engines' shared suite (`local/mod.rs`) for its engine, with types of the same names.

#[path = "../common/mod.rs"]
mod common;

#[path = "../bench.rs"]
mod bench;
#[path = "../bulk.rs"]
mod bulk;
#[path = "../chaos.rs"]
mod chaos;
#[path = "../cli.rs"]
mod cli;
#[path = "../consume_crash.rs"]
mod consume_crash;
#[path = "../controls.rs"]
mod controls;
#[path = "../crash.rs"]
mod crash;
#[path = "../exec.rs"]
mod exec;
#[path = "../hostile.rs"]
mod hostile;
#[path = "../outbox_chaos.rs"]
mod outbox_chaos;
#[path = "../partition.rs"]
mod partition;
#[path = "../pooler.rs"]
mod pooler;
#[path = "../roles.rs"]
mod roles;
#[path = "../serverless.rs"]
mod serverless;
#[path = "../signals.rs"]
mod signals;
#[path = "../tls.rs"]
mod tls;
#[path = "../web.rs"]
mod web;
