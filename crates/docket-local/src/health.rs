//! Queue health and the depth history (`Store::queue_health`, `sample_depth`,
//! `depth_history`) for SQLite and MariaDB. No job is flagged blocked on these engines (a
//! claim judges keys as it goes), so there are no blocked reasons to report.

use std::time::Duration;

use docket_core::health::{DepthSample, QueueHealth};
use docket_core::*;

use crate::args;
use crate::controls::now_ms;
use crate::engine::{Engine, Tx};
use crate::exec::Conn;
use crate::rows::{self, ms};

/// Pending jobs the retrying count looks at, newest first (no index holds "has errors").
const RETRY_WINDOW: i64 = 100_000;

/// Depth samples one read returns at most.
pub const DEPTH_ROWS: i64 = 100_000;

fn check_cap(cap: i64) -> Result<()> {
    Ok(validate::count_cap(cap)?)
}

/// Per queue: retrying jobs and the oldest running job's age.
pub async fn queue_health<E: Engine>(e: &E, cap: i64) -> Result<Vec<QueueHealth>> {
    check_cap(cap)?;
    let now = now_ms(e).await?;
    let rows = e
        .reader()
        .fetch_all("queue_health", args![now, cap])
        .await?;
    rows.iter()
        .map(|r| {
            let read: i64 = r.get("retrying_read")?;
            let window: i64 = r.get("window_read")?;
            let n: i64 = r.get("retrying")?;
            Ok(QueueHealth {
                queue: r.get("queue")?,
                retrying: Count {
                    n: n.min(cap),
                    more: read > cap || window >= RETRY_WINDOW,
                },
                oldest_running_age_s: r.get("oldest_running_age_s")?,
                blocked: Vec::new(),
                blocked_more: false,
            })
        })
        .collect()
}

/// The leader's sample of this minute (the first of a minute stands).
pub async fn sample_depth<E: Engine>(e: &E, cap: i64) -> Result<()> {
    check_cap(cap)?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let minute = now - now.rem_euclid(60_000);
    let prev = tx.fetch_optional("depth_prev", args![]).await?;
    let top: i64 = tx.fetch_one("depth_top", args![]).await?.get("hwm")?;
    // Counted only when the previous sample is recent: after a gap the ids above its mark
    // were enqueued over the whole gap, not in a minute.
    let since = match &prev {
        Some(r) => {
            let at: i64 = r.get("minute_at")?;
            let mark: i64 = r.get("hwm")?;
            let mark = if docket_core::mutants::active(
                docket_core::mutants::Mutant::DepthCountsEveryJob,
            ) {
                0
            } else {
                mark
            };
            (at >= minute - 120_000).then_some(mark)
        }
        None => None,
    };
    let mut fresh = std::collections::BTreeMap::<String, i64>::new();
    if let Some(mark) = since {
        for r in tx.fetch_all("depth_fresh", args![mark, top]).await? {
            fresh.insert(r.get("queue")?, r.get("n")?);
        }
    }
    let mut depth = std::collections::BTreeMap::<String, (i64, i64)>::new();
    for r in tx.fetch_all("depth_now", args![now, cap]).await? {
        let waiting: i64 = r.get("waiting")?;
        depth.insert(r.get("queue")?, (waiting.min(cap + 1), r.get("running")?));
    }
    let names: std::collections::BTreeSet<&String> = depth.keys().chain(fresh.keys()).collect();
    let (mut all_waiting, mut all_running) = (0i64, 0i64);
    for q in names {
        let (waiting, running) = depth.get(q).copied().unwrap_or((0, 0));
        all_waiting += waiting;
        all_running += running;
        let enqueued = since.map(|_| fresh.get(q).copied().unwrap_or(0));
        tx.execute(
            "depth_insert",
            args![minute, q.as_str(), waiting, running, enqueued, top],
        )
        .await?;
    }
    let enqueued = since.map(|_| fresh.values().sum::<i64>());
    tx.execute(
        "depth_insert",
        args![minute, "", all_waiting, all_running, enqueued, top],
    )
    .await?;
    tx.execute("depth_prune", args![now]).await?;
    tx.commit().await
}

/// The depth samples of the last `window` (at most two days), oldest first.
pub async fn depth_history<E: Engine>(e: &E, window: Duration) -> Result<Vec<DepthSample>> {
    let now = now_ms(e).await?;
    let window = ms(window.min(Duration::from_secs(2 * 86_400)));
    let first = ((now - window) / 60_000) * 60_000;
    let rows = e
        .reader()
        .fetch_all("depth_list", args![first, DEPTH_ROWS])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(DepthSample {
                queue: r.get("queue")?,
                minute: rows::time(r, "minute_at")?,
                waiting: r.get("waiting")?,
                running: r.get("running")?,
                enqueued: r.get("enqueued")?,
            })
        })
        .collect()
}
