//! Real network partitions, on PostgreSQL and MariaDB: every `docket work` process runs in a
//! network namespace of its own and reaches the database through a veth link
//! (`docket_testkit::netns`) that the test slows (`tc tbf`), cuts (`nft` drop rules on both
//! ends) and pulls (`ip link set down`), then restores. Nothing is simulated: the kernel drops the
//! packets, TCP retransmits, and a healed link delivers what was sent before the cut, late.
//!
//! Scenarios: a worker partitioned past its lease while running, healed while its successor
//! runs its jobs; the maintenance leader partitioned (leadership, the reaper and a cron
//! schedule move to the other worker; the old leader learns it lost); the database partitioned
//! from every worker for longer than a lease. The checker afterwards: nothing lost (every job
//! succeeded, every cron tick enqueued once), no stale write landed (the audit's rules), no
//! two attempts of a job overlapped in the execution log — whose every run has an end, since
//! the handler logs its end when stopped — and every worker exited 0 on SIGTERM.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use docket_core::Store;
use docket_mysql::MySqlStore;
use docket_testkit::netns::Link;
use docket_testkit::proxy::Proxy;
use docket_testkit::{checker, checker_mysql, mariadb, TestDb};

/// The lease of every worker here: short, so a partition outlives it in seconds.
const LEASE: &str = "2s";

/// The database under test, with the invariant checker's audit installed.
enum Engine {
    Pg(TestDb),
    Maria { url: String, store: MySqlStore },
}

impl Engine {
    async fn postgres() -> Engine {
        let db = TestDb::new().await;
        checker::install_audit(&db).await;
        Engine::Pg(db)
    }

    async fn mariadb() -> Engine {
        let url = mariadb::fresh_database().await;
        let store = MySqlStore::connect(&url, 4).await.unwrap();
        store.migrate().await.unwrap();
        checker_mysql::install_audit(store.pool()).await;
        Engine::Maria { url, store }
    }

    fn url(&self) -> &str {
        match self {
            Engine::Pg(db) => &db.url,
            Engine::Maria { url, .. } => url,
        }
    }

    /// `docket` against this database through `url` (the real one, or a link's proxy).
    fn docket(&self, url: &str) -> std::process::Command {
        let mut c = match self {
            Engine::Pg(db) => docket(db),
            Engine::Maria { .. } => {
                let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_docket"));
                c.env_remove("DOCKET_SCHEMA").env_remove("DOCKET_HOME");
                c
            }
        };
        c.env("DATABASE_URL", url);
        c
    }

    /// Runs a `docket` command from the host; it must succeed.
    fn cli(&self, args: &[&str], stdin: &str) {
        let mut c = self.docket(self.url());
        c.args(args);
        let o = run_with_stdin(c, stdin);
        assert!(o.status.success(), "docket {args:?}: {}", err(&o));
    }

    /// `n` jobs of queue `queue`, retried quickly after a reap.
    async fn load(&self, queue: &str, n: usize) {
        self.cli(&["enqueue", "--bulk", "-"], &ndjson(queue, n));
        // Only the new jobs: a write to a running row would read as a worker's in the audit.
        self.exec(
            "UPDATE {jobs} SET backoff_base_ms = 100, backoff_cap_ms = 200
             WHERE state = 'pending' AND attempt = 0",
        )
        .await;
    }

    fn table(&self, name: &str) -> String {
        match self {
            Engine::Pg(db) => format!("{}.{name}", db.schema),
            Engine::Maria { .. } => name.to_string(),
        }
    }

    /// `sql` with `{jobs}` and `{leader}` naming this engine's tables, and `{all_jobs}` every
    /// job, kept successes included (PostgreSQL keeps those in `jobs_succeeded`, read
    /// through the view `jobs_all`).
    fn sql(&self, sql: &str) -> String {
        let all = match self {
            Engine::Pg(_) => self.table("jobs_all"),
            Engine::Maria { .. } => self.table("jobs"),
        };
        sql.replace("{all_jobs}", &all)
            .replace("{jobs}", &self.table("jobs"))
            .replace("{leader}", &self.table("leader"))
    }

