//! The commands on an engine other than PostgreSQL (SQLite, MariaDB / MySQL): every
//! engine-independent command through [`Open`], the demo, and a clear refusal for the
//! PostgreSQL-only ones.

use crate::cli::Command;
use crate::engine::Open;
use crate::fail::CliError;
use crate::{audit, controls, dashboard, demo, enqueue, jobs, ops, work, workflows};

/// An engine the CLI runs on besides PostgreSQL.
pub(crate) trait Engine: Open + Clone + Send + Sync + 'static {
    /// For messages ("needs PostgreSQL; this database is SQLite").
    const NAME: &'static str;
    /// The demo's place on this engine.
    type Demo: demo::DemoDb;
    fn demo(&self) -> Self::Demo;
    /// Where the data is, for messages (never a password).
    fn place(&self) -> String;
    /// `docket bench` on this engine (against its own floor).
    async fn bench(&self, a: &crate::cli::BenchArgs) -> anyhow::Result<()>;
}

fn postgres_only(what: &str, engine: &str) -> anyhow::Error {
    CliError::invalid(format!(
        "`docket {what}` needs PostgreSQL; this database is {engine}"
    ))
    .hint("run it with a postgres:// --database-url")
    .into()
}

/// Runs `command` on `ctx`.
pub(crate) async fn run<E: Engine>(ctx: E, command: Command) -> anyhow::Result<()> {
    let pg_only = |what: &str| postgres_only(what, E::NAME);
    match command {
        Command::Migrate => {
            ctx.migrated(1).await?;
            println!("migrations applied to {}", ctx.place());
            Ok(())
        }
        Command::Enqueue(a) => enqueue::run(&ctx, a).await,
        Command::Work(a) => work::run(&ctx, a).await,
        Command::Jobs(c) => jobs::run(&ctx, c).await,
        Command::Queues(c) => controls::queues(&ctx, c).await,
        Command::Keys(c) => controls::keys(&ctx, c).await,
        Command::Cron(c) => controls::cron(&ctx, c).await,
        Command::Workflows(c) => workflows::run(&ctx, c).await,
        Command::Batches(c) => crate::batches::run(&ctx, c).await,
        Command::Outbox(c) => crate::outbox::run(&ctx, c).await,
        Command::Relay(a) => crate::outbox::relay(&ctx, a).await,
        Command::Consume(a) => crate::consume::run(a).await,
        Command::Stats(a) => ops::stats(&ctx, a.json).await,
        Command::Workers(a) => ops::workers(&ctx, a).await,
        Command::Audit(a) => audit::run(&ctx, a).await,
        Command::Dashboard(a) => dashboard::run(&ctx, a).await,
        Command::Reap(a) => ops::reap(&ctx, a.json).await,
        Command::Prune(a) => ops::prune(&ctx, a).await,
        Command::Demo(a) => demo::run(&ctx.demo(), a).await,
        Command::DemoWorker(a) => demo::worker(&ctx.demo(), a).await,
        Command::Grant(_) => Err(pg_only("grant")),
        Command::Explain(_) => Err(pg_only("explain")),
        Command::Lab(_) => Err(pg_only("lab")),
        Command::Bench(a) => ctx.bench(&a).await,
        Command::BenchWorker(_) => Err(pg_only("__bench-worker")),
        Command::Embedded(_) => unreachable!("handled before a database is chosen"),
    }
}
