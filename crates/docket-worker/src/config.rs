//! Worker configuration. Every field's doc ends with its default.

use std::time::Duration;

use docket_core::{Periodic, Retention};

/// One queue a worker serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Queue name.
    pub name: String,
    /// Jobs of this queue running at once in this process.
    pub concurrency: usize,
}

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Queues and their per-process concurrency. Defaults to none listed, which serves
    /// `default` × 100.
    pub queues: Vec<QueueConfig>,
    /// Lease length of a claim; heartbeats extend it. Shorter leases recover crashed work
    /// sooner, longer ones survive longer database hiccups. Defaults to 30 s.
    pub lease: Duration,
    /// How often running leases are extended. Must be well under `lease` so a couple of
    /// missed beats do not lose the lease. Defaults to `lease / 3`.
    pub heartbeat_interval: Duration,
    /// Fallback poll when no notification arrives (jittered ±20 %). Notifications are only
    /// hints; this bounds pickup latency when one is lost. Defaults to 2 s.
    pub poll_interval: Duration,
    /// Fairness: a job ready for longer than this is claimed before any job that is not,
    /// oldest first, whatever its priority; `None` is strict priority order. Defaults to
    /// 60 s.
    pub starvation_bound: Option<Duration>,
    /// Largest claim batch. Defaults to 200: with rows deleted on success a claim is a
    /// larger share of a job's cost, and batches of 200 drained ~5 % faster than 100 in one
    /// default process (docs/benchmarks.md, 2026-12-04). A claim never takes more than the
    /// free slots plus the prefetch depth allow.
    pub claim_batch: usize,
    /// Claims one queue may have in flight at once (that many fetchers share its claim
    /// credits). One claim at a time leaves the database idle while the claim's round trips
    /// and commit travel, and credits freed meanwhile wait for the next one; a second claim
    /// in flight overlaps them. Every claim is a transaction of its own, so limits, key order
    /// and the starvation bound hold as with one. 1..=16; defaults to 2.
    pub claims_in_flight: usize,
    /// While there is a backlog (the last claim came back full), how long the fetcher waits
    /// for more free slots so one claim takes many jobs. Defaults to 2 ms.
    pub claim_coalesce: Duration,
    /// Jobs a queue may claim ahead of its free slots (the prefetch buffer), so that claiming
    /// is not bound to concurrency: a worker with 10 slots of quick handlers claims batches of
    /// up to `claim_batch` and starts them as slots free, instead of one round trip per 10
    /// jobs. A buffered job is leased, fenced and heartbeated like a running one and never
    /// starts once its lease is lost or about to be.
    ///
    /// What the buffer may hold is measured, not assumed (`pace.rs`): nothing before a first
    /// handler has finished; then what the queue's slots start in a quarter of
    /// `prefetch_timeout` at the handlers' mean run time, at most this value. The depth grows
    /// by a claim's size while claims come back full and halves whenever buffered jobs time
    /// out; while jobs still wait in it, the buffer is refilled once half of what the queue
    /// may hold is free (or it runs dry), one claim for many jobs. So no-op handlers get the whole buffer and handlers of 0.3-1 s on a few slots get
    /// one job or none (a buffer of 200 there was claimed, waited out, released and claimed
    /// again, over and over). Work that holds a limit while running (a queue with a
    /// `max_running` or a rate, an ordering or concurrency key) is never buffered: claims take
    /// it only for run slots free now (`ClaimRequest::controlled`). 0 claims only for free
    /// slots.
    /// Defaults to 600: a queue drains at most (slots + depth) jobs per claim round trip; with
    /// completions that delete, 600 took a 10-slot worker of no-op handlers from ~0.7 to ~0.8
    /// of the SQL floor at 20,000 jobs and 1,000 measured no better (docs/benchmarks.md).
    pub prefetch: usize,
    /// How long a buffered job may wait for a slot before it goes back to the queue (released:
    /// its attempt is not counted), so a busy worker does not hoard what an idle one could run.
    /// Defaults to 1 s.
    pub prefetch_timeout: Duration,
    /// Largest completion batch. Defaults to 500.
    pub completion_batch: usize,
    /// How long the completer waits to fill a batch. Defaults to 2 ms.
    pub completion_flush: Duration,
    /// Maximum runtime of one attempt for kinds without their own. Defaults to 5 min.
    pub max_runtime: Duration,
    /// How long a cancelled handler may take to stop before it is dropped. Defaults to 5 s.
    pub cancel_grace: Duration,
    /// How long shutdown waits for running jobs before cancelling them and releasing their
    /// jobs back to the queue. Defaults to 30 s.
    pub shutdown_timeout: Duration,
    /// Listen for wake-ups and cancellations (LISTEN/NOTIFY). Defaults to true.
    pub listen: bool,
    /// URL for the LISTEN connection when the pool goes through a transaction-mode pooler
    /// (LISTEN needs a direct connection). Defaults to the pool's own connect options.
    pub listen_url: Option<String>,
    /// Take part in leader election and run the reaper and pruner while leader. Defaults to
    /// true.
    pub maintenance: bool,
    /// How long one renewal of leadership lasts; a crashed or paused leader blocks
    /// maintenance at most this long. Renewed every `schedule_interval` (and at least every
    /// `reap_interval`), so it must be longer than both.
    /// Defaults to 15 s.
    pub leader_ttl: Duration,
    /// How often the leader reaps expired leases. Defaults to 5 s.
    pub reap_interval: Duration,
    /// Expired leases reaped per statement. Defaults to 1000.
    pub reap_batch: i64,
    /// How often the leader prunes finished jobs. Defaults to 60 s.
    pub prune_interval: Duration,
    /// Whether a job that succeeds keeps its row, in state `succeeded` until the pruner's
    /// `retention.finished`, for `docket get`, the dashboard's lists and searches. Defaults to
    /// false: a success deletes the row at once (fenced like every completion; a keyed job
    /// still releases its keys), as graphile-worker and Que do. A deleted row costs the
    /// database no new row version and no index entries, which took one default worker
    /// from 0.57–0.68 to 0.70–0.85 of the SQL floor (docs/benchmarks.md, 2026-12-04). What
    /// is not kept: the row itself — throughput and run-time charts come from the workers'
    /// samples, and failed, dead and cancelled jobs are always kept. Jobs completed inside
    /// the handler's own transaction (`complete_in`) keep their row either way.
    pub keep_succeeded: bool,
    /// Retention of finished and dead jobs, and of outputs. Defaults to 1 day / 30 days /
    /// 1 day.
    pub retention: Retention,
    /// The largest output a handler may record (`JobContext::set_output`), in bytes of
    /// stored JSON text. Defaults to 1 MiB; at most 16 MiB
    /// ([`docket_core::output::MAX_OUTPUT_BYTES`], the engines' hard cap).
    pub max_output_bytes: usize,
    /// Periodic (cron) jobs this worker declares. Stored at start (creating or updating the
    /// definitions); whichever worker leads enqueues their ticks. Defaults to none.
    pub periodic: Vec<Periodic>,
    /// How often the leader looks for due periodic ticks (and renews leadership). Defaults
    /// to 1 s, the resolution of cron expressions with seconds.
    pub schedule_interval: Duration,
    /// How often the worker reports itself (queues, slots, jobs held) to the registry of live
    /// workers; it counts as gone three intervals after its last report, and removes itself
    /// when it stops. Defaults to 5 s.
    pub presence_interval: Duration,
    /// How often the worker adds its per-minute samples (jobs done and failed, queue wait,
    /// run time per queue) to the database for the dashboard's charts. Defaults to 10 s.
    pub sample_interval: Duration,
    /// Serverless mode: no LISTEN, and the leader's maintenance (election, cron, reaper,
    /// pruner) runs only right after a claim, never on a timer of its own. An idle worker
    /// then sends one burst of statements per `poll_interval` and nothing in between, so a
    /// compute that suspends after N minutes without queries can sleep when `poll_interval`
    /// is longer than N (see docs/deployment.md). Defaults to false.
    pub serverless: bool,
    /// Worker identity; must be unique per process start. Defaults to
    /// `<hostname>-<pid>-<random>`.
    pub owner: String,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        let lease = Duration::from_secs(30);
        WorkerConfig {
            queues: Vec::new(),
            lease,
            heartbeat_interval: lease / 3,
            poll_interval: Duration::from_secs(2),
            starvation_bound: Some(Duration::from_secs(60)),
            claim_batch: 200,
            claims_in_flight: 2,
            claim_coalesce: Duration::from_millis(2),
            prefetch: 600,
            prefetch_timeout: Duration::from_secs(1),
            completion_batch: 500,
            completion_flush: Duration::from_millis(2),
            max_runtime: Duration::from_secs(300),
            cancel_grace: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(30),
            listen: true,
            listen_url: None,
            maintenance: true,
            leader_ttl: Duration::from_secs(15),
            reap_interval: Duration::from_secs(5),
            reap_batch: 1000,
            prune_interval: Duration::from_secs(60),
            keep_succeeded: false,
            retention: Retention::default(),
            max_output_bytes: docket_core::output::DEFAULT_MAX_OUTPUT_BYTES,
            periodic: Vec::new(),
            schedule_interval: Duration::from_secs(1),
            presence_interval: Duration::from_secs(5),
            sample_interval: Duration::from_secs(10),
            serverless: false,
            owner: default_owner(),
        }
    }
}

