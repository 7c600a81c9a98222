//! `docket outbox` (write a message, read the outbox) and `docket relay` (publish it to NATS
//! JetStream): docs/outbox.md.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use comfy_table::Cell;
use docket_core::outbox::{NewMessage, OutboxState};
use docket_core::Store;
use docket_nats::async_nats::jetstream::stream as async_nats_config;
use docket_nats::{NatsOptions, Relay, RelayConfig, StreamSpec};
use tokio_util::sync::CancellationToken;

use crate::engine::Open;
use crate::fail::CliError;
use crate::output;

/// `docket outbox …`.
#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Write one message (in a transaction of its own: applications write theirs inside
    /// their own transactions, with `publish_in` or SQL `publish()`). Prints its id.
    Publish(PublishArgs),
    /// Unpublished, in flight, failing, the oldest unpublished message's age, published
    /// messages kept, the newest publish error.
    Stats(crate::cli::JsonFlag),
    /// Messages: unpublished (oldest first), failing, or published (newest first).
    List(ListArgs),
}

/// `docket outbox publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The subject (tokens separated by dots, no wildcards).
    pub subject: String,
    /// The payload, a JSON document.
    pub payload: String,
    /// Order this message after earlier ones with the same key.
    #[arg(long)]
    pub key: Option<String>,
    /// A header, NAME=VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket outbox list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// unpublished, failing or published.
    #[arg(long, default_value = "unpublished")]
    pub state: String,
    /// How many, 1..=1000.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// How to reach NATS (shared by `docket relay` and `docket consume`).
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL(s), comma-separated. A token or password belongs in
    /// DOCKET_NATS_TOKEN / DOCKET_NATS_PASSWORD or a file, not here.
    #[arg(
        long,
        env = "DOCKET_NATS_URL",
        hide_env_values = true,
        default_value = "nats://127.0.0.1:4222"
    )]
    pub nats: String,
    /// A NATS .creds file (JWT and NKey seed).
    #[arg(long)]
    pub nats_creds: Option<PathBuf>,
    /// A file holding an NKey seed.
    #[arg(long)]
    pub nats_nkey: Option<PathBuf>,
    /// A file holding a token (or set DOCKET_NATS_TOKEN).
    #[arg(long)]
    pub nats_token_file: Option<PathBuf>,
    /// A user name; its password from DOCKET_NATS_PASSWORD.
    #[arg(long)]
    pub nats_user: Option<String>,
    /// Require TLS.
    #[arg(long)]
    pub nats_tls: bool,
    /// Extra root certificates (PEM) for TLS.
    #[arg(long)]
    pub nats_ca: Option<PathBuf>,
}

/// `docket relay`: publish the outbox to a JetStream stream.
#[derive(Debug, Args)]
pub struct RelayArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The stream to publish into (checked: its duplicate window must cover a re-publish).
    #[arg(long)]
    pub stream: String,
    /// Create the stream when missing (file storage, a 10-minute duplicate window).
    #[arg(long)]
    pub create_stream: bool,
    /// The subjects the created stream captures (repeatable, e.g. 'orders.>').
    #[arg(long = "subjects", value_delimiter = ',')]
    pub subjects: Vec<String>,
    /// Replicas of the created stream (3 on a cluster).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Exit once nothing is left to publish.
    #[arg(long)]
    pub drain: bool,
    /// Messages per claim, 1..=1000.
    #[arg(long, default_value_t = 1000)]
    pub batch: i64,
    /// Claim → publish → mark loops side by side, 1..=64.
    #[arg(long, default_value_t = 4)]
    pub lanes: usize,
    /// How long a claim holds its messages.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// Published messages are deleted after this long.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub retention: Duration,
    /// Print JSON (with --drain: what was published).
    #[arg(long)]
    pub json: bool,
}

/// Runs a `docket outbox` command.
pub async fn run(ctx: &impl Open, cmd: OutboxCommand) -> anyhow::Result<()> {
    match cmd {
        OutboxCommand::Publish(a) => publish(ctx, a).await,
        OutboxCommand::Stats(a) => stats(ctx, a.json).await,
        OutboxCommand::List(a) => list(ctx, a).await,
    }
}

