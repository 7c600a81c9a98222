//! The event stream open pages listen to (`GET /events`, server-sent events).
//!
//! An event means only "something may have changed: refresh". They come from the engine's
//! notifications when it has them (LISTEN on PostgreSQL: enqueues, cancels), from this
//! dashboard's own actions, and from a refresh tick — the polling that also covers an engine
//! without notifications and changes nobody announces (a job finishing). A forged
//! notification can therefore cause at most a refresh.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use docket_core::{ListenSupport, Listener, Store};
use futures::Stream;
use tokio::sync::broadcast;
use tracing::debug;

use crate::App;

/// Longest an event stream stays open; the browser reconnects at once. Bounds how long a
/// graceful shutdown waits for open pages.
const STREAM_LIFE: Duration = Duration::from_secs(60);

/// `GET /events`.
pub async fn events<S: Store>(
    State(app): State<Arc<App<S>>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    start_listener(&app);
    let rx = app.live.subscribe();
    let every = app.opts.refresh;
    let deadline = tokio::time::Instant::now() + STREAM_LIFE;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let stream = futures::stream::unfold((rx, tick), move |(mut rx, mut tick)| async move {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => None,
            r = rx.recv() => match r {
                Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    Some((Ok(Event::default().data("changed")), (rx, tick)))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            },
            _ = tick.tick() => Some((Ok(Event::default().data("tick")), (rx, tick))),
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Starts (once) the task that turns the engine's notifications into refresh hints.
fn start_listener<S: Store>(app: &Arc<App<S>>) {
    if app.listening.swap(true, Ordering::SeqCst) {
        return;
    }
    if let ListenSupport::No(why) = app.store.listen_support(None) {
        debug!("dashboard refreshes by polling only: {why}");
        return;
    }
    let weak = Arc::downgrade(app);
    tokio::spawn(async move {
        loop {
            let Some(app) = weak.upgrade() else { return };
            let listener = app.store.listen(None).await;
            drop(app);
            let Ok(mut l) = listener else {
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            };
            while let Ok(Some(_)) = l.recv().await {
                match weak.upgrade() {
                    Some(app) => app.poke(),
                    None => return,
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}
