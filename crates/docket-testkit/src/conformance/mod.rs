//! The conformance suite: the engine contract, written once against the seam
//! ([`docket_core::Store`]) and run for every engine (the counterpart of River's
//! `riverdrivertest` and of Oban's one suite over every engine).
//!
//! An engine's tests implement [`Harness`] — a fresh store of its own, and a way to move
//! that store's clock — and expand [`conformance_suite!`](crate::conformance_suite) once:
//!
//! ```text
//! docket_testkit::conformance_suite!(docket_testkit::conformance::PgHarness);
//! ```
//!
//! Cases never touch an engine's tables: time moves through [`Harness::advance`], and every
//! expectation is read back through the seam (`get`, `list`, `stats`, the outcomes of the
//! fenced writes). Cases: [`lifecycle`] (enqueue, claim, complete, retry, dead, snooze,
//! release, cancel, replay, unique keys), [`fencing`] (every fenced write by a stale holder,
//! superseded by another worker or by its own reclaim, or past its lease), [`maintenance`]
//! (reaper, prune, leader election, periodic ticks), [`cancel`] (calls dropped part way
//! leave no transaction behind), [`controls`] (pause, queue and key
//! limits, ordering keys, priorities and the starvation bound, delays), [`why`] (every gate
//! that holds a job, agreeing with the claim), [`inspect`] (search, overview, bulk actions,
//! samples, audit), [`health`] (retrying and
//! running ages, the per-minute depth samples), [`outputs`] (results stored by the fenced completion, kept for their
//! window, bounded), [`steps`] (memoized steps recorded once, under the claim), [`signals`]
//! (signals wake parked jobs once, refused for finished ones), [`outbox`] (a relay's claim
//! in key order, fenced marks), [`workflows`] (graphs: readiness,
//! fencing, failure policies, dependency outputs), and [`model`], the
//! model-based test: random sequences of every operation against an in-memory model of the
//! state machine, compared after every step.

pub mod batches;
pub mod cancel;
pub mod controls;
pub mod fencing;
pub mod health;
pub mod inspect;
pub mod lifecycle;
pub mod maintenance;
pub mod model;
mod mysql;
pub mod outbox;
pub mod outputs;
mod postgres;
pub mod signals;
mod sqlite;
pub mod steps;
pub mod why;
pub mod workflow_model;
pub mod workflows;

use std::future::Future;
use std::time::Duration;

use docket_core::{ClaimRequest, ClaimedJob, JobFilter, JobId, JobRecord, Lease, NewJob, Store};

pub use mysql::MySqlHarness;
pub use postgres::PgHarness;
pub use sqlite::SqliteHarness;

/// What the suite needs from an engine's test setup.
pub trait Harness: Sized + Send + Sync + 'static {
    /// The engine's store.
    type S: Store;

    /// A fresh, migrated, empty store of its own (its own database, schema or file), so
    /// cases run in parallel.
    fn fresh() -> impl Future<Output = Self> + Send;

    /// The store under test.
    fn store(&self) -> &Self::S;

    /// Another store on the same data with connections of its own (a second worker).
    fn second(&self) -> impl Future<Output = Self::S> + Send;

    /// Moves this store's clock forward by `d`: every deadline (run_at, lease expiry, the
    /// leader's term, cron ticks, retention) comes `d` nearer, as if `d` had passed.
    fn advance(&self, d: Duration) -> impl Future<Output = ()> + Send;

    /// Empties the store — jobs, queue controls, key limits — and restarts job ids, so the
    /// model test runs case after case on one store.
    fn reset(&self) -> impl Future<Output = ()> + Send;

    /// The database's clock now (times read back are compared with it).
    fn now(&self) -> impl Future<Output = chrono::DateTime<chrono::Utc>> + Send;

    /// Who the engine records as the author of an operator action (a cancel request's
    /// history entry): on PostgreSQL the connection's role.
    fn actor(&self) -> impl Future<Output = String> + Send;
}

