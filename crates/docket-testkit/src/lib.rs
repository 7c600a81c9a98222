//! Test harness: every test talks to a real PostgreSQL over a real connection.
//!
//! - With `DATABASE_URL` set, tests use that server.
//! - Otherwise the first test of a process starts a throw-away cluster from the system's
//!   binaries (initdb + postgres on a private port and socket) as a child process that dies
//!   with the test process, and every test of that process shares it.
//! - Each test gets its own schema ([`TestDb`]), so tests run in parallel without seeing each
//!   other's jobs, wake-ups (channels are per schema) or locks (advisory keys are per schema).
//! - Tests that stop, kill or restart a server get a cluster of their own
//!   ([`PrivateCluster`]) and never touch the shared one.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use docket_localpg::{free_port, LocalCluster, StopMode};
use docket_postgres::PgStore;
use rand::Rng;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

pub mod checker;
pub mod checker_mysql;
pub mod checker_sqlite;
pub mod conformance;
pub mod mariadb;
pub mod nats;
pub mod netns;
pub mod pgbouncer;
pub mod proxy;
mod shared;
pub mod tls;

/// When tests run as root, the server runs as `postgres`: hand it files it must read.
pub fn chown_to_server(paths: &[&std::path::Path]) {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        for p in paths {
            let ok = Command::new("chown")
                .arg("postgres:postgres")
                .arg(p)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown {}", p.display());
        }
    }
}

/// Makes the server `cmd` starts die (SIGKILL) with the *thread* that spawns it, and
/// refuses to start it when that parent is already gone: a test process killed by any means
/// leaves no server behind. Spawn from a thread that lives as long as the server is used.
pub fn dies_with_spawning_thread(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    #[allow(unsafe_code)]
    // SAFETY: only async-signal-safe calls (prctl, getppid) run between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("parent already exited"));
            }
            Ok(())
        });
    }
}

/// Host and port of a `postgres://` URL (for tools configured by host and port).
pub fn host_port(url: &str) -> (String, u16) {
    let opts: PgConnectOptions = url.parse().expect("valid URL");
    (opts.get_host().to_string(), opts.get_port())
}

/// Settings for throw-away clusters: durability off (tests re-create everything), room for
/// many connections.
pub const TEST_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "400"),
    ("shared_buffers", "'256MB'"),
    ("log_min_messages", "warning"),
];

/// URL of the server all tests of this process share.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("DATABASE_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => shared::start_shared_cluster(),
    })
    .clone()
}

/// A fresh schema on the shared server, migrated, with a store and a pool.
pub struct TestDb {
    /// The store on this test's schema.
    pub store: PgStore,
    /// The pool behind the store; its `application_name` is the schema name, so a test can
    /// find (and terminate) exactly its own backends.
    pub pool: PgPool,
    /// This test's schema.
    pub schema: String,
    /// The server URL.
    pub url: String,
}

/// A random name for one test (a schema, a role suffix, a directory).
pub fn fresh_schema() -> String {
    let n: u64 = rand::thread_rng().gen();
    format!("t_{n:016x}")
}

/// The schema of one [`TestDb`]: `t_<pid>_<random>`. The pid lets a later test process drop
/// the schemas of processes that are gone ([`drop_dead_schemas`]).
fn test_db_schema() -> String {
    let n: u64 = rand::thread_rng().gen();
    format!("t_{}_{n:016x}", std::process::id())
}

/// The advisory lock key of [`drop_dead_schemas`] ("docket-t" in ASCII).
const CLEANER_LOCK: i64 = 0x646f_636b_6574_2d74;

