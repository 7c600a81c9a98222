//! [`Worker`]: wires the services together and runs them until shutdown (or until drained).

use std::collections::HashMap;
use std::sync::Arc;

use docket_core::{Lease, ListenSupport, Store};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::presence::Presence;
use crate::service::{Cadence, Election, WhileLeading};
use crate::supervisor::Supervisor;

use crate::completer::{Completer, CompleterService};
use crate::config::WorkerConfig;
use crate::fetcher::Fetcher;
use crate::heartbeat::{BeatReport, Heartbeater};
use crate::maintenance::{
    DepthSampler, KeyHandOver, KeySweeper, Leader, Pruner, Reaper, Scheduler,
};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::notifier::Notifier;
use crate::registry::Registry;
use crate::runtime::Shared;

/// Shutdown requests: the first token asks for a graceful stop (finish in-flight jobs up to
/// the deadline), the second for an immediate one.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    /// Stop claiming; let running jobs finish up to `shutdown_timeout`.
    pub graceful: CancellationToken,
    /// Stop now: cancel running jobs and release them at once.
    pub immediate: CancellationToken,
}

impl Shutdown {
    /// Tokens that fire on SIGTERM or ctrl-c: the first signal graceful, the second immediate.
    pub fn on_signals() -> Shutdown {
        let s = Shutdown::default();
        let t = s.clone();
        tokio::spawn(async move {
            for token in [t.graceful, t.immediate] {
                wait_signal().await;
                token.cancel();
            }
        });
        s
    }
}

async fn wait_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunReport {
    /// Counters at the end.
    pub metrics: MetricsSnapshot,
    /// Jobs cancelled at the shutdown deadline and released to the queue.
    pub released_at_shutdown: usize,
    /// Jobs whose outcome could not be written before exit (their leases will expire and the
    /// reaper will requeue them).
    pub abandoned: usize,
}

/// Errors that end a run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Misconfiguration.
    #[error("invalid worker configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// A store failure at start.
    #[error(transparent)]
    Store(#[from] docket_core::StoreError),
    /// A runtime service panicked or stopped on its own. The worker shut down (in-flight
    /// jobs finished or released) rather than run on looking alive and doing nothing; exit
    /// non-zero so the process supervisor restarts it.
    #[error("worker service {service} failed: {reason}; the worker stopped")]
    ServiceFailed {
        /// The service (fetcher, heartbeater, reaper, ...).
        service: String,
        /// Its panic or error.
        reason: String,
    },
}

/// A worker process's runtime: fetchers per queue, executor tasks, the completer, the
/// heartbeater, the notifier and (when elected) the reaper and pruner.
pub struct Worker<S: Store> {
    shared: Arc<Shared<S>>,
    rx: std::sync::Mutex<Option<mpsc::Receiver<crate::completer::Completion>>>,
    slots: HashMap<String, Arc<Semaphore>>,
    idle: Arc<Notify>,
    leader: Arc<Leader<S>>,
}

impl<S: Store> Worker<S> {
    /// Builds a worker on any engine's store. Nothing runs until [`Worker::run`].
    pub fn new(
        store: S,
        registry: Registry<S>,
        mut config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        config.validate()?;
        config.queues = config.effective_queues();
        let capacity: usize = config.queues.iter().map(|q| q.concurrency).sum();
        let (tx, rx) = mpsc::channel(capacity.max(config.completion_batch) * 2);
        // Claim credits: the queue's slots plus its prefetch depth; run slots: its slots.
        let slots = config
            .queues
            .iter()
            .map(|q| {
                let credits = q.concurrency + config.prefetch;
                (q.name.clone(), Arc::new(Semaphore::new(credits)))
            })
            .collect();
        let run_slots = config
            .queues
            .iter()
            .map(|q| (q.name.clone(), Arc::new(Semaphore::new(q.concurrency))))
            .collect();
        let depth = config
            .queues
            .iter()
            .map(|q| {
                // Starts empty: nothing is buffered before the handlers' pace is measured,
                // and it grows only while claims come back full (see the fetcher), so slow
                // handlers never get a buffer they cannot start in time.
                let d = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                (q.name.clone(), d)
            })
            .collect();
        let pace = config
            .queues
            .iter()
            .map(|q| (q.name.clone(), Arc::default()))
            .collect();
        let wakeups = config
            .queues
            .iter()
            .map(|q| (q.name.clone(), Arc::new(Notify::new())))
            .collect();
        let leader = Arc::new(Leader::new(
            store.clone(),
            config.owner.clone(),
            config.leader_ttl,
        ));
        Ok(Worker {
            shared: Arc::new(Shared {
                erased_store: Arc::new(store.clone()),
                step_store: Arc::new(crate::steps::StepBatcher::new(
                    store.clone(),
                    config.owner.as_str().into(),
                )),
                store,
                registry,
                config,
                tracker: Default::default(),
                metrics: Default::default(),
                telemetry: Default::default(),
                completions: tx,
                wakeups,
                claimed: Arc::new(Notify::new()),
                beat_now: Notify::new(),
                faults: Default::default(),
                run_slots,
                depth,
                pace,
                buffer_release: CancellationToken::new(),
                credit_returned: Notify::new(),
            }),
            rx: std::sync::Mutex::new(Some(rx)),
            slots,
            idle: Arc::new(Notify::new()),
            leader,
        })
    }

