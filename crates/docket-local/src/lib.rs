//! Docket's queue rules for the engines that keep them outside the database server —
//! SQLite and MariaDB / MySQL — where PostgreSQL keeps them in its SQL functions.
//!
//! One layer, two parts:
//!
//! - **Decisions**, written once over plain rows ([`exec::Row`]): which jobs a claim may
//!   take ([`claim`]), what a failure or an expired lease becomes ([`writes`]), what a
//!   control change writes ([`controls`]), what an operator's read shows ([`inspect`]),
//!   how a job row reads ([`rows`]).
//! - **The engine** ([`Engine`]): its connections and transactions, its clock, its own SQL
//!   text for each statement (named by file, arguments by position: see [`exec`]), and the
//!   few operations whose shape follows how it locks (the claim's reads and locks, the
//!   batch writes after a claim).
//!
//! The shape follows River's driver interface (one executor per driver, the rules in the
//! client) rather than Oban's engines (each engine a whole implementation): the rules are
//! what must not drift, and the SQL is what differs. [`store_impl!`] writes an engine's
//! `Store` implementation from this crate's functions.

pub mod claim;
pub mod controls;
pub mod engine;
pub mod enqueue;
pub mod exec;
pub mod inspect;
pub mod rows;
pub mod sqltext;
pub mod writes;

pub use docket_core as core;
pub use engine::{Engine, Tx};
pub use enqueue::{BulkEnqueued, BULK_CHUNK};
pub use exec::{Arg, Conn, FromValue, Inserted, Row, Value};

/// Runs `$body` (a future over `$e`, a clone of the store, and the owned values bound
/// before it) through [`Engine::detach`].
#[doc(hidden)]
#[macro_export]
macro_rules! __detached {
    ($self:ident, |$e:ident| $body:expr $(, $v:ident = $val:expr)* $(,)?) => {{
        let $e = ::std::clone::Clone::clone($self);
        $(let $v = $val;)*
        $crate::Engine::detach($self, async move { $body.await }).await
    }};
}