/// Drops, on a thread of its own, the test schemas on `url` left by test processes that are
/// gone, then vacuums the catalogs they filled. Tests never drop their schemas (a test that
/// panics or is killed could not anyway), and the machine's shared server runs with
/// autovacuum off: 1,300 schemas left by earlier runs made a PostgreSQL test binary take
/// 61 s instead of 33 s on an empty database (measured 2026-12-06). Only [`TestDb`]'s
/// schemas (`t_<pid>_<random>`) are dropped, and only when their process is gone and no
/// connection names them (`application_name`); names from [`fresh_schema`] carry no pid and
/// are left alone. The thread does not hold a test up, and what it has not dropped when the
/// process exits, the next process drops.
pub fn drop_dead_schemas(url: &str) {
    let url = url.to_string();
    let _ = std::thread::Builder::new()
        .name("drop-dead-schemas".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(mut conn) = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await
                else {
                    return;
                };
                // One cleaner on the server at a time; the others skip (they would only queue
                // behind it). Test processes run many at once under cargo-nextest, and each
                // cleaner's VACUUM of a catalog waits for the one before it: fifty of them
                // queued for an hour once, each holding a connection, until tests met
                // "pool timed out" at the server's connection limit (2026-12-07).
                let alone: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(CLEANER_LOCK)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap_or(false);
                if !alone {
                    return;
                }
                let names: Vec<String> = sqlx::query_scalar(
                    "SELECT nspname FROM pg_namespace n
                     WHERE nspname ~ '^t_[0-9]+_[0-9a-f]{16}$'
                       AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                       WHERE a.application_name = n.nspname)",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
                let mut dropped_any = false;
                for name in names {
                    let pid = name.split('_').nth(1).and_then(|p| p.parse::<u32>().ok());
                    if pid.is_none_or(|p| std::path::Path::new(&format!("/proc/{p}")).exists()) {
                        continue;
                    }
                    // The name matched the pattern above: letters, digits and `_` only.
                    let drop = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
                    dropped_any |= sqlx::query(&drop).execute(&mut conn).await.is_ok();
                }
                if dropped_any {
                    for t in [
                        "pg_proc",
                        "pg_attribute",
                        "pg_depend",
                        "pg_class",
                        "pg_constraint",
                        "pg_type",
                        "pg_index",
                        "pg_attrdef",
                        "pg_trigger",
                    ] {
                        // No truncation: truncating a catalog needs an exclusive lock that
                        // every running test's catalog reads delay, for minutes.
                        let _ = sqlx::query(&format!("VACUUM (TRUNCATE false) pg_catalog.{t}"))
                            .execute(&mut conn)
                            .await;
                    }
                }
            });
        });
}

/// Opens a pool of `max` connections to `url`, tagged with `app` as application_name.
pub async fn pool(url: &str, app: &str, max: u32) -> PgPool {
    let opts: PgConnectOptions = url.parse().expect("valid DATABASE_URL");
    let opts = opts.application_name(app).disable_statement_logging();
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(opts)
        .await
        .expect("connect to test server")
}

impl TestDb {
    /// A new migrated schema with a pool of 10 connections.
    pub async fn new() -> TestDb {
        Self::with_pool_size(10).await
    }

    /// A new migrated schema with a pool of `max` connections.
    pub async fn with_pool_size(max: u32) -> TestDb {
        let url = server_url();
        // Once per process, on the shared server only: a private cluster is thrown away
        // whole (and asking for the shared URL here would start a shared cluster a test on
        // a private one does not need).
        static CLEANED: OnceLock<()> = OnceLock::new();
        if CLEANED.set(()).is_ok() {
            drop_dead_schemas(&url);
        }
        Self::on(&url, max).await
    }

    /// A new migrated schema on the server at `url` (e.g. a [`PrivateCluster`]).
    pub async fn on(url: &str, max: u32) -> TestDb {
        let url = url.to_string();
        let schema = test_db_schema();
        let pool = pool(&url, &schema, max).await;
        let store = PgStore::with_schema(pool.clone(), &schema).expect("valid schema");
        docket_core::Store::migrate(&store).await.expect("migrate");
        TestDb {
            store,
            pool,
            schema,
            url,
        }
    }

    /// Another pool (separate connections) on the same schema, e.g. for a second worker.
    pub async fn second_pool(&self, max: u32) -> PgPool {
        pool(&self.url, &self.schema, max).await
    }

    /// A store on a separate pool of `max` connections.
    pub async fn second_store(&self, max: u32) -> PgStore {
        PgStore::with_schema(self.second_pool(max).await, &self.schema).expect("schema")
    }

    /// Runs a statement with `{schema}` replaced by this test's schema (for test setup such as
    /// backdating leases).
    pub async fn exec(&self, sql: &str) -> u64 {
        sqlx::query(&sql.replace("{schema}", &self.schema))
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .rows_affected()
    }

    /// Fetches one i64 from a query with `{schema}` replaced.
    pub async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(&sql.replace("{schema}", &self.schema))
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Jobs in `state`, kept successes included: those live packed in `jobs_succeeded`
    /// (migration 0035), not in `jobs`. `state` is one of the job states (a test's literal).
    pub async fn count_state(&self, state: &str) -> i64 {
        let kept = if state == "succeeded" {
            " + (SELECT coalesce(sum(n), 0) FROM {schema}.jobs_succeeded)"
        } else {
            ""
        };
        self.scalar(&format!(
            "SELECT ((SELECT count(*) FROM {{schema}}.jobs WHERE state = $${state}$$){kept})::bigint"
        ))
        .await
    }

