//! Managed-database habits: migrations and work as a plain role that owns its database (no
//! superuser, no extension), or only its schema; and a drain that survives
//! `statement_timeout`, `idle_in_transaction_session_timeout` and provider-side connection
//! kills with nothing lost.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_postgres::PgStore;
use docket_testkit::{fresh_schema, host_port, server_url};
use docket_worker::{JobContext, JobResult, Registry, Shutdown, TxJob, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::{PgConnection, PgPool};

/// A database owned by a plain role, as a managed service hands one out.
struct OwnedDb {
    admin: PgPool,
    role: String,
    db: String,
    url: String,
}

impl OwnedDb {
    async fn new() -> OwnedDb {
        let server = server_url();
        let admin = docket_testkit::pool(&server, "admin", 2).await;
        let suffix = fresh_schema();
        let (role, db) = (format!("r{suffix}"), format!("d{suffix}"));
        for sql in [
            format!("CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"),
            format!("CREATE DATABASE {db} OWNER {role}"),
        ] {
            sqlx::raw_sql(&sql).execute(&admin).await.unwrap();
        }
        let (host, port) = host_port(&server);
        let url = format!("postgres://{role}@{host}:{port}/{db}");
        OwnedDb {
            admin,
            role,
            db,
            url,
        }
    }

    /// A superuser pool inside this database.
    async fn admin_here(&self) -> PgPool {
        let (host, port) = host_port(&server_url());
        let user: sqlx::postgres::PgConnectOptions = server_url().parse().unwrap();
        docket_testkit::pool(
            &format!(
                "postgres://{}@{host}:{port}/{}",
                user.get_username(),
                self.db
            ),
            "admin",
            1,
        )
        .await
    }

    async fn drop(self) {
        let _ = sqlx::raw_sql(&format!("DROP DATABASE {} WITH (FORCE)", self.db))
            .execute(&self.admin)
            .await;
        let _ = sqlx::raw_sql(&format!(
            "DROP ROLE IF EXISTS {}; DROP ROLE IF EXISTS {}_s",
            self.role, self.role
        ))
        .execute(&self.admin)
        .await;
    }
}

fn noop() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("noop", |_, _| async { Ok(()) });
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_role_that_owns_its_database_or_only_its_schema_migrates_and_works() {
    let od = OwnedDb::new().await;
    let store = PgStore::connect(&od.url, "docket", 6).await.unwrap();
    store
        .migrate()
        .await
        .expect("migrate as the database owner");
    let (superuser, extensions): (bool, i64) = sqlx::query_as(
        "SELECT rolsuper, (SELECT count(*) FROM pg_extension WHERE extname <> 'plpgsql')
         FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(!superuser, "the test must run as a plain role");
    assert_eq!(extensions, 0, "no extension needed");
    let jobs: Vec<NewJob> = (0..500)
        .map(|i| NewJob::new("q", "noop", json!({ "i": i })))
        .collect();
    store.enqueue_many(&jobs).await.unwrap();
    let w = Worker::new(store.clone(), noop(), config("q", 20)).unwrap();
    let report = w.drain(Shutdown::default()).await.unwrap();
    assert_eq!(report.metrics.completed, 500);

    // A role that owns only a schema an administrator made for it, and may not create
    // schemas in the database: migrating that schema works; another is refused clearly.
    let here = od.admin_here().await;
    let schema_role = format!("{}_s", od.role);
    sqlx::raw_sql(&format!(
        "CREATE ROLE {schema_role} LOGIN; CREATE SCHEMA owned AUTHORIZATION {schema_role};
         REVOKE CREATE ON DATABASE {} FROM PUBLIC",
        od.db
    ))
    .execute(&here)
    .await
    .unwrap();
    here.close().await;
    let url = od
        .url
        .replace(&format!("//{}@", od.role), &format!("//{schema_role}@"));
    let s = PgStore::connect(&url, "owned", 2).await.unwrap();
    s.migrate().await.expect("migrate into an owned schema");
    s.enqueue(&NewJob::new("q", "noop", json!({})))
        .await
        .unwrap();
    let other = PgStore::connect(&url, "not_mine", 2).await.unwrap();
    let e = other
        .migrate()
        .await
        .expect_err("no CREATE on the database");
    assert!(e.to_string().contains("permission denied"), "{e}");
    drop((store, s, other));
    od.drop().await;
}

/// Sleeps in its transaction on the first attempt, past the idle-in-transaction limit.
#[derive(Serialize, Deserialize)]
struct SlowTx {}

impl TxJob<PgStore> for SlowTx {
    const KIND: &'static str = "slow_tx";
    async fn run(self, ctx: JobContext, tx: &mut PgConnection) -> JobResult {
        sqlx::query("SELECT 1")
            .execute(&mut *tx)
            .await
            .map_err(|e| JobError::retry(e.to_string()))?;
        if ctx.attempt == 1 {
            tokio::time::sleep(Duration::from_millis(900)).await;
        }
        Ok(())
    }
}

use docket_worker::JobError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_survives_timeouts_and_connection_kills() {
    let od = OwnedDb::new().await;
    let store = PgStore::connect(&od.url, "docket", 2).await.unwrap();
    store.migrate().await.unwrap();
    // The provider's limits, for every new connection of the role.
    sqlx::raw_sql(&format!(
        "ALTER ROLE {r} SET statement_timeout = '250ms';
         ALTER ROLE {r} SET idle_in_transaction_session_timeout = '300ms'",
        r = od.role
    ))
    .execute(&od.admin)
    .await
    .unwrap();
    store.pool().close().await;

    let store = PgStore::connect(&od.url, "docket", 8).await.unwrap();
    let timeout: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(timeout, "250ms");
    const N: i64 = 1500;
    let jobs: Vec<NewJob> = (0..N)
        .map(|i| NewJob::new("q", "noop", json!({ "i": i })))
        .collect();
    store.enqueue_many(&jobs).await.unwrap();
    for _ in 0..5 {
        store
            .enqueue(&NewJob::new("q", "slow_tx", json!({})))
            .await
            .unwrap();
    }
    let mut registry = noop();
    registry.register_tx::<SlowTx>();
    let mut cfg = config("q", 10).lease(Duration::from_secs(3));
    cfg.poll_interval = Duration::from_millis(100);
    cfg.reap_interval = Duration::from_millis(200);
    let w = Arc::new(Worker::new(store.clone(), registry, cfg).unwrap());
    let run = {
        let w = w.clone();
        tokio::spawn(async move { w.drain(Shutdown::default()).await })
    };
    // The provider kills the worker's connections every 300 ms, six times.
    let mut killed = 0;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let n: i64 = sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = $1 AND usename = $2",
        )
        .bind(&od.db)
        .bind(&od.role)
        .fetch_one(&od.admin)
        .await
        .unwrap();
        killed += n;
    }
    let report = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the drain ends")
        .unwrap()
        .expect("the drain succeeds");
    assert!(killed > 0, "no connection was killed");
    println!("{killed} connections killed; {report:?}");
    let check = od.admin_here().await;
    let counts = || async {
        sqlx::query_as::<_, (i64, i64, i64, i64)>(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'),
                    count(*) FILTER (WHERE state = 'dead'),
                    count(*) FILTER (WHERE kind = 'slow_tx' AND state = 'pending' AND attempt = 1),
                    count(*) FILTER (WHERE kind = 'slow_tx' AND state = 'succeeded' AND attempt = 2)
             FROM docket.jobs_all",
        )
        .fetch_one(&check)
        .await
        .unwrap()
    };
    // The server cut the slow jobs' transactions: their completions rolled back, their
    // leases ran out and the reaper put them back for a retry (later, with backoff, which a
    // drain does not wait for). Nothing else was lost.
    let (succeeded, dead, waiting, _) = counts().await;
    assert_eq!((succeeded, dead, waiting), (N, 0, 5), "nothing lost");
    sqlx::query("UPDATE docket.jobs SET run_at = now() WHERE kind = 'slow_tx'")
        .execute(&check)
        .await
        .unwrap();
    let mut registry = noop();
    registry.register_tx::<SlowTx>();
    let again = Worker::new(store.clone(), registry, config("q", 10)).unwrap();
    again.drain(Shutdown::default()).await.unwrap();
    let (succeeded, dead, _, second) = counts().await;
    assert_eq!((succeeded, dead, second), (N + 5, 0, 5));
    check.close().await;
    drop(store);
    od.drop().await;
}
