//! The benchmark's MariaDB / MySQL side: scratch databases `<database>_bench` and
//! `<database>_floor` on the same server (re-created each time; only ones the benchmark made,
//! recognised by a marker table), and the floor — concurrent clients claiming batches with
//! `FOR UPDATE SKIP LOCKED` and completing them, in raw SQL.

use docket_core::Store;
use docket_mysql::MySqlStore;

use super::BenchDb;
use crate::cli::exit;
use crate::fail::CliError;
use crate::mysql::MySqlCtx;

const FLOOR: &str = include_str!("mysql_floor.sql");
const CLAIM_SELECT: &str = include_str!("mysql_claim_select.sql");
const CLAIM_UPDATE: &str = include_str!("mysql_claim_update.sql");
const CLAIM_READ: &str = include_str!("mysql_claim_read.sql");
const COMPLETE: &str = include_str!("mysql_complete.sql");
const NOW: &str = "SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)";
const MARKER: &str = "docket_bench_scratch";

pub(crate) struct Bench(pub MySqlCtx);

impl Bench {
    /// Drops (when a benchmark made it) and re-creates `<database>_<what>`; its URL.
    async fn scratch(&self, what: &str) -> anyhow::Result<MySqlCtx> {
        let db = format!("{}_{what}", self.0.database().unwrap_or_default());
        docket_core::validate::schema(&db.to_lowercase())
            .map_err(|e| CliError::invalid(format!("benchmark database name: {e}")))?;
        let admin = self.0.connect(1).await?;
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
        )
        .bind(&db)
        .fetch_one(admin.pool())
        .await?;
        if exists > 0 {
            let ours: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
            )
            .bind(&db)
            .bind(MARKER)
            .fetch_one(admin.pool())
            .await?;
            if ours == 0 {
                return Err(CliError::new(
                    exit::CONFLICT,
                    format!("database {db:?} exists and was not made by `docket bench`; refusing to drop it"),
                )
                .into());
            }
            sqlx::raw_sql(&format!("DROP DATABASE `{db}`"))
                .execute(admin.pool())
                .await?;
        }
        sqlx::raw_sql(&format!(
            "CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        ))
        .execute(admin.pool())
        .await?;
        sqlx::raw_sql(&format!("CREATE TABLE `{db}`.{MARKER} (x INT)"))
            .execute(admin.pool())
            .await?;
        admin.pool().close().await;
        Ok(self.0.with_database(&db))
    }
}

fn marks(n: usize, each: &str) -> String {
    vec![each; n].join(", ")
}

async fn client(pool: sqlx::MySqlPool, batch: usize) -> anyhow::Result<u64> {
    let mut done = 0u64;
    loop {
        let mut tx = pool.begin().await?;
        let now: i64 = sqlx::query_scalar(NOW).fetch_one(&mut *tx).await?;
        let ids: Vec<i64> = sqlx::query_scalar(CLAIM_SELECT)
            .bind(now)
            .bind(batch as i64)
            .fetch_all(&mut *tx)
            .await?;
        if ids.is_empty() {
            tx.rollback().await?;
            return Ok(done);
        }
        let upd = CLAIM_UPDATE.replace("/*ids*/", &marks(ids.len(), "?"));
        let mut q = sqlx::query(&upd).bind(now + 300_000);
        for id in &ids {
            q = q.bind(id);
        }
        q.execute(&mut *tx).await?;
        let read = CLAIM_READ.replace("/*ids*/", &marks(ids.len(), "?"));
        let mut q = sqlx::query_as::<_, (i64, i32)>(&read);
        for id in &ids {
            q = q.bind(id);
        }
        let claimed = q.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        let done_sql = COMPLETE.replace("/*pairs*/", &marks(claimed.len(), "(?, ?)"));
        let mut q = sqlx::query(&done_sql);
        for (id, att) in &claimed {
            q = q.bind(id).bind(att);
        }
        done += q.execute(&pool).await?.rows_affected();
    }
}

impl BenchDb for Bench {
    type Store = MySqlStore;
    const NAME: &'static str = "MariaDB";
    const FLOOR_CLIENTS: usize = 4;

    async fn fresh(&self, _run: usize) -> anyhow::Result<MySqlStore> {
        let ctx = self.scratch("bench").await?;
        let store = MySqlStore::connect(&ctx.url, 16).await?;
        store.migrate().await?;
        Ok(store)
    }

    async fn floor(&self, n: u64, batch: usize, clients: usize) -> anyhow::Result<f64> {
        let ctx = self.scratch("floor").await?;
        let store = MySqlStore::connect(&ctx.url, clients as u32 + 1).await?;
        let pool = store.pool().clone();
        sqlx::raw_sql(FLOOR).execute(&pool).await?;
        let now: i64 = sqlx::query_scalar(NOW).fetch_one(&pool).await?;
        for start in (0..n).step_by(1000) {
            let k = (n - start).min(1000) as usize;
            let sql = format!(
                "INSERT INTO floor_jobs (payload, run_at) VALUES {}",
                marks(k, "(?, ?)")
            );
            let mut q = sqlx::query(&sql);
            for i in 0..k as u64 {
                q = q.bind(format!("{{\"n\":{}}}", start + i)).bind(now);
            }
            q.execute(&pool).await?;
        }
        let started = std::time::Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|_| tokio::spawn(client(pool.clone(), batch)))
            .collect();
        let mut done = 0u64;
        for t in tasks {
            done += t.await??;
        }
        let secs = started.elapsed().as_secs_f64();
        anyhow::ensure!(done == n, "the floor completed {done} of {n}");
        Ok(n as f64 / secs)
    }

    async fn span(&self, store: &MySqlStore) -> anyhow::Result<(i64, i64)> {
        Ok(sqlx::query_as(
            "SELECT CAST(MIN(attempted_at) AS SIGNED), CAST(MAX(finished_at) AS SIGNED) FROM jobs",
        )
        .fetch_one(store.pool())
        .await?)
    }
}
