//! Docket's queue rules for the engines that keep them outside the database server —
//! SQLite and MariaDB / MySQL — where PostgreSQL keeps them in its SQL functions.
//!
//! One layer, two parts:
//!
//! - **Decisions**, written once over plain rows ([`exec::Row`]): which jobs a claim may
//!   take ([`claim`]), what a failure or an expired lease becomes ([`writes`]), what a
//!   control change writes ([`controls`]), what an operator's read shows ([`inspect`]),
//!   how a job row reads ([`rows`]), how a workflow node's end reaches its children
//!   ([`workflow`]).
//! - **The engine** ([`Engine`]): its connections and transactions, its clock, its own SQL
//!   text for each statement (named by file, arguments by position: see [`exec`]), and the
//!   few operations whose shape follows how it locks (the claim's reads and locks, the
//!   batch writes after a claim).
//!
//! The shape follows River's driver interface (one executor per driver, the rules in the
//! client) rather than Oban's engines (each engine a whole implementation): the rules are
//! what must not drift, and the SQL is what differs. [`store_impl!`] writes an engine's
//! `Store` implementation from this crate's functions.

#![warn(missing_docs)]

pub mod batches;
pub mod claim;
pub mod controls;
pub mod engine;
pub mod enqueue;
pub mod exec;
pub mod health;
pub mod inspect;
pub mod outbox;
pub mod outputs;
pub mod rows;
pub mod signals;
pub mod sqltext;
pub mod steps;
pub mod workflow;
pub mod writes;

pub use docket_core as core;
pub use engine::{Engine, Tx};
pub use enqueue::{BulkEnqueued, BULK_CHUNK};
pub use exec::{Arg, Conn, FromValue, Inserted, Row, Value};
#[doc(hidden)]
pub use serde_json;

/// An argument of a [`store_impl!`] operation, made owned for [`Engine::detach`].
#[doc(hidden)]
#[macro_export]
macro_rules! __own {
    ($a:ident, $own:expr) => {
        let $a = $own;
    };
    ($a:ident) => {};
}

/// An argument as the rule takes it: by reference when it was made owned.
#[doc(hidden)]
#[macro_export]
macro_rules! __pass {
    ($a:ident, $own:expr) => {
        &$a
    };
    ($a:ident) => {
        $a
    };
}

/// The `Store` impl from a table of operations: each runs its rule on a clone of the store,
/// its borrowed arguments made owned, through [`Engine::detach`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_ops {
    ($ty:ty; $( $name:ident ( $( $arg:ident : $t:ty $(=> $own:expr)? ),* ) -> $ret:ty = $f:path; )*) => {
        impl $crate::core::Store for $ty {
            type Listener = $crate::core::local::LocalHints;

            fn listen_support(&self, _direct_url: Option<&str>) -> $crate::core::ListenSupport {
                // Hints come from this process only; other processes' work is found by
                // polling.
                $crate::core::ListenSupport::Yes
            }

            async fn listen(
                &self,
                _direct_url: Option<&str>,
            ) -> $crate::core::Result<$crate::core::local::LocalHints> {
                Ok($crate::Engine::hub(self).listener())
            }

            async fn listen_outputs(
                &self,
                _direct_url: Option<&str>,
            ) -> $crate::core::Result<$crate::core::local::LocalHints> {
                // This process's completions only; a waiter polls for the rest.
                Ok($crate::Engine::hub(self).listener())
            }

            async fn unblock_keys(&self, _batch: i32) -> $crate::core::Result<u64> {
                // Nothing is ever flagged: a claim decides every key inside its own
                // transaction, so there is nothing to sweep.
                Ok(0)
            }

            $(
                async fn $name(&self, $($arg: $t),*) -> $crate::core::Result<$ret> {
                    let e = ::std::clone::Clone::clone(self);
                    $( $crate::__own!($arg $(, $own)?); )*
                    $crate::Engine::detach(self, async move {
                        $f(&e, $( $crate::__pass!($arg $(, $own)?) ),*).await
                    })
                    .await
                }
            )*
        }
    };
}