/// `impl Store for $ty` from this crate's rules, for a type that implements [`Engine`].
#[macro_export]
macro_rules! store_impl {
    ($ty:ty) => {
        impl $crate::core::Store for $ty {
            type Listener = $crate::core::local::LocalHints;

            async fn migrate(&self) -> $crate::core::Result<()> {
                $crate::__detached!(self, |e| $crate::Engine::migrate(&e))
            }

            async fn leader_try(
                &self,
                owner: &str,
                ttl: ::std::time::Duration,
            ) -> $crate::core::Result<bool> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::leader_try(&e, &owner, ttl),
                    owner = owner.to_owned()
                )
            }

            async fn leader_resign(&self, owner: &str) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::leader_resign(&e, &owner),
                    owner = owner.to_owned()
                )
            }

            fn listen_support(&self, _direct_url: Option<&str>) -> $crate::core::ListenSupport {
                // Hints come from this process only; other processes' work is found by
                // polling.
                $crate::core::ListenSupport::Yes
            }

            async fn listen(
                &self,
                _direct_url: Option<&str>,
            ) -> $crate::core::Result<$crate::core::local::LocalHints> {
                Ok($crate::Engine::hints(self))
            }

            async fn enqueue(
                &self,
                job: &$crate::core::NewJob,
            ) -> $crate::core::Result<$crate::core::Enqueued> {
                $crate::__detached!(
                    self,
                    |e| $crate::enqueue::enqueue(&e, &job),
                    job = job.clone()
                )
            }

            async fn enqueue_many(
                &self,
                jobs: &[$crate::core::NewJob],
            ) -> $crate::core::Result<Vec<$crate::core::Enqueued>> {
                $crate::__detached!(
                    self,
                    |e| $crate::enqueue::enqueue_many(&e, &jobs),
                    jobs = jobs.to_vec()
                )
            }

            async fn claim(
                &self,
                req: &$crate::core::ClaimRequest,
            ) -> $crate::core::Result<Vec<$crate::core::ClaimedJob>> {
                $crate::__detached!(self, |e| $crate::Engine::claim(&e, &req), req = req.clone())
            }

            async fn complete_many(
                &self,
                owner: &str,
                leases: &[$crate::core::Lease],
            ) -> $crate::core::Result<$crate::core::BatchOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::complete_many(&e, &owner, &leases),
                    owner = owner.to_owned(),
                    leases = leases.to_vec()
                )
            }

            async fn complete_delete_many(
                &self,
                owner: &str,
                leases: &[$crate::core::Lease],
            ) -> $crate::core::Result<$crate::core::BatchOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::complete_delete_many(&e, &owner, &leases),
                    owner = owner.to_owned(),
                    leases = leases.to_vec()
                )
            }

            async fn fail_many(
                &self,
                owner: &str,
                failures: &[$crate::core::Failure],
            ) -> $crate::core::Result<$crate::core::BatchOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::fail_many(&e, &owner, &failures),
                    owner = owner.to_owned(),
                    failures = failures.to_vec()
                )
            }

            async fn snooze_many(
                &self,
                owner: &str,
                snoozes: &[$crate::core::Snooze],
            ) -> $crate::core::Result<$crate::core::BatchOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::snooze_many(&e, &owner, &snoozes),
                    owner = owner.to_owned(),
                    snoozes = snoozes.to_vec()
                )
            }

            async fn heartbeat(
                &self,
                owner: &str,
                leases: &[$crate::core::Lease],
                lease: ::std::time::Duration,
            ) -> $crate::core::Result<$crate::core::HeartbeatOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::heartbeat(&e, &owner, &leases, lease),
                    owner = owner.to_owned(),
                    leases = leases.to_vec()
                )
            }

            async fn release_many(
                &self,
                owner: &str,
                leases: &[$crate::core::Lease],
            ) -> $crate::core::Result<$crate::core::BatchOutcome> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::release_many(&e, &owner, &leases),
                    owner = owner.to_owned(),
                    leases = leases.to_vec()
                )
            }

            async fn reap(&self, batch: i64) -> $crate::core::Result<$crate::core::ReapReport> {
                $crate::__detached!(self, |e| $crate::writes::reap(&e, batch))
            }

            async fn prune(
                &self,
                retention: &$crate::core::Retention,
            ) -> $crate::core::Result<$crate::core::PruneReport> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::prune(&e, &retention),
                    retention = retention.clone()
                )
            }

            async fn retry(
                &self,
                id: $crate::core::JobId,
                extra_attempts: i32,
            ) -> $crate::core::Result<$crate::core::JobRecord> {
                $crate::__detached!(self, |e| $crate::writes::retry(&e, id, extra_attempts))
            }

            async fn cancel(
                &self,
                id: $crate::core::JobId,
            ) -> $crate::core::Result<$crate::core::CancelOutcome> {
                $crate::__detached!(self, |e| $crate::writes::cancel(&e, id))
            }

            async fn get(
                &self,
                id: $crate::core::JobId,
            ) -> $crate::core::Result<$crate::core::JobRecord> {
                $crate::__detached!(self, |e| $crate::writes::get(&e, id))
            }

            async fn worker_beat(
                &self,
                beat: &$crate::core::WorkerBeat,
                ttl: ::std::time::Duration,
            ) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::worker_beat(&e, &beat, ttl),
                    beat = beat.clone()
                )
            }

            async fn worker_gone(&self, owner: &str) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::worker_gone(&e, &owner),
                    owner = owner.to_owned()
                )
            }

            async fn workers(&self) -> $crate::core::Result<Vec<$crate::core::WorkerInfo>> {
                $crate::__detached!(self, |e| $crate::controls::workers(&e))
            }

            async fn why(
                &self,
                id: $crate::core::JobId,
            ) -> $crate::core::Result<$crate::core::WhyReport> {
                $crate::__detached!(self, |e| $crate::inspect::why(&e, id))
            }

            async fn search(
                &self,
                query: &$crate::core::JobQuery,
            ) -> $crate::core::Result<$crate::core::JobPage> {
                $crate::__detached!(
                    self,
                    |e| $crate::inspect::search(&e, &query),
                    query = query.clone()
                )
            }

            async fn overview(&self, cap: i64) -> $crate::core::Result<$crate::core::Overview> {
                $crate::__detached!(self, |e| $crate::inspect::overview(&e, cap))
            }

            async fn dead_groups(
                &self,
                limit: i64,
            ) -> $crate::core::Result<Vec<$crate::core::DeadGroup>> {
                $crate::__detached!(self, |e| $crate::inspect::dead_groups(&e, limit))
            }

            async fn run_now(
                &self,
                id: $crate::core::JobId,
            ) -> $crate::core::Result<$crate::core::JobRecord> {
                $crate::__detached!(self, |e| $crate::writes::run_now(&e, id))
            }

            async fn record_samples(
                &self,
                samples: &[$crate::core::Sample],
            ) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::inspect::record_samples(&e, &samples),
                    samples = samples.to_vec()
                )
            }

            async fn samples(
                &self,
                window: ::std::time::Duration,
            ) -> $crate::core::Result<Vec<$crate::core::Sample>> {
                $crate::__detached!(self, |e| $crate::inspect::samples(&e, window))
            }

            async fn audit(&self, entry: &$crate::core::AuditEntry) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::inspect::audit(&e, &entry),
                    entry = entry.clone()
                )
            }

            async fn audit_log(
                &self,
                limit: i64,
            ) -> $crate::core::Result<Vec<$crate::core::AuditEntry>> {
                $crate::__detached!(self, |e| $crate::inspect::audit_log(&e, limit))
            }

            async fn list(
                &self,
                filter: &$crate::core::JobFilter,
            ) -> $crate::core::Result<Vec<$crate::core::JobRecord>> {
                $crate::__detached!(
                    self,
                    |e| $crate::writes::list(&e, &filter),
                    filter = filter.clone()
                )
            }

            async fn active_count(&self, queues: &[String]) -> $crate::core::Result<i64> {
                $crate::__detached!(
                    self,
                    |e| $crate::inspect::active_count(&e, &queues),
                    queues = queues.to_vec()
                )
            }

            async fn any_active(&self, queues: &[String]) -> $crate::core::Result<bool> {
                $crate::__detached!(
                    self,
                    |e| $crate::inspect::any_active(&e, &queues),
                    queues = queues.to_vec()
                )
            }

            async fn table_health(&self) -> $crate::core::Result<Option<$crate::core::TableStats>> {
                $crate::__detached!(self, |e| $crate::Engine::table_health(&e))
            }

            async fn stats(&self) -> $crate::core::Result<$crate::core::Stats> {
                $crate::__detached!(self, |e| $crate::inspect::stats(&e))
            }

            async fn pause_queue(
                &self,
                queue: &str,
            ) -> $crate::core::Result<$crate::core::QueueControl> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::pause_queue(&e, &queue),
                    queue = queue.to_owned()
                )
            }

            async fn resume_queue(
                &self,
                queue: &str,
            ) -> $crate::core::Result<$crate::core::QueueControl> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::resume_queue(&e, &queue),
                    queue = queue.to_owned()
                )
            }

            async fn set_queue_limits(
                &self,
                queue: &str,
                limits: &$crate::core::QueueLimits,
            ) -> $crate::core::Result<$crate::core::QueueControl> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::set_queue_limits(&e, &queue, &limits),
                    queue = queue.to_owned(),
                    limits = limits.clone()
                )
            }

            async fn queue_controls(
                &self,
            ) -> $crate::core::Result<Vec<$crate::core::QueueControl>> {
                $crate::__detached!(self, |e| $crate::controls::queue_controls(&e))
            }

            async fn set_key_limit(
                &self,
                limit: &$crate::core::KeyLimit,
            ) -> $crate::core::Result<()> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::set_key_limit(&e, &limit),
                    limit = limit.clone()
                )
            }

            async fn key_limits(&self) -> $crate::core::Result<Vec<$crate::core::KeyLimit>> {
                $crate::__detached!(self, |e| $crate::controls::key_limits(&e))
            }

            async fn blocked_keys(
                &self,
                limit: i64,
            ) -> $crate::core::Result<Vec<$crate::core::BlockedKey>> {
                $crate::__detached!(self, |e| $crate::controls::blocked_keys(&e, limit))
            }

            async fn skip(
                &self,
                id: $crate::core::JobId,
            ) -> $crate::core::Result<$crate::core::JobRecord> {
                $crate::__detached!(self, |e| $crate::writes::skip(&e, id))
            }

            async fn unblock_keys(&self, _batch: i32) -> $crate::core::Result<u64> {
                // Nothing is ever flagged: a claim decides every key inside its own
                // transaction, so there is nothing to sweep.
                Ok(0)
            }

            async fn upsert_periodic(
                &self,
                def: &$crate::core::Periodic,
            ) -> $crate::core::Result<$crate::core::PeriodicState> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::upsert_periodic(&e, &def),
                    def = def.clone()
                )
            }

            async fn remove_periodic(&self, name: &str) -> $crate::core::Result<bool> {
                $crate::__detached!(
                    self,
                    |e| $crate::controls::remove_periodic(&e, &name),
                    name = name.to_owned()
                )
            }

            async fn list_periodic(
                &self,
            ) -> $crate::core::Result<Vec<$crate::core::PeriodicState>> {
                $crate::__detached!(self, |e| $crate::controls::list_periodic(&e))
            }

            async fn enqueue_due_periodic(
                &self,
                limit: i64,
            ) -> $crate::core::Result<Vec<$crate::core::TickEnqueued>> {
                $crate::__detached!(self, |e| $crate::controls::enqueue_due_periodic(&e, limit))
            }
        }
    };
}
