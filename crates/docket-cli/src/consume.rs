//! `docket consume`: a worker on a JetStream durable consumer — the queue moved off the
//! database — running one `--exec` command per job, as `docket work --exec` does
//! (docs/jetstream-source.md).

use std::time::Duration;

use clap::Args;
use docket_nats::{Source, SourceConfig, StreamSpec};
use docket_worker::Registry;
use tokio_util::sync::CancellationToken;

use crate::exec::{exec_job, ExecSpec};
use crate::fail::CliError;
use crate::outbox::{nats_options, NatsArgs};
use crate::output;

/// `docket consume`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The stream the jobs are in.
    #[arg(long)]
    pub stream: String,
    /// The durable consumer; every worker of the queue names the same one.
    #[arg(long, default_value = "docket")]
    pub consumer: String,
    /// Only jobs on subjects matching this filter (e.g. 'jobs.email').
    #[arg(long)]
    pub filter: Option<String>,
    /// Create the job stream (capturing --subjects) and a dead-letter stream
    /// (`<STREAM>_DEAD`, capturing the dead-letter subject) when missing.
    #[arg(long)]
    pub create_streams: bool,
    /// The subjects a created job stream captures (repeatable, e.g. 'jobs.>').
    #[arg(long = "subjects", value_delimiter = ',')]
    pub subjects: Vec<String>,
    /// Replicas of created streams (3 on a cluster).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Where a dead job's copy goes [default: docket.dead.<STREAM>]. Another stream than the
    /// job stream must capture it.
    #[arg(long)]
    pub dead_letter: Option<String>,
    /// Jobs at once in this process.
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,
    /// The lease: how long a delivery is held without an in-progress ack (the consumer's
    /// ack wait; every worker of the consumer must agree).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// Runs a job may have (the consumer's max_deliver is one more).
    #[arg(long, default_value_t = docket_core::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: i32,
    /// Command run with `sh -c` per job; args JSON on stdin. Exit 0 succeeded, 75 retry, 65
    /// discard (dead at once), anything else retry with backoff.
    #[arg(long)]
    pub exec: String,
    /// SIGTERM to SIGKILL for a command told to stop.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub kill_grace: Duration,
    /// The longest one run may take.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub max_runtime: Duration,
    /// At shutdown, how long running jobs may take before they are stopped and handed back.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Retry delay: base × 2^(attempt−1), ±25 %, at most --backoff-cap.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub backoff_base: Duration,
    /// The longest retry delay.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub backoff_cap: Duration,
    /// Serve Prometheus metrics on http://ADDR/metrics (this process's counters:
    /// `docket_jetstream_jobs_total`); beyond loopback only with DOCKET_METRICS_TOKEN.
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Exit once the consumer has nothing left (nothing waiting, delivered or running).
    #[arg(long)]
    pub drain: bool,
    /// Print JSON (the final report).
    #[arg(long)]
    pub json: bool,
}

/// Runs `docket consume`.
pub async fn run(a: ConsumeArgs) -> anyhow::Result<()> {
    if a.kill_grace > Duration::from_secs(3600) {
        return Err(CliError::invalid("--kill-grace must be at most 1h").into());
    }
    let cfg = SourceConfig {
        filter_subject: a.filter.clone(),
        slots: a.concurrency,
        ack_wait: a.lease,
        max_attempts: a.max_attempts,
        backoff_base: a.backoff_base,
        backoff_cap: a.backoff_cap,
        dead_letter: a
            .dead_letter
            .clone()
            .unwrap_or_else(|| format!("docket.dead.{}", a.stream)),
        max_runtime: a.max_runtime,
        // Longer than the command's own stop (grace, then SIGKILL and up to 5 s for its
        // group to go), as `docket work` does.
        cancel_grace: a.kill_grace + Duration::from_secs(6),
        shutdown_timeout: a.shutdown_timeout,
        ..SourceConfig::new(&a.stream, &a.consumer)
    };
    cfg.validate()
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let opts = nats_options(&a.nats, "docket consume")?;
    let client = opts.connect(Duration::from_secs(10)).await.map_err(|e| {
        CliError::new(crate::cli::exit::UNAVAILABLE, e.to_string())
            .hint(format!("is NATS running at {}?", opts.display_url()))
    })?;
    if a.create_streams {
        let js = docket_nats::async_nats::jetstream::new(client.clone());
        let window = docket_nats::stream::DEFAULT_WINDOW;
        let jobs = StreamSpec {
            replicas: a.replicas,
            ..StreamSpec::new(a.stream.clone(), a.subjects.clone())
        };
        let dead = StreamSpec {
            replicas: a.replicas,
            ..StreamSpec::new(format!("{}_DEAD", a.stream), vec![cfg.dead_letter.clone()])
        };
        for spec in [jobs, dead] {
            docket_nats::stream::ensure(&js, &spec, window / 10)
                .await
                .map_err(|e| CliError::invalid(e.to_string()))?;
        }
    }
    let secrets: Vec<String> = [
        std::env::var("DOCKET_NATS_TOKEN").ok(),
        std::env::var("DOCKET_NATS_PASSWORD").ok(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(addr) = &a.metrics_listen {
        // Before the source: its counters are registered with the recorder installed here.
        crate::dashboard::serve_process_metrics(addr).await?;
    }
    let spec = ExecSpec::new(a.exec.clone(), a.kill_grace, &secrets);
    let mut registry = Registry::<()>::default();
    registry.fallback(move |args, jctx| exec_job(spec.clone(), args, jctx));
    let source = Source::new(client, registry, cfg)
        .await
        .map_err(|e| match e {
            docket_nats::NatsError::Stream { .. } | docket_nats::NatsError::Config(_) => {
                anyhow::Error::from(CliError::invalid(e.to_string()))
            }
            e => e.into(),
        })?;
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        crate::dashboard::stop_signal().await;
        on_signal.cancel();
    });
    eprintln!(
        "docket: consuming stream {} (consumer {}) at {}",
        a.stream,
        a.consumer,
        opts.display_url()
    );
    let report = if a.drain {
        source.drain(stop).await?
    } else {
        source.run(stop).await?
    };
    if a.json {
        return output::json(&serde_json::json!({
            "delivered": report.delivered,
            "succeeded": report.succeeded,
            "retried": report.retried,
            "dead": report.dead,
            "snoozed": report.snoozed,
            "released": report.released,
            "lost": report.lost,
        }));
    }
    eprintln!(
        "docket: consumer stopped: {} succeeded, {} retried, {} dead, {} released, {} lost",
        report.succeeded, report.retried, report.dead, report.released, report.lost
    );
    Ok(())
}
