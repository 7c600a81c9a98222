//! `docket`: the demo, the operator's CLI, exec workers and the embedded local PostgreSQL.
//! A library with a thin binary (`src/main.rs`), so that `docket-bench` can drive the same
//! commands and worker processes for the long benchmarks it carries (scale, churn, charts).
//!
//! # Layout
//! - [`cli`]: the command-line contract (clap) and exit codes.
//! - [`fail`]: errors as one line + hint + exit code.
//! - [`embedded`]: the embedded local PostgreSQL under `.docket/`.
//! - `enqueue`, `jobs`, `controls`, `ops`, `work`, `demo`: the commands.
//! - `engine`: `engine::Open`, the seam the engine-independent commands are written
//!   against (PostgreSQL-only ones take [`Ctx`]).
//! - [`output`]: tables (colour only on a terminal) and JSON.

#![warn(missing_docs)]

mod audit;
mod batches;
pub mod bench;
pub mod bench_concurrency;
mod bench_handlers;
mod bench_jetstream;
mod bench_keep;
mod bench_outbox;
mod bench_workflows;
pub mod cli;
mod consume;
mod controls;
mod dashboard;
mod demo;
pub mod embedded;
mod engine;
mod engine_bench;
mod engines;
mod enqueue;
mod exec;
pub mod fail;
mod jobs;
mod lab;
pub mod mysql;
mod ops;
mod outbox;
pub mod output;
pub mod scratch;
pub mod sqlite;
mod work;
mod workflows;

use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command};
use docket_postgres::connect;
use docket_postgres::PgStore;
use fail::CliError;

/// Resolved connection settings.
#[derive(Clone)]
pub struct Ctx {
    /// The database URL (from --database-url, DATABASE_URL or the embedded cluster).
    pub url: String,
    /// Docket's schema.
    pub schema: String,
}

impl Ctx {
    /// This binary again, as a hidden worker subcommand on the same database and schema
    /// (the demo and the benchmark run real worker processes so they can be killed).
    /// The URL travels in the child's environment, never in its argv (`ps` shows argv to
    /// every user of the machine).
    pub fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        let mut c = std::process::Command::new(std::env::current_exe()?);
        c.env("DATABASE_URL", &self.url)
            .args(["--schema", &self.schema, subcommand])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        Ok(c)
    }

    /// A migrated store with a pool of `max` connections.
    pub async fn store(&self, max: u32) -> anyhow::Result<PgStore> {
        let store = self.connect(max).await?;
        docket_core::Store::migrate(&store).await?;
        Ok(store)
    }

    /// A store on a schema that must already be migrated: operator commands never create or
    /// migrate a schema (a typo in --schema must not leave a new one behind); a missing one
    /// is an error naming it, a newer one is used when additive (see migrate.rs).
    pub async fn existing(&self, max: u32) -> anyhow::Result<PgStore> {
        let store = self.connect(max).await?;
        docket_postgres::migrate::check(store.pool(), &self.schema)
            .await
            .map_err(|e| match e {
                docket_core::StoreError::Database(inner)
                    if inner
                        .downcast_ref::<docket_postgres::migrate::SchemaError>()
                        .is_some() =>
                {
                    // The hint fits the case: a missing schema is created by `docket
                    // migrate`; one migrated by a newer release needs that release.
                    let hint = match inner.downcast_ref::<docket_postgres::migrate::SchemaError>() {
                        Some(docket_postgres::migrate::SchemaError::TooNew { .. }) => {
                            "a newer release of docket migrated this schema: upgrade this binary"
                        }
                        Some(docket_postgres::migrate::SchemaError::Missing { .. }) => {
                            "check --schema / DOCKET_SCHEMA; `docket migrate` creates it"
                        }
                        _ => "check --schema / DOCKET_SCHEMA and the migration history",
                    };
                    anyhow::Error::from(
                        CliError::new(cli::exit::FAILURE, inner.to_string()).hint(hint),
                    )
                }
                other => anyhow::Error::from(other),
            })?;
        Ok(store)
    }

    /// A store without running migrations (for read-only commands that must not write).
    pub async fn connect(&self, max: u32) -> anyhow::Result<PgStore> {
        docket_core::validate::schema(&self.schema)
            .map_err(|e| CliError::invalid(e.to_string()))?;
        let mut target = self.target()?;
        // Tagged with the schema so an operator (or a test) can tell whose connections
        // pg_stat_activity shows.
        let pool = connect::pool(&mut target, &format!("docket/{}", self.schema), max)
            .await
            .map_err(fail::connect_error)?;
        Ok(PgStore::with_schema(pool, &self.schema)
            .map_err(|e| CliError::invalid(e.to_string()))?
            .with_pooler(target.pooler)
            .detect_pooler(target.pooler_source != connect::PoolerSource::Explicit))
    }

    /// The parsed connection string (URL or key=value; TLS and `pooler=` parameters).
    pub fn target(&self) -> anyhow::Result<connect::Target> {
        let target = connect::parse(&self.url).map_err(fail::connect_error)?;
        if target.pooler == docket_postgres::PoolerMode::Transaction {
            tracing::info!(
                source = ?target.pooler_source,
                "transaction-mode pooler: every statement in its own transaction, no prepared-statement cache"
            );
        }
        Ok(target)
    }
}

