//! The jobs this process is running: their leases, cancellation tokens and slots. The
//! heartbeater extends what is here; the completer removes what it has written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use docket_core::{JobId, Lease};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

/// Why a running job was told to stop. The first reason wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A heartbeat matched nothing, or the lease ran out locally without a successful beat:
    /// someone else may own the job now, so nothing more is written for it.
    LeaseLost,
    /// An operator asked for cancellation.
    Cancelled,
    /// It ran past its maximum runtime.
    TimedOut,
    /// The worker is shutting down and the deadline passed: the job is released, not failed.
    Shutdown,
}

/// One job in flight.
#[derive(Debug)]
pub struct InFlight {
    /// The claim.
    pub lease: Lease,
    /// Queue and kind, for metric labels.
    pub labels: crate::telemetry::Labels,
    /// The handler's cancellation token.
    pub cancel: CancellationToken,
    reason: Arc<Mutex<Option<StopReason>>>,
    /// Local instant after which the lease must be presumed expired (a conservative mirror of
    /// the database's expiry: measured from *before* the claim or beat was sent).
    deadline: Mutex<Instant>,
    /// The concurrency slot; dropped when the handler returns or the lease is lost.
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// The handler is done and its outcome is with the completer.
    finished: std::sync::atomic::AtomicBool,
    /// Progress reported since the last beat took it (`JobContext::progress`): only the
    /// latest report is kept, so reports coalesce between beats.
    progress: Arc<Mutex<Option<(f32, String)>>>,
}

impl InFlight {
    /// Stops the job for `reason` (the first reason sticks) and fires its token.
    pub fn stop(&self, reason: StopReason) {
        if reason == StopReason::LeaseLost
            && (docket_core::mutants::no_worker_guards()
                || docket_core::mutants::active(docket_core::mutants::Mutant::NoCancelOnLostLease))
        {
            // Test builds only: the worker's own guards are off, the database fence alone
            // must hold (see docket_core::mutants).
            return;
        }
        {
            let mut r = self.reason.lock().expect("poisoned");
            if r.is_none() {
                *r = Some(reason);
            }
        }
        self.cancel.cancel();
        if reason == StopReason::LeaseLost {
            // The runtime stops waiting for it: its slot is free for other work at once.
            self.release_slot();
        }
    }

    /// Marks the handler done (its outcome handed to the completer).
    pub fn mark_finished(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// True once the handler is done.
    pub fn is_finished(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Why it was stopped, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().expect("poisoned")
    }

    /// The shared cell behind [`InFlight::reason`], for the handler's context.
    pub fn reason_cell(&self) -> Arc<Mutex<Option<StopReason>>> {
        self.reason.clone()
    }

    /// The cell the handler's progress reports go to.
    pub fn progress_cell(&self) -> Arc<Mutex<Option<(f32, String)>>> {
        self.progress.clone()
    }

    /// The latest progress reported since the last call, if any.
    pub fn take_progress(&self) -> Option<(f32, String)> {
        self.progress.lock().expect("poisoned").take()
    }

    /// Frees the concurrency slot.
    pub fn release_slot(&self) {
        self.permit.lock().expect("poisoned").take();
    }

    /// Moves the local lease deadline forward.
    pub fn extend(&self, until: Instant) {
        let mut d = self.deadline.lock().expect("poisoned");
        if until > *d {
            *d = until;
        }
    }

    /// The local lease deadline.
    pub fn deadline(&self) -> Instant {
        *self.deadline.lock().expect("poisoned")
    }
}

impl InFlight {
    /// A record of a job run outside any tracker (a delivered job: its source keeps the
    /// delivery), with no slot and no deadline of its own.
    pub(crate) fn detached(lease: Lease, labels: crate::telemetry::Labels) -> Arc<InFlight> {
        Arc::new(InFlight {
            lease,
            labels,
            cancel: CancellationToken::new(),
            reason: Arc::new(Mutex::new(None)),
            deadline: Mutex::new(Instant::now()),
            permit: Mutex::new(None),
            finished: Default::default(),
            progress: Default::default(),
        })
    }
}

/// All jobs in flight.
#[derive(Debug, Default)]
pub struct Tracker {
    jobs: Mutex<HashMap<JobId, Arc<InFlight>>>,
    emptied: Notify,
}

impl Tracker {
    /// Registers a claimed job; `None` when this very lease (job and attempt) is already
    /// running here. That happens only after a claim was lost in a server crash (claims
    /// commit without waiting for their WAL flush, migration 0011): the job came back
    /// pending with the attempt it had, and this worker claimed it again under the same
    /// owner and token while its first execution still ran. The running execution keeps the
    /// job — its heartbeats cover the new claim and its outcome is written against it — so
    /// one token never has two executions.
    pub fn insert(
        &self,
        lease: Lease,
        permit: Option<OwnedSemaphorePermit>,
        deadline: Instant,
        labels: crate::telemetry::Labels,
    ) -> Option<Arc<InFlight>> {
        let mut jobs = self.jobs.lock().expect("poisoned");
        if jobs.get(&lease.id).is_some_and(|e| e.lease == lease) {
            return None;
        }
        let entry = Arc::new(InFlight {
            lease,
            labels,
            cancel: CancellationToken::new(),
            reason: Arc::new(Mutex::new(None)),
            deadline: Mutex::new(deadline),
            permit: Mutex::new(permit),
            finished: Default::default(),
            progress: Default::default(),
        });
        jobs.insert(lease.id, entry.clone());
        Some(entry)
    }

    /// Forgets a job (its outcome is written, or it no longer belongs to this worker). Only
    /// removes the entry of the same claim.
    pub fn remove(&self, lease: Lease) {
        let mut jobs = self.jobs.lock().expect("poisoned");
        if jobs.get(&lease.id).is_some_and(|e| e.lease == lease) {
            if let Some(e) = jobs.remove(&lease.id) {
                e.release_slot();
            }
        }
        if jobs.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    /// The entry of a job, if running here.
    pub fn get(&self, id: JobId) -> Option<Arc<InFlight>> {
        self.jobs.lock().expect("poisoned").get(&id).cloned()
    }

    /// Every entry.
    pub fn all(&self) -> Vec<Arc<InFlight>> {
        self.jobs
            .lock()
            .expect("poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// Number of jobs in flight.
    pub fn len(&self) -> usize {
        self.jobs.lock().expect("poisoned").len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until nothing is in flight.
    pub async fn wait_empty(&self) {
        loop {
            let notified = self.emptied.notified();
            if self.is_empty() {
                return;
            }
            notified.await;
        }
    }
}