    /// Waits until at least `n` backends of this test's schema are blocked on a lock (so a
    /// race is set up for real, not by a sleep). Panics after 30 s.
    pub async fn wait_for_lock_waiters(&self, n: i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
            )
            .bind(&self.schema)
            .fetch_one(&self.pool)
            .await
            .expect("pg_stat_activity");
            if waiting >= n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no lock waiter appeared"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A claim in the middle of its work, as a finishing job of the same key meets it: an
    /// open transaction holding the key's advisory lock (`lock` is `o:KEY` or `c:KEY`, as
    /// the claim names it) and flagging job `id` blocked under it. Commit it to let go.
    pub async fn claim_holding_key(
        &self,
        lock: &str,
        id: docket_core::JobId,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = self.pool.begin().await.expect("begin");
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1 || '/key'), hashtext($2))")
            .bind(&self.schema)
            .bind(lock)
            .execute(&mut *tx)
            .await
            .expect("key lock");
        sqlx::query(&format!(
            "UPDATE {}.jobs SET blocked = true WHERE id = $1",
            self.schema
        ))
        .bind(id.0)
        .execute(&mut *tx)
        .await
        .expect("flag");
        tx
    }

    /// Terminates every backend of this test's schema (all pools tagged with it), except the
    /// one running the statement. Returns how many were terminated.
    pub async fn terminate_backends(&self) -> i64 {
        self.terminate_app(&self.schema).await
    }

    /// Terminates backends whose application_name is `app`.
    pub async fn terminate_app(&self, app: &str) -> i64 {
        let killer = pool(&self.url, "docket-test-killer", 1).await;
        let n: i64 = sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
        )
        .bind(app)
        .fetch_one(&killer)
        .await
        .expect("terminate");
        killer.close().await;
        n
    }
}

/// Polls `cond` every 20 ms until it holds; panics after `within` naming `what`. Tests wait
/// on conditions this way instead of sleeping for a guessed time.
pub async fn eventually<F, Fut>(within: Duration, what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually_explained(within, what, cond, String::new).await
}

/// [`eventually`], and on timeout the panic carries `explain()` too (say, the tails of the
/// workers' logs), so a stall in CI says why.
pub async fn eventually_explained<F, Fut>(
    within: Duration,
    what: &str,
    mut cond: F,
    explain: impl FnOnce() -> String,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !cond().await {
        if Instant::now() >= deadline {
            panic!("timed out waiting for: {what}\n{}", explain());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A cluster of the test's own, for tests that stop, kill or restart the server. Stopped
/// (immediate) and deleted on drop.
pub struct PrivateCluster {
    /// The cluster.
    pub cluster: LocalCluster,
    dir: PathBuf,
}

impl PrivateCluster {
    /// Initialises and starts a new cluster in a temporary directory.
    pub fn start() -> PrivateCluster {
        Self::start_with(&[], |_, _| {})
    }

    /// Like [`PrivateCluster::start`], with `settings` added to the test settings and
    /// `prepare(dir, data_dir)` run after initdb and before the first start (to add
    /// certificates, pg_hba lines, …).
    pub fn start_with(
        settings: &[(&str, &str)],
        prepare: impl FnOnce(&std::path::Path, &std::path::Path),
    ) -> PrivateCluster {
        let dir = std::env::temp_dir().join(format!("docket-private-{}", fresh_schema()));
        let cluster = LocalCluster::at(&dir, free_port().expect("port")).expect("binaries");
        let mut all: Vec<(&str, &str)> = TEST_SETTINGS.to_vec();
        all.extend_from_slice(settings);
        cluster.init(&all).expect("initdb");
        prepare(&dir, cluster.data_dir());
        // A port found free can still be taken before the server binds it (another test's
        // listener): try another one.
        let mut cluster = cluster;
        for attempt in 1.. {
            match cluster.start() {
                Ok(()) => break,
                Err(e) if attempt < 4 && e.to_string().contains("pg_ctl start") => {
                    let log = std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
                    if !log.contains("Address already in use") {
                        panic!("start: {e}");
                    }
                    cluster
                        .set_port(free_port().expect("port"))
                        .expect("set port");
                }
                Err(e) => panic!("start: {e}"),
            }
        }
        PrivateCluster { cluster, dir }
    }

    /// The cluster's directory (data, socket, log).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// URL of the `postgres` database.
    pub fn url(&self) -> String {
        self.cluster.url("postgres")
    }

    /// Restarts the server with the given stop mode and waits until it accepts connections.
    pub fn restart(&self, mode: StopMode) {
        self.cluster.stop(mode).expect("stop");
        self.cluster.start().expect("start");
    }

    /// Blocks until the server accepts TCP connections (or panics after 60 s).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.cluster.is_ready() {
            assert!(Instant::now() < deadline, "server did not come back");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.cluster.stop(StopMode::Immediate);
        let _ = Command::new("rm").arg("-rf").arg(&self.dir).status();
    }
}