fn blank_url() -> anyhow::Error {
    CliError::invalid("DATABASE_URL (or --database-url) is set but blank")
        .hint("set it to a postgres:// URL, or unset it to use the embedded PostgreSQL")
        .into()
}

/// Shutdown on signals, and also when the process that started this one is gone: worker
/// processes of the demo and the benchmark must not outlive a killed parent.
pub fn shutdown_with_parent() -> docket_worker::Shutdown {
    let s = docket_worker::Shutdown::on_signals();
    let graceful = s.graceful.clone();
    let parent = std::os::unix::process::parent_id();
    tokio::spawn(async move {
        while std::os::unix::process::parent_id() == parent {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        graceful.cancel();
    });
    s
}

/// SIGTERM (a graceful stop) to every child, then waits for all of them.
pub fn stop_children(children: &mut [std::process::Child]) {
    for c in children.iter_mut() {
        if matches!(c.try_wait(), Ok(None)) {
            let _ = std::process::Command::new("kill")
                .arg(c.id().to_string())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCKET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use tracing_subscriber::Layer;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otel")]
    let registry = registry.with(otel::layer());
    registry.init();
}

/// OTLP export of the job spans (feature `otel`), when OTEL_EXPORTER_OTLP_ENDPOINT is set;
/// the exporter reads the standard OTEL_* variables itself.
#[cfg(feature = "otel")]
mod otel {
    use std::sync::OnceLock;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::Layer;

    static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

    pub fn layer<S>() -> Option<impl Layer<S>>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT")?;
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
        {
            Ok(e) => e,
            Err(e) => {
                eprintln!("docket: OTLP export disabled: {e}");
                return None;
            }
        };
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("docket")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("docket");
        let _ = PROVIDER.set(provider);
        Some(tracing_opentelemetry::layer().with_tracer(tracer))
    }

    /// Flushes what is buffered (at exit).
    pub fn shutdown() {
        if let Some(p) = PROVIDER.get() {
            let _ = p.shutdown();
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Embedded(cmd) = &cli.command {
        return ops::embedded(cmd).await;
    }
    if let Command::Bench(a) = &cli.command {
        bench::check_sizes(a)?;
    }
    // A queue on JetStream needs no database.
    let cli = match cli.command {
        Command::Consume(a) => return consume::run(a).await,
        command => Cli { command, ..cli },
    };
    // A blank DATABASE_URL is a mistake (an unset secret in a deployment), not a request for
    // the embedded cluster: only an absent one means that.
    let blank = |v: &str| v.trim().is_empty();
    let url = match cli.database_url.as_deref() {
        Some(u) if !blank(u) => u.to_string(),
        Some(_) => return Err(blank_url()),
        None if std::env::var_os("DATABASE_URL").is_some() => return Err(blank_url()),
        None => embedded::ensure_running()?,
    };
    if sqlite::is_url(&url) {
        return engines::run(sqlite::SqliteCtx { url }, cli.command).await;
    }
    if mysql::is_url(&url) {
        return engines::run(mysql::MySqlCtx { url }, cli.command).await;
    }
    let ctx = Ctx {
        url,
        schema: cli.schema.clone(),
    };
    match cli.command {
        Command::Migrate => {
            ctx.store(1).await?;
            println!("migrations applied to schema {}", ctx.schema);
            Ok(())
        }
        Command::Grant(a) => ops::grant(&ctx, a).await,
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
        Command::Explain(a) => ops::explain(&ctx, a).await,
        Command::Lab(a) => ops::lab(&ctx, a).await,
        Command::Demo(a) => demo::run(&demo::postgres::Db(ctx), a).await,
        Command::Bench(a) => bench::run(&ctx, a).await,
        Command::BenchWorker(a) => bench::worker(&ctx, a).await,
        Command::DemoWorker(a) => demo::worker(&demo::postgres::Db(ctx), a).await,
        Command::Embedded(_) => unreachable!("handled above"),
    }
}

/// The `docket` binary's entry point (`src/main.rs`): parses the command line, runs it, and
/// exits with the code its error maps to.
/// `docket jobs list | head -1`: once the reader has gone, writing to stdout fails with EPIPE
/// and `println!` panics (Rust ignores SIGPIPE so that a closed socket is an error, not the
/// death of a worker; restoring SIGPIPE for the whole process would bring that back). A
/// closed stdout instead ends the command quietly with status 141, as a shell tool killed
/// by SIGPIPE ends; every other panic is reported as before. Written by hand: the 78 places
/// that print would each need the same check, and a crate that restores SIGPIPE would kill
/// `docket work` on a dropped Unix-socket connection.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        // std's message: "failed printing to stdout: Broken pipe (os error 32)".
        if message.starts_with("failed printing to stdout")
            && message.to_ascii_lowercase().contains("broken pipe")
        {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// The `docket` binary: parses the command line, runs it, exits with its code.
pub fn main() {
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(run(cli));
    #[cfg(feature = "otel")]
    otel::shutdown();
    if let Err(e) = result {
        let (code, message, hint) = fail::classify(&e);
        eprintln!("error: {message}");
        if let Some(h) = hint {
            eprintln!("hint: {h}");
        }
        rt.shutdown_timeout(Duration::from_millis(100));
        std::process::exit(code);
    }
}
