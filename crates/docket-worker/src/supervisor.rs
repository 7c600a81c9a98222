//! The supervisor: every runtime service is a named task whose end is watched. A service
//! that panics or returns before it was told to stop is a failure, and the worker then shuts
//! down and reports it (`WorkerError::ServiceFailed`) instead of running on while it looks
//! alive and does nothing — no claims (a dead fetcher), no outcomes written (a dead
//! completer), leases left to expire (a dead heartbeater). Restarting in place would hide the
//! bug and could not restore a completer whose channel died with it; the process supervisor
//! (systemd, Kubernetes) restarts the process, which is what the exit code is for.

use futures::future::select_all;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::service::Service;

/// When, during shutdown, a service is told to stop (and joined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Fetchers: stopped first (no new claims).
    Fetch,
    /// The completer: closed after running jobs ended, so every outcome is written.
    Completer,
    /// Heartbeater, notifier, maintenance: stopped last (leases stay alive until the end).
    Service,
}

struct Task {
    name: &'static str,
    phase: Phase,
    handle: Option<JoinHandle<()>>,
}

/// The watched tasks, and one stop token per phase.
#[derive(Default)]
pub(crate) struct Supervisor {
    tasks: Vec<Task>,
    fetch: CancellationToken,
    completer: CancellationToken,
    service: CancellationToken,
}

impl Supervisor {
    fn token(&self, phase: Phase) -> &CancellationToken {
        match phase {
            Phase::Fetch => &self.fetch,
            Phase::Completer => &self.completer,
            Phase::Service => &self.service,
        }
    }

    /// Starts `svc`; it runs until its phase is stopped.
    pub fn start(&mut self, svc: impl Service) {
        let (name, phase) = (svc.name(), svc.phase());
        let stop = self.token(phase).clone();
        self.tasks.push(Task {
            name,
            phase,
            handle: Some(tokio::spawn(svc.run(stop))),
        });
    }

    /// Tells every service of `phase` to stop and waits for them.
    pub async fn stop(&mut self, phase: Phase) {
        self.token(phase).cancel();
        self.join(phase).await;
    }

    /// Completes when any service ends (none should before shutdown): its name and why.
    /// Pending forever while all run.
    pub async fn first_failure(&mut self) -> (String, String) {
        let running: Vec<(usize, &mut JoinHandle<()>)> = self
            .tasks
            .iter_mut()
            .enumerate()
            .filter_map(|(i, t)| t.handle.as_mut().map(|h| (i, h)))
            .collect();
        if running.is_empty() {
            return std::future::pending().await;
        }
        let (idx, handles): (Vec<usize>, Vec<&mut JoinHandle<()>>) = running.into_iter().unzip();
        let (result, i, _) = select_all(handles).await;
        let task = &mut self.tasks[idx[i]];
        // Polled to completion: never await it again.
        task.handle = None;
        let reason = match result {
            Ok(()) => "it stopped on its own".to_string(),
            Err(e) if e.is_panic() => {
                let p = e.into_panic();
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic".into());
                format!("panicked: {msg}")
            }
            Err(e) => format!("was cancelled: {e}"),
        };
        (task.name.to_string(), reason)
    }

    /// Waits for every service of `phase` (its stop token must have fired).
    async fn join(&mut self, phase: Phase) {
        for t in self.tasks.iter_mut().filter(|t| t.phase == phase) {
            if let Some(h) = t.handle.take() {
                if let Err(e) = h.await {
                    tracing::error!(service = t.name, error = %e, "service failed while stopping");
                }
            }
        }
    }
}
