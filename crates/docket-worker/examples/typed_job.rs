//! A typed job end to end: a business row and its job enqueued in one transaction, a worker
//! that runs the job with its id as idempotency key, and a drain that returns when done.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p docket-worker --example typed_job
//! ```
//! (`docket embedded start` prints a URL to use when you have no server.)

use std::time::Duration;

use docket_core::{NewJob, Store};
use docket_postgres::PgStore;
use docket_worker::{
    Job, JobContext, JobError, JobResult, Registry, Shutdown, Worker, WorkerConfig,
};
use serde::{Deserialize, Serialize};

/// The job's arguments are the job: serde in, serde out.
#[derive(Debug, Serialize, Deserialize)]
struct SendWelcome {
    user_id: i64,
    email: String,
}

impl Job for SendWelcome {
    const KIND: &'static str = "send_welcome";
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

    async fn run(self, ctx: JobContext) -> JobResult {
        if !self.email.contains('@') {
            // Permanent: retrying cannot fix the address. Dead at once, kept for inspection.
            return Err(JobError::discard(format!(
                "invalid address {:?}",
                self.email
            )));
        }
        // Delivery is at-least-once: a provider call keyed by the job id sends once even if
        // this job runs twice (crash after sending, before completing).
        println!(
            "sending welcome mail to {} (idempotency key docket-{}, attempt {})",
            self.email, ctx.id, ctx.attempt
        );
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| {
        "set DATABASE_URL (or run `docket embedded start` and use the URL it prints)"
    })?;
    let store = PgStore::connect(&url, "docket_example", 8).await?;
    store.migrate().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS docket_example.users (id bigint PRIMARY KEY, email text)",
    )
    .execute(store.pool())
    .await?;

    // The user and the job exist together or not at all.
    let mut tx = store.pool().begin().await?;
    let user_id = i64::from(rand::random::<u32>());
    sqlx::query("INSERT INTO docket_example.users (id, email) VALUES ($1, $2)")
        .bind(user_id)
        .bind("ada@example.com")
        .execute(&mut *tx)
        .await?;
    let args = serde_json::to_value(SendWelcome {
        user_id,
        email: "ada@example.com".into(),
    })?;
    let job = store
        .enqueue_tx(&mut tx, &NewJob::new("mail", SendWelcome::KIND, args))
        .await?;
    tx.commit().await?;
    println!("enqueued job {} with user {user_id}", job.id);

    let mut registry = Registry::default();
    registry.register::<SendWelcome>();
    let worker = Worker::new(store, registry, WorkerConfig::default().queue("mail", 4))?;
    let report = worker.drain(Shutdown::on_signals()).await?;
    println!(
        "drained: {} succeeded, {} failed",
        report.metrics.completed, report.metrics.failed
    );
    Ok(())
}