async fn publish(ctx: &impl Open, a: PublishArgs) -> anyhow::Result<()> {
    let payload: serde_json::Value = serde_json::from_str(&a.payload)
        .map_err(|e| CliError::invalid(format!("payload is not JSON: {e}")))?;
    let mut msg = NewMessage {
        subject: a.subject,
        payload,
        key: a.key,
        headers: Default::default(),
    };
    for h in &a.headers {
        let (n, v) = h
            .split_once('=')
            .ok_or_else(|| CliError::invalid(format!("header {h:?}: use NAME=VALUE")))?;
        msg.headers.insert(n.to_string(), v.to_string());
    }
    msg.validate()
        .map_err(|e| CliError::invalid(e.to_string()).hint("nothing was written"))?;
    let store = ctx.migrated(1).await?;
    let id = store.publish(&msg).await?;
    if a.json {
        return output::json(&serde_json::json!({ "id": id }));
    }
    println!("message {id} written to the outbox");
    Ok(())
}

async fn stats(ctx: &impl Open, json: bool) -> anyhow::Result<()> {
    let store = ctx.existing(1).await?;
    let s = store.outbox_stats().await?;
    if json {
        return output::json(&s);
    }
    let mut t = output::table(&[
        "unpublished",
        "in flight",
        "failing",
        "oldest unpublished",
        "published (kept)",
    ]);
    t.add_row(vec![
        Cell::new(s.unpublished),
        Cell::new(s.in_flight),
        Cell::new(s.failing),
        Cell::new(humantime::format_duration(Duration::from_secs(
            (s.oldest_age_ms / 1000).max(0) as u64,
        ))),
        Cell::new(s.published),
    ]);
    println!("{t}");
    if let Some(e) = s.last_error {
        println!("newest publish error: {}", output::safe(&e));
    }
    Ok(())
}

async fn list(ctx: &impl Open, a: ListArgs) -> anyhow::Result<()> {
    let state: OutboxState = a
        .state
        .parse()
        .map_err(|e: docket_core::ValidationError| CliError::invalid(e.to_string()))?;
    if !(1..=1000).contains(&a.limit) {
        return Err(CliError::invalid("--limit must be 1..=1000").into());
    }
    let store = ctx.existing(1).await?;
    let rows = store.outbox_list(state, a.limit).await?;
    if a.json {
        return output::json(&rows);
    }
    let mut t = output::table(&[
        "id",
        "subject",
        "key",
        "attempt",
        "errors",
        "written",
        "published",
        "seq",
        "payload",
        "last error",
    ]);
    for r in &rows {
        t.add_row(vec![
            Cell::new(r.id),
            Cell::new(output::safe(&r.subject)),
            Cell::new(output::safe(r.key.as_deref().unwrap_or(""))),
            Cell::new(r.attempt),
            Cell::new(r.errors),
            Cell::new(output::time(&r.created_at)),
            Cell::new(
                r.published_at
                    .as_ref()
                    .map(output::time)
                    .unwrap_or_default(),
            ),
            Cell::new(r.stream_seq.map(|s| s.to_string()).unwrap_or_default()),
            // A published payload PostgreSQL did not keep (over 1,800 bytes stored) is in
            // the stream at `seq`.
            Cell::new(output::clip(
                r.payload.as_deref().unwrap_or("(in the stream)"),
                60,
            )),
            Cell::new(output::clip(r.last_error.as_deref().unwrap_or(""), 80)),
        ]);
    }
    println!("{t}");
    Ok(())
}

/// The NATS options of `a`: secrets from the environment or files only.
pub fn nats_options(a: &NatsArgs, name: &str) -> anyhow::Result<NatsOptions> {
    let read = |p: &PathBuf, what: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .map_err(|e| CliError::invalid(format!("{what} {}: {e}", p.display())))
    };
    let token = match (&a.nats_token_file, std::env::var("DOCKET_NATS_TOKEN")) {
        (Some(p), _) => Some(read(p, "token file")?),
        (None, Ok(t)) if !t.is_empty() => Some(t),
        _ => None,
    };
    let user_password = match &a.nats_user {
        Some(u) => {
            let p = std::env::var("DOCKET_NATS_PASSWORD").map_err(|_| {
                CliError::invalid("--nats-user needs its password in DOCKET_NATS_PASSWORD")
            })?;
            Some((u.clone(), p))
        }
        None => None,
    };
    Ok(NatsOptions {
        url: a.nats.clone(),
        creds_file: a.nats_creds.clone(),
        nkey_file: a.nats_nkey.clone(),
        token,
        user_password,
        require_tls: a.nats_tls,
        ca_file: a.nats_ca.clone(),
        name: Some(name.into()),
    })
}