/// This machine's host name (`host` when none can be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

/// The owner name a worker writes into its leases unless configured,
/// `<hostname>-<pid>-<8 random hex>`: unique per process start even when a container reuses
/// a hostname and a pid.
pub fn default_owner() -> String {
    let host = host_name();
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

impl WorkerConfig {
    /// The queues to serve: the configured ones, or `default` × 100 when none is.
    pub fn effective_queues(&self) -> Vec<QueueConfig> {
        if self.queues.is_empty() {
            vec![QueueConfig {
                name: "default".into(),
                concurrency: 100,
            }]
        } else {
            self.queues.clone()
        }
    }

    /// Declares a periodic job (stored at start; see [`WorkerConfig::periodic`]).
    #[must_use = "a builder method returns the changed value"]
    pub fn periodic(mut self, p: Periodic) -> Self {
        self.periodic.push(p);
        self
    }

    /// Serves `queue` with `concurrency` (in addition to queues added before; the same name
    /// again replaces its concurrency).
    #[must_use = "a builder method returns the changed value"]
    pub fn queue(mut self, queue: &str, concurrency: usize) -> Self {
        self.queues.retain(|q| q.name != queue);
        self.queues.push(QueueConfig {
            name: queue.into(),
            concurrency: concurrency.max(1),
        });
        self
    }

    /// Keep succeeded jobs' rows until the pruner's retention (the field of the same name
    /// says what that costs; the default deletes them as they succeed).
    #[must_use = "a builder method returns the changed value"]
    pub fn keep_succeeded(mut self, keep: bool) -> Self {
        self.keep_succeeded = keep;
        self
    }

    /// Sets the largest output a handler may record (bytes of stored JSON text, at most
    /// 16 MiB).
    #[must_use = "a builder method returns the changed value"]
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets how long a job with an output stays readable after it finished.
    #[must_use = "a builder method returns the changed value"]
    pub fn output_retention(mut self, keep: Duration) -> Self {
        self.retention.outputs = keep;
        self
    }

    /// Sets the lease and a heartbeat interval of a third of it.
    #[must_use = "a builder method returns the changed value"]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self.heartbeat_interval = lease / 3;
        self
    }
}

