//! The in-process wake: MariaDB and MySQL have no LISTEN, so workers poll; but when the
//! enqueue (or a retry, a resume, a cancel) happens in the same process as the worker, a
//! channel per database tells the worker at once. Stores opened on one database in one
//! process share the channel, whichever of them enqueued. A hint is only ever a reason to look: a
//! fetcher claims, a heartbeater beats (see `docket_core::Wake`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use docket_core::{Listener, Result, Wake};
use tokio::sync::broadcast;

/// Hints kept for a slow receiver before it is told it missed some (then every fetcher
/// claims once, as after a dropped connection).
const CAPACITY: usize = 1024;

fn registry() -> &'static Mutex<HashMap<String, broadcast::Sender<Wake>>> {
    static R: OnceLock<Mutex<HashMap<String, broadcast::Sender<Wake>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The channel of the database `key` (host, port and database name).
pub(crate) fn channel(key: &str) -> broadcast::Sender<Wake> {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.entry(key.to_string())
        .or_insert_with(|| broadcast::channel(CAPACITY).0)
        .clone()
}

/// The listener of a [`crate::MySqlStore`]: hints sent by this process.
#[derive(Debug)]
pub struct LocalHints {
    rx: broadcast::Receiver<Wake>,
}

impl LocalHints {
    pub(crate) fn new(tx: &broadcast::Sender<Wake>) -> Self {
        LocalHints { rx: tx.subscribe() }
    }
}

impl Listener for LocalHints {
    async fn recv(&mut self) -> Result<Option<Wake>> {
        match self.rx.recv().await {
            Ok(w) => Ok(Some(w)),
            // Missed hints: report a "reconnect", so every fetcher claims once.
            Err(broadcast::error::RecvError::Lagged(_)) => Ok(None),
            // Never: the registry keeps a sender per file for the process's life.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}