    /// This worker's identity (lease owner).
    pub fn owner(&self) -> &str {
        &self.shared.config.owner
    }

    /// Live counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.shared.metrics.clone()
    }

    /// Completes once this worker is listening for wake-ups and a claim has come back since:
    /// from then on a job enqueued is picked up by a wake-up, not by the next poll. Waits on
    /// the claims' own signal (a worker that never connects its listener never completes
    /// this: bound it with a time-out).
    pub async fn ready(&self) {
        loop {
            let next_claim = self.shared.claimed.notified();
            tokio::pin!(next_claim);
            // Registered before the check, so a claim between the two is not missed.
            next_claim.as_mut().enable();
            let m = self.shared.metrics.snapshot();
            if m.listen_connects > 0 && m.claims > 0 {
                return;
            }
            next_claim.await;
        }
    }

    /// Jobs in flight right now.
    pub fn in_flight(&self) -> Vec<Lease> {
        self.shared.tracker.all().iter().map(|e| e.lease).collect()
    }

    /// Test-only: makes `service` (`fetcher`, `completer`, `heartbeater`, `notifier`,
    /// `leader`, `scheduler`, `reaper`, `pruner`, `sweeper`, `presence`) panic at its next
    /// turn.
    #[cfg(feature = "fault-injection")]
    pub fn inject_panic(&self, service: &str) {
        self.shared.faults.arm(service);
    }

    /// True while this worker is the maintenance leader.
    pub fn is_leader(&self) -> bool {
        self.leader.is_leader()
    }

    /// One heartbeat, for tests that drive the runtime step by step.
    pub async fn heartbeat_once(&self) -> BeatReport {
        Heartbeater {
            shared: self.shared.clone(),
        }
        .run_once()
        .await
    }

    /// One claim for `queue`'s free slots, starting the jobs it got; for tests that drive
    /// the runtime step by step (no services need to run, but outcomes are only written
    /// while [`Worker::run`] runs the completer). Returns (claimed, slots offered).
    pub async fn fetch_once(&self, queue: &str) -> Result<(usize, usize), docket_core::StoreError> {
        let c = self.fetcher(queue).run_once().await?;
        Ok((c.n, c.offered))
    }

    fn fetcher(&self, queue: &str) -> Fetcher<S> {
        Fetcher {
            shared: self.shared.clone(),
            queue: queue.to_string(),
            slots: self.slots[queue].clone(),
            wake: self.shared.wakeups[queue].clone(),
            idle: self.idle.clone(),
            concurrency: self
                .shared
                .config
                .queues
                .iter()
                .find(|q| q.name == queue)
                .map_or(1, |q| q.concurrency),
            depth: self.shared.depth[queue].clone(),
            pace: self.shared.pace[queue].clone(),
        }
    }

    /// Runs until `shutdown` fires.
    pub async fn run(&self, shutdown: Shutdown) -> Result<RunReport, WorkerError> {
        self.run_inner(shutdown, false).await
    }

    /// Processes the configured queues until nothing in them is ready or running, then
    /// returns (for scheduled or serverless workers that must let the database idle). Jobs
    /// scheduled in the future do not keep it running.
    pub async fn drain(&self, shutdown: Shutdown) -> Result<RunReport, WorkerError> {
        self.run_inner(shutdown, true).await
    }

    async fn run_inner(&self, shutdown: Shutdown, drain: bool) -> Result<RunReport, WorkerError> {
        let rx = self
            .rx
            .lock()
            .expect("poisoned")
            .take()
            .ok_or(WorkerError::Config(crate::config::ConfigError::AlreadyRan))?;
        let cfg = &self.shared.config;
        info!(owner = %cfg.owner, queues = ?cfg.queues.iter().map(|q| &q.name).collect::<Vec<_>>(), "worker starting");

        // Declared periodic jobs are stored before anything runs, so a definition error
        // surfaces at start rather than in a leader's log.
        for p in &cfg.periodic {
            self.shared.store.upsert_periodic(p).await?;
        }

        let mut sup = Supervisor::default();
        self.start_services(&mut sup, rx);

        // Wait for the stop request (or, draining, for the queues to empty) — or for a
        // service to die, which stops the worker too.
        let failed = tokio::select! {
            r = async {
                if drain {
                    self.wait_drained(&shutdown).await
                } else {
                    shutdown.graceful.cancelled().await;
                    Ok(())
                }
            } => r.err().map(|e| ("drain".to_string(), e.to_string())),
            f = sup.first_failure() => Some(f),
        };
        if let Some((service, reason)) = &failed {
            error!(service = %service, reason = %reason, "a worker service died; stopping the worker");
        }
        let stopped = crate::shutdown::stop(&self.shared, &mut sup, &shutdown).await;
        if let Some((service, reason)) = failed {
            return Err(WorkerError::ServiceFailed { service, reason });
        }
        Ok(RunReport {
            metrics: self.shared.metrics.snapshot(),
            released_at_shutdown: stopped.released,
            abandoned: stopped.abandoned,
        })
    }

    /// Starts every service this configuration runs (see [`crate::service`]).
    fn start_services(
        &self,
        sup: &mut Supervisor,
        rx: mpsc::Receiver<crate::completer::Completion>,
    ) {
        let cfg = &self.shared.config;
        let shared = &self.shared;
        let queues: Vec<String> = cfg.queues.iter().map(|q| q.name.clone()).collect();
        shared.telemetry.zero(&queues, &shared.registry.kinds());
        let mut completer = Completer::new(
            shared.store.clone(),
            cfg.owner.clone(),
            shared.tracker.clone(),
            shared.metrics.clone(),
            shared.telemetry.clone(),
            cfg.completion_batch,
            cfg.completion_flush,
        )
        .keep_succeeded(cfg.keep_succeeded);
        completer.faults = shared.faults.clone();
        sup.start(CompleterService { completer, rx });
        sup.start(Heartbeater {
            shared: shared.clone(),
        });
        let listen = shared.store.listen_support(cfg.listen_url.as_deref());
        if let (true, ListenSupport::No(why)) = (cfg.listen, &listen) {
            // Said once, at start: the fetchers' poll is the only trigger.
            warn!(poll = ?cfg.poll_interval, "{why}");
        } else if cfg.listen && !cfg.serverless {
            sup.start(Notifier {
                shared: shared.clone(),
            });
        }
        let cadence = |every| Cadence {
            every,
            after_claims: cfg.serverless.then(|| shared.claimed.clone()),
            faults: shared.faults.clone(),
        };
        sup.start(Presence {
            shared: shared.clone(),
            cadence: cadence(cfg.presence_interval),
        });
        sup.start(crate::telemetry::SampleFlush {
            shared: shared.clone(),
            cadence: cadence(cfg.sample_interval),
        });
        if cfg.maintenance {
            let store = &shared.store;
            let leader = self.leader.clone();
            sup.start(Election {
                leader: leader.clone(),
                cadence: cadence(cfg.schedule_interval.min(cfg.reap_interval)),
            });
            sup.start(WhileLeading {
                task: Scheduler::new(store.clone()),
                leader: leader.clone(),
                cadence: cadence(cfg.schedule_interval),
            });
            sup.start(WhileLeading {
                task: Reaper::new(store.clone(), cfg.reap_batch, shared.metrics.clone()),
                leader: leader.clone(),
                cadence: cadence(cfg.reap_interval),
            });
            sup.start(WhileLeading {
                task: Pruner::new(store.clone(), cfg.retention),
                leader: leader.clone(),
                cadence: cadence(cfg.prune_interval),
            });
            // A release the finishing job could not do (its key's lock was held) is
            // recorded and handed on here, within a reap interval; the full sweep is only
            // the safety net.
            sup.start(WhileLeading {
                task: KeyHandOver::new(store.clone(), 1000),
                leader: leader.clone(),
                cadence: cadence(cfg.reap_interval),
            });
            sup.start(WhileLeading {
                task: DepthSampler::new(store.clone()),
                leader: leader.clone(),
                cadence: cadence(DepthSampler::<S>::INTERVAL),
            });
            sup.start(WhileLeading {
                task: KeySweeper::new(store.clone(), 1000),
                leader,
                cadence: cadence(cfg.prune_interval),
            });
        }
        for q in &cfg.queues {
            // They share the queue's credits and wake-up: see `claims_in_flight`.
            for _ in 0..cfg.claims_in_flight {
                sup.start(self.fetcher(&q.name));
            }
        }
    }

    /// Returns when nothing in this worker's queues is ready or running (or on shutdown).
    /// Waits until the queues are empty and nothing is held. Fails when the drain check
    /// fails for good (not a passing outage: a file that is not a database, a schema that is
    /// gone) several times running, rather than retry for ever.
    async fn wait_drained(&self, shutdown: &Shutdown) -> Result<(), docket_core::StoreError> {
        let mut failures = 0;
        let queues: Vec<String> = self
            .shared
            .config
            .queues
            .iter()
            .map(|q| q.name.clone())
            .collect();
        loop {
            tokio::select! {
                _ = self.idle.notified() => {}
                _ = tokio::time::sleep(self.shared.config.poll_interval) => {}
                _ = shutdown.graceful.cancelled() => return Ok(()),
            }
            if !self.shared.tracker.is_empty() {
                continue;
            }
            match self.shared.store.any_active(&queues).await {
                Ok(false) if self.shared.tracker.is_empty() => return Ok(()),
                Ok(_) => failures = 0,
                Err(e) if !e.is_transient() && failures >= 4 => return Err(e),
                Err(e) => {
                    failures += 1;
                    warn!(error = %e, "drain check failed");
                }
            }
        }
    }
}
