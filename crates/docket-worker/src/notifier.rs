//! The notifier: one dedicated LISTEN connection (never through a pooler) for wake-ups and
//! cancel requests. A notification is only a hint — the fetchers' fallback poll still runs —
//! so losing one costs latency, never a job. After every (re)connect each fetcher claims
//! once, since notifications sent while disconnected are gone.

use std::sync::Arc;
use std::time::Duration;

use docket_core::JobId;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;
use crate::runtime::Shared;

/// Listens for wake-ups and cancellations.
pub(crate) struct Notifier {
    pub shared: Arc<Shared>,
}

impl Notifier {
    async fn connect(&self) -> Result<PgListener, sqlx::Error> {
        let mut l = match &self.shared.config.listen_url {
            Some(url) => {
                // TLS parameters and key=value strings as for the main pool.
                let target = docket_postgres::connect::parse(url)
                    .map_err(|e| sqlx::Error::Configuration(e.to_string().into()))?;
                let pool = docket_postgres::connect::pool(&target, "docket-listen", 1)
                    .await
                    .map_err(|e| sqlx::Error::Configuration(e.to_string().into()))?;
                PgListener::connect_with(&pool).await?
            }
            None => PgListener::connect_with(self.shared.store.pool()).await?,
        };
        let wake = self.shared.store.wakeup_channel();
        let cancel = self.shared.store.cancel_channel();
        l.listen_all([wake.as_str(), cancel.as_str()]).await?;
        Ok(l)
    }

    /// Any role that can connect may NOTIFY any channel with any payload, so a notification
    /// is only ever a hint. A cancel notification for a job running here makes the
    /// heartbeater beat now; the beat stops the job only if the database recorded a cancel
    /// request for it (`cancel_requested_at`, set by `cancel()` with an audit entry). A
    /// wake-up makes one fetcher claim once (the claim decides what runs).
    fn dispatch(&self, channel: &str, payload: &str) {
        Metrics::add(&self.shared.metrics.notifications, 1);
        if channel == self.shared.store.cancel_channel() {
            let running_here = payload
                .parse::<i64>()
                .ok()
                .is_some_and(|id| self.shared.tracker.get(JobId(id)).is_some());
            if running_here {
                if docket_core::mutants::active(docket_core::mutants::Mutant::NotifyTrusted) {
                    if let Some(e) = payload
                        .parse::<i64>()
                        .ok()
                        .and_then(|id| self.shared.tracker.get(JobId(id)))
                    {
                        e.stop(crate::job::StopReason::Cancelled);
                    }
                }
                self.shared.beat_now.notify_one();
            }
        } else {
            self.shared.wake(payload);
        }
    }

    /// Runs until `stop` fires, reconnecting with backoff.
    pub async fn run(self, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let connected = tokio::select! {
                r = self.connect() => r,
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
                    n = listener.try_recv() => n,
                    _ = stop.cancelled() => return,
                };
                self.shared.faults.check("notifier");
                match next {
                    Ok(Some(n)) => self.dispatch(n.channel(), n.payload()),
                    Ok(None) => {
                        // The connection dropped. Reconnect ourselves (rather than letting
                        // sqlx re-listen lazily) so the claim-once below happens only after
                        // LISTEN is back: nothing enqueued in between can be missed.
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