/// Whether `e` may pass by itself (a database or NATS server restarting): the relay then
/// keeps trying to start instead of exiting, as a worker keeps trying to reach its database.
fn transient(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        if let Some(s) = c.downcast_ref::<docket_core::StoreError>() {
            return s.is_transient();
        }
        match c.downcast_ref::<docket_nats::NatsError>() {
            Some(docket_nats::NatsError::Unavailable(_)) => true,
            Some(docket_nats::NatsError::Store(s)) => s.is_transient(),
            _ => c
                .downcast_ref::<CliError>()
                .is_some_and(|c| c.code == crate::cli::exit::UNAVAILABLE),
        }
    })
}

/// Connects to NATS and the database, and checks (or creates) the stream.
async fn start<O: Open>(
    ctx: &O,
    a: &RelayArgs,
    cfg: &RelayConfig,
    opts: &NatsOptions,
) -> anyhow::Result<(Relay<O::Store>, async_nats_config::Config)> {
    let client = opts.connect(Duration::from_secs(10)).await.map_err(|e| {
        CliError::new(crate::cli::exit::UNAVAILABLE, e.to_string())
            .hint(format!("is NATS running at {}?", opts.display_url()))
    })?;
    let store = ctx.migrated(cfg.lanes as u32 + 1).await?;
    let relay = Relay::new(store, client, cfg.clone()).await?;
    let js = relay.jetstream();
    let checked = if a.create_stream {
        let spec = StreamSpec {
            replicas: a.replicas,
            ..StreamSpec::new(a.stream.clone(), a.subjects.clone())
        };
        docket_nats::stream::ensure(js, &spec, a.lease).await
    } else {
        docket_nats::stream::check(js, &a.stream, a.lease).await
    };
    let config = checked.map_err(|e| match e {
        docket_nats::NatsError::Stream { .. } | docket_nats::NatsError::Config(_) => {
            anyhow::Error::from(CliError::invalid(e.to_string()))
        }
        e => e.into(),
    })?;
    Ok((relay, config))
}

/// `docket relay`.
pub async fn relay(ctx: &impl Open, a: RelayArgs) -> anyhow::Result<()> {
    let cfg = RelayConfig {
        batch: a.batch,
        lanes: a.lanes,
        lease: a.lease,
        ack_timeout: (a.lease / 3).min(Duration::from_secs(10)),
        retention: a.retention,
        ..RelayConfig::default()
    };
    cfg.validate()
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let opts = nats_options(&a.nats, "docket relay")?;
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        crate::dashboard::stop_signal().await;
        on_signal.cancel();
    });
    let (relay, config) = loop {
        match start(ctx, &a, &cfg, &opts).await {
            Ok(started) => break started,
            Err(e) if transient(&e) => {
                tracing::warn!(error = %crate::fail::classify(&e).1, "relay cannot start yet; retrying in 1s");
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            Err(e) => return Err(e),
        }
    };
    tracing::info!(stream = %config.name, subjects = ?config.subjects, window = ?config.duplicate_window, "relay publishing");
    if a.drain {
        let marked = relay.drain(&stop).await?;
        relay.upkeep().await?;
        if a.json {
            return output::json(&serde_json::json!({ "published": marked }));
        }
        println!("{marked} messages published to stream {}", config.name);
        return Ok(());
    }
    eprintln!(
        "relaying the outbox to stream {} at {} (Ctrl-C stops)",
        config.name,
        opts.display_url()
    );
    relay.run(stop).await;
    Ok(())
}

/// The relay `docket work --relay-stream STREAM` runs beside its worker: NATS from the
/// environment only (a worker's flags are about jobs), the stream checked, the defaults.
pub async fn relay_service<S: docket_core::Store>(
    store: S,
    stream: &str,
) -> anyhow::Result<Relay<S>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let opts = NatsOptions {
        url: env("DOCKET_NATS_URL").unwrap_or_else(|| "nats://127.0.0.1:4222".into()),
        creds_file: env("DOCKET_NATS_CREDS").map(PathBuf::from),
        token: env("DOCKET_NATS_TOKEN"),
        user_password: env("DOCKET_NATS_USER").zip(env("DOCKET_NATS_PASSWORD")),
        name: Some("docket work relay".into()),
        ..NatsOptions::default()
    };
    let client = opts.connect(Duration::from_secs(10)).await.map_err(|e| {
        CliError::new(crate::cli::exit::UNAVAILABLE, e.to_string())
            .hint(format!("is NATS running at {}?", opts.display_url()))
    })?;
    let cfg = RelayConfig::default();
    let lease = cfg.lease;
    let relay = Relay::new(store, client, cfg).await?;
    docket_nats::stream::check(relay.jetstream(), stream, lease)
        .await
        .map_err(|e| CliError::invalid(e.to_string()))?;
    Ok(relay)
}