    async fn exec(&self, sql: &str) {
        let sql = self.sql(sql);
        match self {
            Engine::Pg(db) => sqlx::query(&sql).execute(&db.pool).await.map(|_| ()),
            Engine::Maria { store, .. } => {
                sqlx::query(&sql).execute(store.pool()).await.map(|_| ())
            }
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let sql = self.sql(sql);
        match self {
            Engine::Pg(db) => sqlx::query_scalar(&sql).fetch_one(&db.pool).await,
            Engine::Maria { store, .. } => sqlx::query_scalar(&sql).fetch_one(store.pool()).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn strings(&self, sql: &str) -> Vec<String> {
        let sql = self.sql(sql);
        match self {
            Engine::Pg(db) => sqlx::query_scalar(&sql).fetch_all(&db.pool).await,
            Engine::Maria { store, .. } => sqlx::query_scalar(&sql).fetch_all(store.pool()).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// `col` as text (MariaDB hands binary-collated columns over as bytes).
    fn text(&self, col: &str) -> String {
        match self {
            Engine::Pg(_) => col.to_string(),
            Engine::Maria { .. } => format!("CONVERT({col} USING utf8mb4)"),
        }
    }

    /// The database's "now" in milliseconds, in this engine's SQL.
    fn now_ms(&self) -> &'static str {
        match self {
            Engine::Pg(_) => "(extract(epoch FROM now()) * 1000)",
            Engine::Maria { .. } => {
                "CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)"
            }
        }
    }

    /// The lease expiry column in milliseconds.
    fn lease_ms(&self) -> &'static str {
        match self {
            Engine::Pg(_) => "(extract(epoch FROM lease_expires_at) * 1000)",
            Engine::Maria { .. } => "lease_expires_at",
        }
    }

    async fn unfinished(&self) -> i64 {
        self.scalar("SELECT count(*) FROM {jobs} WHERE state <> 'succeeded'")
            .await
    }

    /// (job, attempt) of the jobs running under `owner`'s lease.
    async fn held_by(&self, owner: &str) -> Vec<(i64, i32)> {
        let sql = self.sql(&format!(
            "SELECT id, attempt, {} FROM {{jobs}} WHERE state = 'running' ORDER BY id",
            self.text("lease_owner")
        ));
        let rows: Vec<(i64, i32, Option<String>)> = match self {
            Engine::Pg(db) => sqlx::query_as(&sql).fetch_all(&db.pool).await,
            Engine::Maria { store, .. } => sqlx::query_as(&sql).fetch_all(store.pool()).await,
        }
        .unwrap();
        rows.into_iter()
            .filter(|r| r.2.as_deref() == Some(owner))
            .map(|r| (r.0, r.1))
            .collect()
    }

    /// The current maintenance leader (an unexpired row), by the database's clock.
    async fn leader(&self) -> Option<String> {
        let expires = match self {
            Engine::Pg(_) => "expires_at > now()".to_string(),
            Engine::Maria { .. } => format!("expires_at > {}", self.now_ms()),
        };
        self.strings(&format!(
            "SELECT {} FROM {{leader}} WHERE name = 'maintenance' AND {expires}",
            self.text("owner")
        ))
        .await
        .pop()
    }

    /// Running jobs whose lease ran out less than `ago_ms` ago (or is live), and running
    /// jobs whose lease ran out longer ago than that — by the database's clock.
    async fn leases(&self, ago_ms: i64) -> (i64, i64) {
        let (now, lease) = (self.now_ms(), self.lease_ms());
        let recent = self
            .scalar(&format!(
                "SELECT count(*) FROM {{jobs}} WHERE state = 'running' AND {lease} > {now} - {ago_ms}"
            ))
            .await;
        let old = self
            .scalar(&format!(
                "SELECT count(*) FROM {{jobs}} WHERE state = 'running' AND {lease} <= {now} - {ago_ms}"
            ))
            .await;
        (recent, old)
    }

    /// The cron ticks of the schedule's jobs, as the text the metadata carries.
    async fn ticks(&self) -> Vec<String> {
        let tick = match self {
            Engine::Pg(_) => "metadata->>'tick'",
            Engine::Maria { .. } => "CAST(JSON_UNQUOTE(JSON_EXTRACT(metadata, '$.tick')) AS CHAR)",
        };
        self.strings(&format!(
            "SELECT {tick} FROM {{all_jobs}} WHERE kind = 'tick' ORDER BY 1"
        ))
        .await
    }

    /// Every rule of this engine's checker over the audit and the execution log.
    async fn check(&self, runs: &[checker::Execution]) -> checker::CheckReport {
        match self {
            Engine::Pg(db) => checker::check(db, runs, &["succeeded"]).await,
            Engine::Maria { store, .. } => {
                checker_mysql::check(store.pool(), runs, &["succeeded"]).await
            }
        }
    }
}

/// A `docket work` process in a namespace of its own, its link, and the proxy on the host end
/// of the link that forwards to the database. Fields drop in order: the process is killed
/// (if still running) before its namespace goes.
struct Worker {
    proc: Proc,
    link: Link,
    _proxy: Proxy,
    err: PathBuf,
    log: PathBuf,
    owner: String,
}

/// The handler: logs `start`, works `secs` (a real handler's time; 0 for none), logs `end` —
/// also when the worker stops it (SIGTERM), so the checker sees when every run ended.
fn handler(log: &Path, secs: &str) -> String {
    let l = log.display();
    format!(
        r#"trap 'echo "end $DOCKET_JOB_ID $DOCKET_FENCE $(date +%s%N)" >> {l}; kill $c 2>/dev/null; exit 143' TERM
echo "start $DOCKET_JOB_ID $DOCKET_FENCE $(date +%s%N)" >> {l}
case "$DOCKET_KIND" in tick) ;; *) sleep {secs} & c=$!; wait $c ;; esac
echo "end $DOCKET_JOB_ID $DOCKET_FENCE $(date +%s%N)" >> {l}"#
    )
}

impl Worker {
    /// Starts `docket work` on `queue` in a new namespace; returns once it printed its owner.
    async fn start(e: &Engine, dir: &Path, name: &str, queue: &str, secs: &str) -> Worker {
        let link = Link::create();
        let proxy = Proxy::on_in_front_of(link.host_addr.into(), e.url()).await;
        let (err, log) = (
            dir.join(format!("{name}.err")),
            dir.join(format!("{name}.log")),
        );
        let mut cmd = e.docket(&proxy.url(e.url()));
        cmd.args([
            "work",
            "--queue",
            queue,
            "--concurrency",
            "4",
            "--lease",
            LEASE,
            "--poll",
            "200ms",
            "--exec",
            &handler(&log, secs),
        ]);
        let mut cmd = link.wrap(&cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap());
        let mut proc = Proc::spawn(&mut cmd);
        let said = || std::fs::read_to_string(&err).unwrap_or_default();
        let mut owner = None;
        eventually_explained(
            Duration::from_secs(30),
            &format!("worker {name} started in {}", link.ns),
            || {
                owner = owner_of(&said());
                let done = owner.is_some() || proc.try_wait().unwrap().is_some();
                async move { done }
            },
            said,
        )
        .await;
        assert!(
            proc.try_wait().unwrap().is_none(),
            "worker {name} exited at start: {}",
            said()
        );
        Worker {
            proc,
            link,
            _proxy: proxy,
            err,
            log,
            owner: owner.unwrap(),
        }
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Runs of this worker, from its own execution log.
    fn runs(&self) -> Vec<checker::Execution> {
        checker::parse_log(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }
}

fn unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// SIGTERM to every worker; each must exit 0 without a panic. Then every run must have
/// logged its end (no worker was killed here), and the checker runs over all logs.
async fn finish(e: &Engine, workers: &mut [&mut Worker]) -> checker::CheckReport {
    for w in workers.iter() {
        signal(w.proc.id(), "TERM");
    }
    let mut runs = Vec::new();
    for w in workers.iter_mut() {
        let status = w.proc.wait().unwrap();
        checker::assert_exit(&w.owner, status, &w.said(), checker::Exit::Clean);
        runs.extend(w.runs());
    }
    let endless: Vec<_> = runs.iter().filter(|r| r.end.is_none()).collect();
    assert!(
        endless.is_empty(),
        "runs that never logged their end: {endless:?}"
    );
    assert!(!runs.is_empty(), "no execution was logged");
    let report = e.check(&runs).await;
    println!("{report:?}");
    report
}

/// A runs four 5 s jobs (longer than the 2 s lease: heartbeats carry them) over a slow link
/// (512 kbit/s each way). A's link is cut while they run: its heartbeats stop, and it must stop
/// its handlers before the lease runs out by its own clock. B starts, with free slots: it
/// takes the leadership when A's row expires, reaps A's leases and re-runs those jobs at
/// once — so a run of A's not stopped in time would overlap B's. The link is healed while B
/// runs them: A's statements sent into the cut (heartbeats, completions) reach the database
/// late, and none lands. A serves jobs again afterwards.
async fn worker_partitioned_past_its_lease_is_healed_while_its_successor_runs(e: Engine) {
    let (_d, dir) = scratch();
    e.load("p", 4).await;
    let mut a = Worker::start(&e, &dir, "a", "p", "5").await;
    a.link.throttle(512);
    // Running by A's own log (the row says claimed; the reply may still be on the slow link).
    eventually(Duration::from_secs(30), "A runs its four jobs", || async {
        a.runs().iter().filter(|r| r.end.is_none()).count() == 4
    })
    .await;
    let held: Vec<(i64, i32)> = a.runs().iter().map(|r| (r.job, r.attempt)).collect();
    a.link.cut();
    let cut_at = unix_nanos();
    let mut b = Worker::start(&e, &dir, "b", "p", "5").await;
    b.link.throttle(512);
    // B's handler has started one of the jobs A held (a later attempt): by B's own log, not
    // by the row alone, so the heal below comes after B's run began.
    eventually_explained(
        Duration::from_secs(30),
        "B runs a job A held when its link was cut",
        || async {
            b.runs()
                .iter()
                .any(|r| held.iter().any(|(h, ha)| *h == r.job && r.attempt > *ha))
        },
        || format!("A:\n{}\nB:\n{}", a.said(), b.said()),
    )
    .await;
    a.link.heal();
    let healed_at = unix_nanos();
    e.load("p", 8).await;
    eventually_explained(
        Duration::from_secs(120),
        "every job succeeded, and A served one after the heal",
        || async { e.unfinished().await == 0 && a.runs().iter().any(|r| r.start > healed_at) },
        || format!("A:\n{}\nB:\n{}", a.said(), b.said()),
    )
    .await;
    // The checker first: a run past the lease shows as an overlap with its successor's.
    let report = finish(&e, &mut [&mut a, &mut b]).await;
    assert_eq!(report.jobs, 12);
    assert!(report.reaped >= 2, "A's leases were reaped: {report:?}");
    assert!(
        a.said()
            .contains("lease about to run out without a successful heartbeat"),
        "A never stopped a handler on its own clock:\n{}",
        a.said()
    );
    let stopped = a
        .runs()
        .iter()
        .filter(|r| r.start < cut_at && r.end.is_some_and(|t| t > cut_at))
        .count();
    assert!(stopped >= 2, "A's runs across the cut: {stopped}");
    assert!(report.rerun_jobs >= 2, "A's jobs ran again: {report:?}");
    let ms = |t: i64| (t - cut_at) as f64 / 1e6;
    let a_stop = a
        .runs()
        .iter()
        .filter_map(|r| r.end)
        .filter(|&t| t > cut_at)
        .min();
    let b_start = b
        .runs()
        .iter()
        .filter(|r| held.iter().any(|(h, ha)| *h == r.job && r.attempt > *ha))
        .map(|r| r.start)
        .min();
    if let (Some(stop), Some(start)) = (a_stop, b_start) {
        println!(
            "A stopped its runs {:.0} ms after the cut; B started their successors {:.0} ms after it (gap {:.0} ms; lease {LEASE})",
            ms(stop),
            ms(start),
            ms(start) - ms(stop)
        );
    }
}

/// A leads (leader election, the reaper, a cron schedule of one tick a second with every
/// missed tick enqueued) and runs jobs; B serves beside it. A's link is cut: B takes the
/// leadership when A's row expires, reaps A's leases and goes on enqueueing ticks; A gives the
/// leadership up on its own clock and says so. Healed, A does not take it back. Every tick
/// from the first to the last is enqueued exactly once; no live lease was reaped.
async fn leader_partitioned(e: Engine) {
    let (_d, dir) = scratch();
    e.load("c", 8).await;
    let mut a = Worker::start(&e, &dir, "a", "c", "3").await;
    eventually(Duration::from_secs(30), "A leads and runs jobs", || async {
        e.leader().await.as_deref() == Some(a.owner.as_str())
            && !e.held_by(&a.owner).await.is_empty()
    })
    .await;
    e.cli(
        &[
            "cron",
            "add",
            "tick",
            "--cron",
            "* * * * * *",
            "--queue",
            "c",
            "--kind",
            "tick",
            "--missed",
            "all",
        ],
        "",
    );
    let mut b = Worker::start(&e, &dir, "b", "c", "3").await;
    eventually(Duration::from_secs(30), "A enqueues ticks", || async {
        e.ticks().await.len() >= 2
    })
    .await;
    // Fresh 3-second jobs just before the cut, and the cut as soon as A runs one of them: A
    // is mid-run when its link goes, so B has a lease of A's to reap. (A's first jobs may be
    // over by now: on a loaded machine B and the ticks took seconds to start.)
    let newest = e
        .scalar("SELECT coalesce(max(id), 0) FROM {all_jobs}")
        .await;
    e.load("c", 8).await;
    eventually(
        Duration::from_secs(30),
        "A runs one of the fresh jobs",
        || async { e.held_by(&a.owner).await.iter().any(|(id, _)| *id > newest) },
    )
    .await;
    a.link.cut();
    let cut_at = std::time::Instant::now();
    eventually_explained(
        Duration::from_secs(30),
        "B leads while A is cut off",
        || async { e.leader().await.as_deref() == Some(b.owner.as_str()) },
        || format!("A:\n{}\nB:\n{}", a.said(), b.said()),
    )
    .await;
    let takeover = cut_at.elapsed();
    let at_takeover = e.ticks().await.len();
    eventually_explained(
        Duration::from_secs(30),
        "B enqueues ticks",
        || async { e.ticks().await.len() >= at_takeover + 3 },
        || format!("A:\n{}\nB:\n{}", a.said(), b.said()),
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "A gives the leadership up on its own clock",
        || async { a.said().contains("lost maintenance leadership") },
    )
    .await;
    a.link.heal();
    let healed_at = unix_nanos();
    e.load("c", 8).await;
    eventually_explained(
        Duration::from_secs(60),
        "A serves a job after the heal",
        || async { a.runs().iter().any(|r| r.start > healed_at) },
        || a.said(),
    )
    .await;
    assert_eq!(
        e.leader().await.as_deref(),
        Some(b.owner.as_str()),
        "B kept the leadership after A healed"
    );
    e.cli(&["cron", "remove", "tick"], "");
    eventually(Duration::from_secs(60), "every job succeeded", || async {
        e.unfinished().await == 0
    })
    .await;
    let ticks = e.ticks().await;
    let secs: Vec<i64> = ticks
        .iter()
        .map(|t| {
            chrono::DateTime::parse_from_rfc3339(t)
                .unwrap_or_else(|err| panic!("tick {t:?}: {err}"))
                .timestamp()
        })
        .collect();
    let expected: Vec<i64> = (secs[0]..=secs[secs.len() - 1]).collect();
    assert_eq!(
        secs, expected,
        "every tick from the first to the last, each once"
    );
    let report = finish(&e, &mut [&mut a, &mut b]).await;
    assert!(report.reaped >= 1, "B reaped A's leases: {report:?}");
    println!(
        "B led {takeover:?} after A's cut (lease and leader TTL {LEASE}); {} ticks, each once, across the partition",
        secs.len()
    );
}

/// Both workers' links are pulled (`ip link set down`) while they run jobs, and stay down
/// until every lease has been expired for a whole lease more by the database's clock — the
/// partition outlasts the leases by a lease. Nobody can reap meanwhile. Restored, the workers reconnect, the leader reaps, every job succeeds, and
/// the checker finds no stale write and no overlap.
async fn database_partitioned_from_every_worker(e: Engine) {
    let (_d, dir) = scratch();
    e.load("d", 24).await;
    let mut a = Worker::start(&e, &dir, "a", "d", "3").await;
    let mut b = Worker::start(&e, &dir, "b", "d", "3").await;
    eventually(Duration::from_secs(30), "both run jobs", || async {
        !e.held_by(&a.owner).await.is_empty() && !e.held_by(&b.owner).await.is_empty()
    })
    .await;
    a.link.down();
    b.link.down();
    let down_at = std::time::Instant::now();
    let held = e.leases(0).await.0;
    // Down until every lease has been expired for a whole lease more: the partition outlasts
    // the leases by at least a lease, by the database's clock.
    eventually(
        Duration::from_secs(30),
        "every lease ran out a lease ago, during the partition",
        || async {
            let (recent, old) = e.leases(2_000).await;
            recent == 0 && old >= 2
        },
    )
    .await;
    let left = e.unfinished().await;
    a.link.up();
    b.link.up();
    let down_for = down_at.elapsed();
    eventually_explained(
        Duration::from_secs(120),
        "every job succeeded after the partition",
        || async { e.unfinished().await == 0 },
        || format!("A:\n{}\nB:\n{}", a.said(), b.said()),
    )
    .await;
    let report = finish(&e, &mut [&mut a, &mut b]).await;
    assert_eq!(report.jobs, 24);
    assert!(
        report.reaped >= 2,
        "the leases that ran out in the partition were reaped: {report:?}"
    );
    println!(
        "links down {down_for:?} (lease {LEASE}); {held} leases live at the cut, {left} jobs unfinished when the links came back, {} reaped",
        report.reaped
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_worker_partitioned_past_its_lease_is_healed_while_its_successor_runs() {
    worker_partitioned_past_its_lease_is_healed_while_its_successor_runs(Engine::postgres().await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_worker_partitioned_past_its_lease_is_healed_while_its_successor_runs() {
    worker_partitioned_past_its_lease_is_healed_while_its_successor_runs(Engine::mariadb().await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_leader_partitioned() {
    leader_partitioned(Engine::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_leader_partitioned() {
    leader_partitioned(Engine::mariadb().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_database_partitioned_from_every_worker() {
    database_partitioned_from_every_worker(Engine::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_database_partitioned_from_every_worker() {
    database_partitioned_from_every_worker(Engine::mariadb().await).await;
}