/// `impl Store for $ty` from this crate's rules, for a type that implements [`Engine`].
#[macro_export]
macro_rules! store_impl {
    ($ty:ty) => {
        $crate::__store_ops! { $ty;
            migrate() -> () = $crate::Engine::migrate;
            leader_try(owner: &str => owner.to_owned(), ttl: ::std::time::Duration) -> bool
                = $crate::controls::leader_try;
            leader_resign(owner: &str => owner.to_owned()) -> () = $crate::controls::leader_resign;
            enqueue(job: &$crate::core::NewJob => job.clone()) -> $crate::core::Enqueued
                = $crate::enqueue::enqueue;
            enqueue_many(jobs: &[$crate::core::NewJob] => jobs.to_vec())
                -> Vec<$crate::core::Enqueued> = $crate::enqueue::enqueue_many;
            claim(req: &$crate::core::ClaimRequest => req.clone())
                -> Vec<$crate::core::ClaimedJob> = $crate::Engine::claim;
            complete_many(owner: &str => owner.to_owned(), leases: &[$crate::core::Lease] => leases.to_vec())
                -> $crate::core::BatchOutcome = $crate::writes::complete_many;
            complete_delete_many(owner: &str => owner.to_owned(), leases: &[$crate::core::Lease] => leases.to_vec())
                -> $crate::core::BatchOutcome = $crate::writes::complete_delete_many;
            complete_outputs(owner: &str => owner.to_owned(), outputs: &[$crate::core::Output] => outputs.to_vec())
                -> $crate::core::BatchOutcome = $crate::outputs::complete_outputs;
            complete_nodes(owner: &str => owner.to_owned(), nodes: &[$crate::core::NodeDone] => nodes.to_vec())
                -> $crate::core::BatchOutcome = $crate::workflow::complete_nodes;
            enqueue_workflow(graph: &$crate::core::workflow::Graph => graph.clone())
                -> $crate::core::WorkflowEnqueued = $crate::workflow::enqueue_workflow;
            dep_outputs(id: $crate::core::JobId) -> Vec<$crate::core::DepOutput>
                = $crate::workflow::dep_outputs;
            workflows(limit: i64) -> Vec<$crate::core::workflow::WorkflowSummary>
                = $crate::workflow::workflows;
            workflow(id: i64) -> $crate::core::workflow::WorkflowDetail = $crate::workflow::workflow;
            skip_edge(parent: $crate::core::JobId, child: $crate::core::JobId)
                -> $crate::core::JobRecord = $crate::workflow::skip_edge;
            open_batch(spec: &$crate::core::batches::BatchSpec => spec.clone())
                -> $crate::core::batches::BatchOpened = $crate::batches::open;
            add_to_batch(id: i64, jobs: &[$crate::core::batches::JobSpec] => jobs.to_vec())
                -> Vec<$crate::core::JobId> = $crate::batches::add;
            close_batch(id: i64) -> $crate::core::batches::BatchStatus = $crate::batches::close;
            batch(id: i64) -> $crate::core::batches::BatchStatus = $crate::batches::batch;
            publish(msg: &$crate::core::outbox::NewMessage => msg.clone()) -> i64
                = $crate::outbox::publish;
            outbox_origin() -> String = $crate::outbox::origin;
            outbox_claim(relay: &str => relay.to_owned(), limit: i64, lease: ::std::time::Duration)
                -> Vec<$crate::core::outbox::OutboxMessage> = $crate::outbox::claim;
            outbox_mark(done: &[$crate::core::outbox::Published] => done.to_vec()) -> u64
                = $crate::outbox::mark;
            outbox_fail(id: i64, attempt: i32, error: &str => error.to_owned(),
                        retry_in: ::std::time::Duration) -> bool = $crate::outbox::fail;
            outbox_stats() -> $crate::core::outbox::OutboxStats = $crate::outbox::stats;
            outbox_list(state: $crate::core::outbox::OutboxState, limit: i64)
                -> Vec<$crate::core::outbox::OutboxRow> = $crate::outbox::list;
            prune_outbox(retention: ::std::time::Duration, limit: i64) -> u64
                = $crate::outbox::prune;
            batches(limit: i64) -> Vec<$crate::core::batches::BatchStatus> = $crate::batches::batches;
            spawn_nodes(owner: &str => owner.to_owned(), lease: $crate::core::Lease => lease,
                        step: &str => step.to_owned(), graph: &$crate::core::workflow::Graph => graph.clone())
                -> $crate::core::WorkflowEnqueued = $crate::workflow::spawn_nodes;
            fail_many(owner: &str => owner.to_owned(), failures: &[$crate::core::Failure] => failures.to_vec())
                -> $crate::core::BatchOutcome = $crate::writes::fail_many;
            snooze_many(owner: &str => owner.to_owned(), snoozes: &[$crate::core::Snooze] => snoozes.to_vec())
                -> $crate::core::BatchOutcome = $crate::writes::snooze_many;
            heartbeat(owner: &str => owner.to_owned(), leases: &[$crate::core::Lease] => leases.to_vec(),
                      lease: ::std::time::Duration)
                -> $crate::core::HeartbeatOutcome = $crate::writes::heartbeat;
            record_steps(owner: &str => owner.to_owned(), steps: &[$crate::core::StepWrite] => steps.to_vec())
                -> Vec<::std::result::Result<$crate::core::StepRecorded, $crate::core::LeaseLost>>
                = $crate::steps::record_steps;
            job_steps(id: $crate::core::JobId) -> Vec<$crate::core::StepRecord> = $crate::steps::job_steps;
            park_many(owner: &str => owner.to_owned(), parks: &[$crate::core::Park] => parks.to_vec())
                -> $crate::core::BatchOutcome = $crate::signals::park_many;
            signal(id: $crate::core::JobId, name: &str => name.to_owned(),
                   payload: &$crate::serde_json::Value => payload.clone())
                -> $crate::core::SignalSent = $crate::signals::signal;
            job_signal(id: $crate::core::JobId, name: &str => name.to_owned())
                -> Option<$crate::serde_json::Value> = $crate::signals::job_signal;
            progress_many(owner: &str => owner.to_owned(), reports: &[$crate::core::Progress] => reports.to_vec())
                -> $crate::core::BatchOutcome = $crate::outputs::progress_many;
            release_many(owner: &str => owner.to_owned(), leases: &[$crate::core::Lease] => leases.to_vec())
                -> $crate::core::BatchOutcome = $crate::writes::release_many;
            reap(batch: i64) -> $crate::core::ReapReport = $crate::writes::reap;
            prune(retention: &$crate::core::Retention => retention.clone())
                -> $crate::core::PruneReport = $crate::writes::prune;
            retry(id: $crate::core::JobId, extra_attempts: i32) -> $crate::core::JobRecord
                = $crate::writes::retry;
            cancel(id: $crate::core::JobId) -> $crate::core::CancelOutcome = $crate::writes::cancel;
            get(id: $crate::core::JobId) -> $crate::core::JobRecord = $crate::writes::get;
            job_output(id: $crate::core::JobId) -> $crate::core::JobOutput = $crate::outputs::output;
            worker_beat(beat: &$crate::core::WorkerBeat => beat.clone(), ttl: ::std::time::Duration) -> ()
                = $crate::controls::worker_beat;
            worker_gone(owner: &str => owner.to_owned()) -> () = $crate::controls::worker_gone;
            registry(window: ::std::time::Duration) -> $crate::core::Registry = $crate::controls::registry;
            workers() -> Vec<$crate::core::WorkerInfo> = $crate::controls::workers;
            why(id: $crate::core::JobId) -> $crate::core::WhyReport = $crate::inspect::why;
            search(query: &$crate::core::JobQuery => query.clone()) -> $crate::core::JobPage
                = $crate::inspect::search;
            overview(cap: i64) -> $crate::core::Overview = $crate::inspect::overview;
            queue_health(cap: i64) -> Vec<$crate::core::QueueHealth> = $crate::health::queue_health;
            sample_depth(cap: i64) -> () = $crate::health::sample_depth;
            depth_history(window: ::std::time::Duration) -> Vec<$crate::core::DepthSample>
                = $crate::health::depth_history;
            dead_groups(limit: i64) -> Vec<$crate::core::DeadGroup> = $crate::inspect::dead_groups;
            errored_jobs(per_state: i64) -> Vec<$crate::core::ErroredJob> = $crate::inspect::errored_jobs;
            run_now(id: $crate::core::JobId) -> $crate::core::JobRecord = $crate::writes::run_now;
            record_samples(samples: &[$crate::core::Sample] => samples.to_vec()) -> ()
                = $crate::inspect::record_samples;
            samples(window: ::std::time::Duration) -> Vec<$crate::core::Sample> = $crate::inspect::samples;
            audit(entry: &$crate::core::AuditEntry => entry.clone()) -> () = $crate::inspect::audit;
            audit_log(limit: i64) -> Vec<$crate::core::AuditEntry> = $crate::inspect::audit_log;
            list(filter: &$crate::core::JobFilter => filter.clone()) -> Vec<$crate::core::JobRecord>
                = $crate::writes::list;
            active_count(queues: &[String] => queues.to_vec()) -> i64 = $crate::inspect::active_count;
            any_active(queues: &[String] => queues.to_vec()) -> bool = $crate::inspect::any_active;
            table_health() -> Option<$crate::core::TableStats> = $crate::Engine::table_health;
            stats() -> $crate::core::Stats = $crate::inspect::stats;
            pause_queue(queue: &str => queue.to_owned()) -> $crate::core::QueueControl
                = $crate::controls::pause_queue;
            resume_queue(queue: &str => queue.to_owned()) -> $crate::core::QueueControl
                = $crate::controls::resume_queue;
            remove_queue(queue: &str => queue.to_owned()) -> bool = $crate::controls::remove_queue;
            set_queue_limits(queue: &str => queue.to_owned(), limits: &$crate::core::QueueLimits => limits.clone())
                -> $crate::core::QueueControl = $crate::controls::set_queue_limits;
            queue_controls() -> Vec<$crate::core::QueueControl> = $crate::controls::queue_controls;
            set_key_limit(limit: &$crate::core::KeyLimit => limit.clone()) -> ()
                = $crate::controls::set_key_limit;
            key_limits() -> Vec<$crate::core::KeyLimit> = $crate::controls::key_limits;
            blocked_keys(limit: i64) -> Vec<$crate::core::BlockedKey> = $crate::controls::blocked_keys;
            skip(id: $crate::core::JobId) -> $crate::core::JobRecord = $crate::writes::skip;
            upsert_periodic(def: &$crate::core::Periodic => def.clone()) -> $crate::core::PeriodicState
                = $crate::controls::upsert_periodic;
            remove_periodic(name: &str => name.to_owned()) -> bool = $crate::controls::remove_periodic;
            pause_periodic(name: &str => name.to_owned(), paused: bool) -> bool
                = $crate::controls::pause_periodic;
            list_periodic() -> Vec<$crate::core::PeriodicState> = $crate::controls::list_periodic;
            enqueue_due_periodic(limit: i64) -> Vec<$crate::core::TickEnqueued>
                = $crate::controls::enqueue_due_periodic;
        }
    };
}
#[cfg(test)]
mod tests;
