//! What the examples share: the application's one job, and its tables.
//!
//! `SendWelcome` runs inside the transaction that completes it (a [`TxJob`]): its effect —
//! a row in `welcomes` — commits exactly when the job does, so a job that runs twice (a
//! crash before its completion) leaves one row. An effect outside the database would use
//! `ctx.id` as its idempotency key instead.

use docket::prelude::*;
use serde::{Deserialize, Serialize};

/// The queue the examples use.
pub const QUEUE: &str = "mail";

/// Welcome a user who just signed up.
#[derive(Debug, Serialize, Deserialize)]
pub struct SendWelcome {
    /// The new user.
    pub user_id: i64,
    /// Where to send the mail.
    pub email: String,
}

impl TxJob<PgStore> for SendWelcome {
    const KIND: &'static str = "send_welcome";
    const QUEUE: &'static str = QUEUE;

    async fn run(self, ctx: JobContext, tx: &mut sqlx::PgConnection) -> JobResult {
        if !self.email.contains('@') {
            // Permanent: retrying cannot fix the address. Dead at once, kept for inspection.
            return Err(JobError::discard(format!(
                "invalid address {:?}",
                self.email
            )));
        }
        let sql = format!(
            "INSERT INTO {}.welcomes (job_id, user_id, email) VALUES ($1, $2, $3)",
            app_schema()
        );
        sqlx::query(&sql)
            .bind(ctx.id.0)
            .bind(self.user_id)
            .bind(&self.email)
            .execute(&mut *tx)
            .await
            .map_err(|e| JobError::retry(e.to_string()))?;
        Ok(())
    }
}

/// The application's own schema: `APP_SCHEMA`, default `app` (checked like Docket's schema
/// names, since it is written into SQL).
pub fn app_schema() -> String {
    let s = std::env::var("APP_SCHEMA").unwrap_or_else(|_| "app".into());
    docket::core::validate::schema(&s).expect("APP_SCHEMA: 1-48 of a-z 0-9 _");
    s
}

/// Creates the application's own tables in [`app_schema`], next to Docket's.
pub async fn create_app_tables(store: &PgStore) -> Result<(), sqlx::Error> {
    let a = app_schema();
    for sql in [
        format!("CREATE SCHEMA IF NOT EXISTS {a}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {a}.users (id bigserial PRIMARY KEY, email text NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {a}.welcomes (job_id bigint PRIMARY KEY, \
             user_id bigint NOT NULL, email text NOT NULL)"
        ),
    ] {
        sqlx::query(&sql).execute(store.pool()).await?;
    }
    Ok(())
}

/// The registry every process that runs the application's jobs builds.
pub fn registry() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_tx::<SendWelcome>();
    r
}

/// What every process of the application does first: logs (`RUST_LOG`), a store on
/// `DATABASE_URL` and `DOCKET_SCHEMA` (default `docket`) with at most `max_connections`,
/// Docket's migrations, the application's tables.
pub async fn start(max_connections: u32) -> Result<PgStore, Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let url = std::env::var("DATABASE_URL").map_err(|_| {
        "set DATABASE_URL (or run `docket embedded start` and use the URL it prints)"
    })?;
    let schema = std::env::var("DOCKET_SCHEMA").unwrap_or_else(|_| "docket".into());
    let store = PgStore::connect(&url, &schema, max_connections).await?;
    store.migrate().await?;
    create_app_tables(&store).await?;
    Ok(store)
}
