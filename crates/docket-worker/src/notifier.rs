//! The notifier: the engine's listener (on PostgreSQL one dedicated LISTEN connection, never
//! through a pooler) for wake-ups and cancel requests. A notification is only a hint — the fetchers' fallback poll still runs —
//! so losing one costs latency, never a job. After every (re)connect each fetcher claims
//! once, since notifications sent while disconnected are gone.

use std::sync::Arc;
use std::time::Duration;

use docket_core::{Listener, Store, Wake};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;
use crate::runtime::Shared;

/// Listens for wake-ups and cancellations (engines with [`docket_core::ListenSupport::Yes`]).
pub(crate) struct Notifier<S: Store> {
    pub shared: Arc<Shared<S>>,
}

impl<S: Store> Notifier<S> {
    /// Any client that can connect may forge a hint (on PostgreSQL any role may NOTIFY any
    /// channel with any payload), so a hint is only ever a reason to ask the database. A
    /// cancel hint for a job running here makes the heartbeater beat now; the beat stops the
    /// job only if the database recorded a cancel request for it (`cancel_requested_at`,
    /// set by `cancel()` with an audit entry). A wake-up makes one fetcher claim once (the
    /// claim decides what runs).
    fn dispatch(&self, wake: Wake) {
        Metrics::add(&self.shared.metrics.notifications, 1);
        match wake {
            Wake::Cancel(id) => {
                if let Some(e) = self.shared.tracker.get(id) {
                    if docket_core::mutants::active(docket_core::mutants::Mutant::NotifyTrusted) {
                        e.stop(crate::job::StopReason::Cancelled);
                    }
                    self.shared.beat_now.notify_one();
                }
            }
            Wake::Queue(q) => self.shared.wake(&q),
            // Outputs are for their waiters (`Store::listen_outputs`), not for workers.
            Wake::Done(_) | Wake::Unreadable => {}
        }
    }
}

impl<S: Store> crate::service::Service for Notifier<S> {
    fn name(&self) -> &'static str {
        "notifier"
    }

    fn phase(&self) -> crate::supervisor::Phase {
        crate::supervisor::Phase::Service
    }

    /// Runs until `stop` fires, reconnecting with backoff.
    async fn run(self, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let url = self.shared.config.listen_url.as_deref();
            let connected = tokio::select! {
                r = self.shared.store.listen(url) => r,
                _ = stop.cancelled() => return,
            };
            let mut listener = match connected {
                Ok(l) => l,
                Err(e) => {
                    warn!(error = %e, "LISTEN connection failed; retrying in {backoff:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            info!("listening for wake-ups");
            Metrics::add(&self.shared.metrics.listen_connects, 1);
            backoff = Duration::from_millis(100);
            self.shared.wake_all();
            loop {
                let next = tokio::select! {
                    n = listener.recv() => n,
                    _ = stop.cancelled() => return,
                };
                self.shared.faults.check("notifier");
                match next {
                    Ok(Some(w)) => self.dispatch(w),
                    Ok(None) => {
                        // The connection dropped. Open a new listener before the claim-once
                        // above, so that nothing enqueued in between can be missed.
                        debug!("LISTEN connection lost; re-establishing");
                        break;
                    }
                    Err(e) => {
                        warn!(error = %e, "LISTEN connection broken; reconnecting");
                        break;
                    }
                }
            }
        }
    }
}