/// Expands to one `#[tokio::test]` per conformance case, for harness type `$h`.
#[macro_export]
macro_rules! conformance_suite {
    ($h:ty) => {
        $crate::conformance_suite!(@cases $h;
            lifecycle::enqueue_claim_complete,
            lifecycle::enqueue_many_keeps_order_and_unique_keys_dedupe,
            lifecycle::retry_backs_off_then_dies_when_attempts_run_out,
            lifecycle::discard_cancel_snooze_and_release,
            lifecycle::cancel_pending_and_running_then_replay,
            lifecycle::invalid_input_writes_nothing,
            lifecycle::racing_claims_never_fail_or_share_a_job,
            cancel::a_call_dropped_at_any_await_leaves_no_transaction_open,
            fencing::stale_writes_by_a_superseded_worker_are_refused,
            fencing::stale_writes_after_the_same_worker_reclaimed_are_refused,
            fencing::writes_past_the_lease_are_refused_before_any_reap,
            fencing::a_wrong_owner_cannot_write,
            fencing::completing_by_delete_removes_only_held_rows,
            maintenance::reaper_takes_only_expired_leases,
            maintenance::prune_deletes_only_past_retention,
            maintenance::one_leader_at_a_time,
            maintenance::the_registry_tells_live_stopped_and_vanished_workers_apart,
            maintenance::periodic_ticks_are_enqueued_once,
            maintenance::a_paused_schedule_enqueues_nothing_until_resumed,
            controls::paused_queues_hand_out_nothing,
            controls::a_queue_row_is_removed_only_when_no_work_remains,
            controls::queue_and_key_limits_bound_claims,
            controls::ordering_keys_run_one_at_a_time_in_order,
            controls::priority_then_age_with_a_starvation_bound,
            controls::delayed_jobs_wait_for_their_time,
            controls::claims_bound_controlled_work_to_free_slots,
            controls::a_deep_backlog_of_a_held_key_holds_back_no_one,
            why::why_names_every_gate_that_holds_a_job,
            why::the_worker_registry_lists_live_workers_only,
            inspect::search_filters_and_pages,
            inspect::search_finds_retrying_and_scheduled_jobs,
            inspect::errored_jobs_are_retrying_and_dead_ones_with_their_histories,
            inspect::search_windows_a_filter_no_index_serves,
            inspect::overview_counts_with_a_cap_and_dead_jobs_group,
            inspect::bulk_actions_and_run_now,
            inspect::samples_add_up_and_the_audit_log_keeps_actions,
            health::queue_health_and_depth_history,
            outputs::an_output_is_kept_for_its_window,
            outputs::a_batch_records_only_held_leases,
            outputs::an_output_over_the_cap_writes_nothing,
            outputs::progress_is_written_only_under_the_claim,
            steps::steps_are_recorded_once_under_the_claim,
            steps::a_batch_of_steps_is_fenced_step_by_step,
            steps::why_names_a_durable_sleep,
            signals::signals_wake_parked_jobs_once,
            workflows::a_graph_runs_each_node_after_its_parents,
            workflows::a_refused_graph_writes_nothing,
            workflows::a_stale_parent_unblocks_nothing,
            workflows::failure_policies_apply_on_every_end,
            workflows::an_operator_cancel_of_a_waiting_node_is_applied_once,
            workflows::an_edge_is_consumed_once,
            workflows::finished_workflows_are_pruned,
            workflows::a_workflow_is_read_cancelled_and_retried_whole,
            workflows::a_running_node_spawns_once_under_its_claim,
            workflows::a_held_edge_is_skipped_once,
            batches::a_batch_fires_its_callbacks_when_every_member_ended,
            batches::a_batch_callback_fires_once_per_occasion,
            batches::an_open_batch_takes_members_until_closed,
            batches::a_refused_batch_writes_nothing,
            batches::an_open_batch_is_not_pruned,
            outbox::a_keys_messages_are_claimed_one_at_a_time_in_order,
            outbox::a_stale_relay_marks_nothing,
            outbox::a_failed_publish_waits_out_its_delay,
            outbox::a_refused_message_writes_nothing,
            outbox::published_messages_are_pruned_after_their_retention,
        );
        /// The model-based test over this engine (`conformance::model`).
        #[test]
        fn store_matches_the_state_machine_model() {
            $crate::conformance::model::run::<$h>();
        }
        /// The model-based test of workflows over this engine (`conformance::workflow_model`).
        #[test]
        fn workflows_match_the_model() {
            $crate::conformance::workflow_model::run::<$h>();
        }
    };
    (@cases $h:ty; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let h = <$h as $crate::conformance::Harness>::fresh().await;
                $crate::conformance::$module::$case(&h).await;
            }
        )*
    };
}

/// A lease long enough that real time never ends it within a case.
pub const LONG: Duration = Duration::from_secs(600);

/// A claim of up to `n` jobs of `queue` for `owner`.
pub async fn claim<S: Store>(
    s: &S,
    queue: &str,
    n: i32,
    owner: &str,
    lease: Duration,
) -> Vec<ClaimedJob> {
    s.claim(&ClaimRequest {
        queue: queue.into(),
        limit: n,
        owner: owner.into(),
        lease,
        starvation: None,
        controlled: None,
    })
    .await
    .expect("claim")
}

/// Enqueues and returns the id.
pub async fn put<S: Store>(s: &S, job: NewJob) -> JobId {
    s.enqueue(&job).await.expect("enqueue").id
}

/// A no-op job of `queue`.
pub fn job(queue: &str) -> NewJob {
    NewJob::new(queue, "conformance", serde_json::json!({}))
}

/// The record of `id`.
pub async fn get<S: Store>(s: &S, id: JobId) -> JobRecord {
    s.get(id).await.expect("get")
}

/// Every job, oldest first.
pub async fn all<S: Store>(s: &S) -> Vec<JobRecord> {
    let mut v = s
        .list(&JobFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .expect("list");
    v.sort_by_key(|r| r.id);
    v
}

/// The lease of a claimed job.
pub fn lease(j: &ClaimedJob) -> Lease {
    j.lease()
}