/// A worker configuration that cannot run, found by [`WorkerConfig::validate`] (which
/// [`crate::Worker::new`] calls).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Leadership is renewed at least every `reap_interval` (every `min(schedule_interval,
    /// reap_interval)`); a TTL not longer could lapse between renewals and hand leadership
    /// around.
    #[error("leader_ttl must be longer than reap_interval (leadership is renewed every {every:?}; leader_ttl is {ttl:?})")]
    LeaderTtlTooShort {
        /// The configured TTL.
        ttl: Duration,
        /// How often leadership is renewed.
        every: Duration,
    },
    /// A lease must be renewed before it runs out.
    #[error("heartbeat_interval ({heartbeat:?}) must be shorter than the lease ({lease:?})")]
    HeartbeatNotShorterThanLease {
        /// The configured interval.
        heartbeat: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// A queue name the store would refuse.
    #[error("queue {name:?}: {reason}")]
    Queue {
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// A periodic definition whose schedule does not parse.
    #[error("periodic {name:?}: {reason}")]
    Periodic {
        /// The definition's name.
        name: String,
        /// Why its schedule is refused.
        reason: String,
    },
    /// An owner the registry and the leases cannot carry: 1–200 bytes, no control
    /// characters (it is printed by `docket workers` and in logs).
    #[error("owner {owner:?} must be 1..=200 bytes without control characters")]
    Owner {
        /// The owner as given.
        owner: String,
    },
    /// `claims_in_flight` outside 1..=16 (0 would never claim; each one is a task and, while
    /// its claim is out, a pooled connection).
    #[error("claims_in_flight must be 1..=16 (got {0})")]
    ClaimsInFlight(usize),
    /// A size outside what the worker can hold: every slot, buffered job and batch entry is
    /// a semaphore permit or channel place, so a value near `usize::MAX` would overflow or
    /// panic in tokio instead of failing here (and 0 slots, claim or completion batch would
    /// never run anything).
    #[error("{field} must be {min}..={max} (got {value})")]
    OutOfRange {
        /// The setting, as `WorkerConfig` names it (`queue "q" concurrency` for a queue).
        field: String,
        /// The value given.
        value: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// [`crate::Worker::run`] or [`crate::Worker::drain`] was called a second time.
    #[error("a worker runs once")]
    AlreadyRan,
}

/// Largest queue concurrency, prefetch, claim batch or completion batch: far above what one
/// process runs (a claim of 100,000 rows is already one very long transaction), far below
/// where permits and channel sizes overflow.
pub const MAX_SIZE: usize = 100_000;

impl WorkerConfig {
    /// Checks that this configuration can run (what [`crate::Worker::new`] checks), with the
    /// queue list as the worker will serve it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // The election renews at least every reap interval; a TTL no longer than that could
        // lapse between two renewals.
        let renew = self.reap_interval;
        if self.maintenance && self.leader_ttl <= renew {
            return Err(ConfigError::LeaderTtlTooShort {
                ttl: self.leader_ttl,
                every: renew,
            });
        }
        if self.owner.is_empty()
            || self.owner.len() > 200
            || self.owner.chars().any(char::is_control)
        {
            return Err(ConfigError::Owner {
                owner: self.owner.clone(),
            });
        }
        for q in &self.effective_queues() {
            docket_core::validate::queue(&q.name).map_err(|e| ConfigError::Queue {
                name: q.name.clone(),
                reason: e.to_string(),
            })?;
        }
        for p in &self.periodic {
            p.schedule().map_err(|e| ConfigError::Periodic {
                name: p.name.clone(),
                reason: e.to_string(),
            })?;
        }
        if !(1..=16).contains(&self.claims_in_flight) {
            return Err(ConfigError::ClaimsInFlight(self.claims_in_flight));
        }
        let queues = self.effective_queues();
        let sizes = queues
            .iter()
            .map(|q| (format!("queue {:?} concurrency", q.name), q.concurrency, 1))
            .chain([
                ("prefetch".to_string(), self.prefetch, 0),
                ("claim_batch".to_string(), self.claim_batch, 1),
                ("completion_batch".to_string(), self.completion_batch, 1),
            ])
            .map(|(f, v, min)| (f, v, min, MAX_SIZE))
            .chain([(
                "max_output_bytes".to_string(),
                self.max_output_bytes,
                2,
                docket_core::output::MAX_OUTPUT_BYTES,
            )]);
        for (field, value, min, max) in sizes {
            if !(min..=max).contains(&value) {
                return Err(ConfigError::OutOfRange {
                    field,
                    value,
                    min,
                    max,
                });
            }
        }
        if self.heartbeat_interval >= self.lease {
            return Err(ConfigError::HeartbeatNotShorterThanLease {
                heartbeat: self.heartbeat_interval,
                lease: self.lease,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_the_registry_and_leases_cannot_carry_are_refused() {
        assert_eq!(WorkerConfig::default().validate(), Ok(()));
        for bad in [
            String::new(),
            "x".repeat(201),
            "w\u{1b}[2J".into(),
            "a\nb".into(),
        ] {
            let c = WorkerConfig {
                owner: bad.clone(),
                ..WorkerConfig::default()
            };
            assert_eq!(c.validate(), Err(ConfigError::Owner { owner: bad }));
        }
        let ok = WorkerConfig {
            owner: "é".repeat(100),
            ..WorkerConfig::default()
        };
        assert_eq!(ok.validate(), Ok(()), "200 bytes of UTF-8 is fine");
    }

    #[test]
    fn sizes_a_worker_cannot_hold_are_refused() {
        let field = |c: WorkerConfig| match c.validate() {
            Err(ConfigError::OutOfRange { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        for bad in [usize::MAX, MAX_SIZE + 1] {
            let c = WorkerConfig {
                prefetch: bad,
                ..WorkerConfig::default()
            };
            assert_eq!(field(c), "prefetch");
            let c = WorkerConfig::default().queue("q", bad);
            assert_eq!(field(c), "queue \"q\" concurrency");
        }
        for f in ["claim_batch", "completion_batch"] {
            let mut c = WorkerConfig::default();
            *(if f == "claim_batch" {
                &mut c.claim_batch
            } else {
                &mut c.completion_batch
            }) = 0;
            assert_eq!(field(c), f);
        }
        let zero = WorkerConfig {
            queues: vec![QueueConfig {
                name: "q".into(),
                concurrency: 0,
            }],
            ..WorkerConfig::default()
        };
        assert_eq!(field(zero), "queue \"q\" concurrency");
        let edge = WorkerConfig {
            prefetch: 0,
            claim_batch: MAX_SIZE,
            ..WorkerConfig::default().queue("q", MAX_SIZE)
        };
        assert_eq!(edge.validate(), Ok(()), "the bounds themselves are allowed");
    }

    #[test]
    fn claims_in_flight_outside_one_to_sixteen_are_refused() {
        for (n, ok) in [
            (0, false),
            (1, true),
            (16, true),
            (17, false),
            (usize::MAX, false),
        ] {
            let c = WorkerConfig {
                claims_in_flight: n,
                ..WorkerConfig::default()
            };
            let want = if ok {
                Ok(())
            } else {
                Err(ConfigError::ClaimsInFlight(n))
            };
            assert_eq!(c.validate(), want, "{n}");
        }
    }
}
