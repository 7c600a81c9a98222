//! Signals and parks: sending a signal (and waking the job parked on it), the fenced park,
//! and reading a signal. PostgreSQL's versions: `signal()` and `park_fenced()` (migration
//! 0019). On both engines the job's row is the meeting point: SQLite's write transactions
//! admit one writer at a time, and on MariaDB both the park (step_fence.sql) and the signal
//! (job_state.sql) lock the row before they read the other's table, in READ COMMITTED — so
//! whichever comes second sees the other, and no signal is missed.

use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn};
use crate::writes::{job_state, outcome};

/// Parks each claimed job waiting for its signal: fenced as a snooze, due after its delay
/// or at once when the signal is already there.
pub async fn park_many<E: Engine>(e: &E, owner: &str, parks: &[Park]) -> Result<BatchOutcome> {
    if parks.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = docket_core::signals::sorted_parks(parks)?;
    let leases: Vec<Lease> = sorted.iter().map(|p| p.lease).collect();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut done = Vec::new();
    for p in &sorted {
        let l = p.lease;
        let held = tx
            .fetch_optional("step_fence", args![l.id.0, l.attempt, owner, now])
            .await?;
        if held.is_none() {
            continue;
        }
        let delay = crate::rows::ms(p.delay);
        let n = tx
            .execute(
                "park",
                args![l.id.0, l.attempt, owner, now, delay, p.signal.as_str()],
            )
            .await?;
        if n == 1 {
            done.push(l);
        }
    }
    tx.commit().await?;
    crate::writes::ended(e, &done);
    outcome(e, &leases, done).await
}

/// [`signal`] on `c`, a transaction the caller commits; `now` is the database's now.
pub async fn signal_on<C: Conn>(
    c: &mut C,
    now: i64,
    id: JobId,
    name: &str,
    payload: &serde_json::Value,
) -> Result<(SignalSent, String)> {
    docket_core::signals::check(name, payload)?;
    let (state, _, queue, _, _) = job_state(c, id).await?;
    if state.is_terminal() {
        return Err(StoreError::WrongState {
            id,
            state,
            op: "signal",
        });
    }
    let new = if c
        .fetch_optional("signal_get", args![id.0, name])
        .await?
        .is_some()
    {
        false
    } else {
        let text = payload.to_string();
        c.execute("signal_insert", args![id.0, name, text.as_str(), now])
            .await?;
        true
    };
    let woke = c.execute("signal_wake", args![id.0, name, now]).await? == 1;
    Ok((SignalSent { new, woke }, queue))
}

/// Sends signal `name` to job `id` (see `Store::signal`).
pub async fn signal<E: Engine>(
    e: &E,
    id: JobId,
    name: &str,
    payload: &serde_json::Value,
) -> Result<SignalSent> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let (sent, queue) = signal_on(&mut tx, now, id, name, payload).await?;
    tx.commit().await?;
    if sent.woke {
        e.hint(Wake::Queue(queue));
    }
    Ok(sent)
}

/// The payload of signal `name` sent to job `id`, if one was.
pub async fn job_signal<E: Engine>(
    e: &E,
    id: JobId,
    name: &str,
) -> Result<Option<serde_json::Value>> {
    let Some(r) = e
        .reader()
        .fetch_optional("signal_get", args![id.0, name])
        .await?
    else {
        return Ok(None);
    };
    let text: String = r.get("payload")?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|err| corrupt(format!("signal {name:?} of job {id}: {err}")))
}

/// Deletes signals of jobs that no longer exist, `batch` at a time; returns how many.
pub async fn prune_signals<E: Engine>(e: &E, batch: i64) -> Result<u64> {
    let mut total = 0;
    loop {
        let mut tx = e.begin().await?;
        let n = tx.execute("signals_prune", args![batch]).await?;
        tx.commit().await?;
        total += n;
        if n < batch as u64 {
            return Ok(total);
        }
    }
}
