//! The command-line contract. Names, flags, exit codes and JSON fields are stable: scripts
//! depend on them.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit codes (also printed by `docket --help`).
#[allow(dead_code)] // the full table is the documented contract, not all used in code
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// Any other failure.
    pub const FAILURE: i32 = 1;
    /// Bad command line (clap's own code).
    pub const USAGE: i32 = 2;
    /// The database is unreachable (or PostgreSQL binaries are missing for the embedded one).
    pub const UNAVAILABLE: i32 = 3;
    /// No such job.
    pub const NOT_FOUND: i32 = 4;
    /// Invalid input: JSON, names, durations, sizes. Nothing was written.
    pub const INVALID: i32 = 5;
    /// The job's state does not allow the operation, or a unique key is taken.
    pub const CONFLICT: i32 = 6;
}

const AFTER_HELP: &str = "\
Database: --database-url or DATABASE_URL; without either, an embedded local PostgreSQL is
created under .docket/ (or $DOCKET_HOME) from the system's initdb/pg_ctl and reused.

Exit codes: 0 ok · 1 failure · 2 usage · 3 database unavailable · 4 job not found ·
5 invalid input (nothing written) · 6 conflict (wrong state, unique key taken)";

/// `docket --version`: the version and the commit it was built from (see `build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DOCKET_COMMIT"),
    ")"
);

/// Docket: a background-job queue that lives in PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "docket", version = VERSION, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// PostgreSQL URL. Without it (and without DATABASE_URL) the embedded local PostgreSQL
    /// is used.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Schema holding Docket's tables.
    #[arg(long, global = true, env = "DOCKET_SCHEMA", default_value = "docket")]
    pub schema: String,
    /// More log output (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// See Docket work: 10,000 jobs, failures, a worker killed mid-flight, its jobs recovered.
    Demo(DemoArgs),
    /// Apply migrations (idempotent).
    Migrate,
    /// Create and grant the least-privilege roles: application (enqueue only), worker,
    /// read-only operator.
    Grant(GrantArgs),
    /// Enqueue one job, or many from NDJSON with --bulk.
    Enqueue(EnqueueArgs),
    /// Run jobs with a shell command per job.
    Work(WorkArgs),
    /// Inspect and repair jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Pause, resume and limit queues.
    #[command(subcommand)]
    Queues(QueuesCommand),
    /// Concurrency-key limits and blocked ordering keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Periodic (cron) jobs.
    #[command(subcommand)]
    Cron(CronCommand),
    /// Graphs of jobs: a node runs once its parents have succeeded.
    #[command(subcommand)]
    Workflows(WorkflowsCommand),
    /// Sets of jobs whose callbacks run once every member has ended.
    #[command(subcommand)]
    Batches(crate::batches::BatchesCommand),
    /// The transactional outbox: write a message, read what is unpublished or failing.
    #[command(subcommand)]
    Outbox(crate::outbox::OutboxCommand),
    /// Publish the outbox to a NATS JetStream stream (fenced, de-duplicated, in order per
    /// key); --drain exits once nothing is left.
    Relay(crate::outbox::RelayArgs),
    /// Run jobs from a NATS JetStream stream (a queue moved off the database) with one
    /// command per job, as `work --exec` does; --drain exits once nothing is left.
    Consume(crate::consume::ConsumeArgs),
    /// Per-queue counts, ages, stuck leases, and table health.
    Stats(JsonFlag),
    /// Live worker processes: owner, host, queues, slots, jobs held, last report, leader;
    /// with --gone, also those that stopped or stopped reporting within that window.
    Workers(WorkersArgs),
    /// The operators' actions, newest first: the dashboard's and this command's.
    Audit(AuditArgs),
    /// The web dashboard (queues, jobs, dead jobs, workers, cron, audit; live) and /metrics.
    Dashboard(DashboardArgs),
    /// One reaper pass: return expired leases to the queue (or to dead).
    Reap(JsonFlag),
    /// Delete finished jobs past their retention.
    Prune(PruneArgs),
    /// EXPLAIN of the claim statement on the current data.
    Explain(ExplainArgs),
    /// Reproduce the claim experiment: naive vs FOR UPDATE vs SKIP LOCKED.
    Lab(LabArgs),
    /// The embedded local PostgreSQL.
    #[command(subcommand)]
    Embedded(EmbeddedCommand),
    /// Measure Docket against this machine's SQL floor (shared/bench/sql-floor.sh).
    Bench(BenchArgs),
    /// Hidden: a worker process of the benchmark.
    #[command(hide = true, name = "__bench-worker")]
    BenchWorker(BenchWorkerArgs),
    /// Hidden: a worker process of the demo.
    #[command(hide = true, name = "__demo-worker")]
    DemoWorker(DemoWorkerArgs),
}

/// `docket audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// How many entries, 1..=10000.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Address to listen on. Beyond loopback, authentication is required: set
    /// DOCKET_DASHBOARD_TOKEN, or DOCKET_DASHBOARD_USER and DOCKET_DASHBOARD_PASSWORD
    /// (read from the environment, never from the command line, so no secret is in argv).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Hide and refuse every action.
    #[arg(long)]
    pub read_only: bool,
    /// Serve the pages under this path (e.g. /docket behind a reverse proxy).
    #[arg(long, default_value = "")]
    pub base_path: String,
    /// How often open pages refresh when no notification arrives.
    #[arg(long, default_value = "2s")]
    pub refresh: String,
    /// Flag a queue on the queues page when its oldest waiting job (due and not started,
    /// held by a key or not) is older than this.
    #[arg(long, default_value = "5m")]
    pub stuck_after: String,
    /// A host name the dashboard answers to (repeat for more; `loopback` for the loopback
    /// names). Without it: the loopback names when unauthenticated, any when authenticated.
    /// Other names get 421, which stops DNS-rebinding pages.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Mark the login cookie Secure (when a TLS-terminating proxy serves the dashboard).
    #[arg(long)]
    pub secure_cookie: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key; the cookie is Secure).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

/// `docket workers`.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// Also list workers gone within this window (e.g. 1h, at most 7d): stopped cleanly,
    /// or no report since their registration expired (killed, frozen, cut off); and the
    /// leadership lease's holder, live or not.
    #[arg(long, value_name = "WINDOW")]
    pub gone: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of commands whose only option is `--json`.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Jobs to enqueue.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    pub workers: u32,
}

/// A worker process of the demo (started by it).
#[derive(Debug, Args)]
pub struct DemoWorkerArgs {
    /// Run slots.
    #[arg(long)]
    pub concurrency: usize,
    /// The owner name its leases carry.
    #[arg(long)]
    pub owner: String,
}

/// `docket enqueue`.
#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Queue name.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Job kind.
    #[arg(long, required_unless_present = "bulk")]
    pub kind: Option<String>,
    /// Arguments as JSON.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Priority, lower first (-100..=100).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i16,
    /// Run after this delay (e.g. 30s, 5m).
    #[arg(long, conflicts_with = "run_at", allow_hyphen_values = true)]
    pub delay: Option<String>,
    /// Run at this time (RFC 3339).
    #[arg(long)]
    pub run_at: Option<String>,
    /// Claims allowed before the job is dead (1..=1000).
    #[arg(long, default_value_t = docket_core::DEFAULT_MAX_ATTEMPTS, allow_negative_numbers = true)]
    pub max_attempts: i32,
    /// At most one unfinished job per key.
    #[arg(long)]
    pub unique_key: Option<String>,
    /// Metadata as a JSON object.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Run after every earlier unfinished job with this key, one at a time.
    #[arg(long)]
    pub ordering_key: Option<String>,
    /// Count against this key's concurrency and rate limits (e.g. a tenant id).
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// NDJSON file (or - for stdin), one job per line; all or nothing.
    #[arg(long, conflicts_with_all = ["kind", "delay", "run_at", "unique_key", "ordering_key", "concurrency_key"])]
    pub bulk: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket grant`.
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The application role (enqueue only). Defaults to SCHEMA_app.
    #[arg(long)]
    pub app: Option<String>,
    /// The worker role. Defaults to SCHEMA_worker.
    #[arg(long)]
    pub worker: Option<String>,
    /// The read-only operator role. Defaults to SCHEMA_operator.
    #[arg(long)]
    pub operator: Option<String>,
    /// Print the SQL instead of running it.
    #[arg(long)]
    pub print: bool,
}

/// `docket work`.
#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Queues to serve (repeatable).
    #[arg(long = "queue", default_value = "default")]
    pub queues: Vec<String>,
    /// Jobs at once, per queue.
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,
    /// Command run with `sh -c` per job; args JSON on stdin. Exit 0 succeeded, 75 retry,
    /// 65 discard (dead at once), anything else retry with backoff.
    #[arg(long)]
    pub exec: String,
    /// Lease length (heartbeats extend it).
    #[arg(long, default_value = "60s", allow_hyphen_values = true)]
    pub lease: String,
    /// Maximum runtime of one job.
    #[arg(long, default_value = "5m", allow_hyphen_values = true)]
    pub max_runtime: String,
    /// Fallback poll interval (notifications wake workers sooner).
    #[arg(long, default_value = "2s", allow_hyphen_values = true)]
    pub poll: String,
    /// Time between SIGTERM and SIGKILL when a job must stop (at most a quarter of the
    /// lease). Defaults to 2 s, or a tenth of the lease when that is shorter.
    #[arg(long, allow_hyphen_values = true)]
    pub kill_grace: Option<String>,
    /// On SIGTERM, how long running jobs may go on before they are stopped and released to
    /// the queue (a second SIGTERM stops them at once).
    #[arg(long, default_value = "30s", allow_hyphen_values = true)]
    pub shutdown_timeout: String,
    /// Exit 0 once no job in the queues is ready or running.
    #[arg(long)]
    pub drain: bool,
    /// Store the command's stdout as the job's output (`docket jobs output ID`) when it exits
    /// 0: it must be one JSON document within --max-output-bytes, else the job fails (dead at
    /// once, with the reason). Without it stdout goes to the worker's own.
    #[arg(long)]
    pub capture_output: bool,
    /// The largest output kept, in bytes of JSON text (at most 16 MiB).
    #[arg(long, default_value_t = docket_core::output::DEFAULT_MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,
    /// Delete each succeeded job's row as it completes (the library's default,
    /// `WorkerConfig::keep_succeeded = false`). `docket work` keeps them by default, in state
    /// `succeeded` until the pruner's retention, for `docket jobs get`, searches and the
    /// dashboard: its jobs are processes, whose fork and exec cost far more than the row
    /// saves. Failed, dead and cancelled jobs are always kept.
    #[arg(long)]
    pub delete_succeeded: bool,
    /// Do not run the reaper/pruner even if elected leader.
    #[arg(long)]
    pub no_maintenance: bool,
    /// A direct (not pooled) URL for LISTEN when --database-url goes through a
    /// transaction-mode pooler; without one such a worker polls.
    #[arg(long, env = "DOCKET_LISTEN_URL", hide_env_values = true)]
    pub listen_url: Option<String>,
    /// Cap on this worker's database connections (LISTEN included). Defaults to
    /// min(concurrency × queues, 20) + 4.
    #[arg(long)]
    pub max_connections: Option<u32>,
    /// Query the database only when polling (no LISTEN; maintenance only in the poll's
    /// wake-up), so a serverless compute can suspend between polls longer than its idle
    /// time-out. Pair with a long --poll, or use --drain from a scheduler.
    #[arg(long)]
    pub serverless: bool,
    /// Serve Prometheus metrics on http://ADDR/metrics (job counters and histograms of this
    /// worker, and gauges read from the database).
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Also relay the outbox to this JetStream stream, in this process (stopped with the
    /// worker). NATS from DOCKET_NATS_URL (default nats://127.0.0.1:4222), a token from
    /// DOCKET_NATS_TOKEN, a password from DOCKET_NATS_PASSWORD with DOCKET_NATS_USER, a
    /// creds file from DOCKET_NATS_CREDS. The stream must exist (`docket relay
    /// --create-stream` makes one).
    #[arg(long, value_name = "STREAM")]
    pub relay_stream: Option<String>,
}

/// `docket jobs …`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, newest first.
    List(ListArgs),
    /// Show one job with its error history.
    Show(IdArgs),
    /// Replay a dead or cancelled job, keeping its id and history.
    Retry(RetryArgs),
    /// Cancel a pending job, or ask the worker running it to stop.
    Cancel(IdArgs),
    /// Give up on a dead job (it becomes cancelled), releasing its ordering key.
    Skip(IdArgs),
    /// Why a job is not running: every gate that holds it, by the claim's own rules.
    Why(IdArgs),
    /// The output its handler recorded (`ctx.set_output`, or `work --exec --capture-output`).
    Output(OutputArgs),
    /// Send a signal to a job (`ctx.wait_signal`): kept until its wait reads it, waking the
    /// job if it is parked waiting for it; a repeat changes nothing.
    Signal(SignalArgs),
}

/// `docket jobs signal`.
#[derive(Debug, Args)]
pub struct SignalArgs {
    /// The job id.
    pub id: i64,
    /// The signal's name (1 to 128 bytes).
    pub name: String,
    /// Its payload, one JSON document (default null).
    #[arg(long, allow_hyphen_values = true)]
    pub payload: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket jobs output`.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The job id.
    pub id: i64,
    /// Wait up to this long for the job to finish (e.g. 30s); without it, ask once.
    #[arg(long, allow_hyphen_values = true)]
    pub wait: Option<String>,
    /// The job's state, finish time and output as one JSON object (output null while the
    /// job runs), exit 0 whatever the state.
    #[arg(long)]
    pub json: bool,
}

/// `docket queues …`.
#[derive(Debug, Subcommand)]
pub enum QueuesCommand {
    /// Queues with controls: paused, limits, tokens left.
    List(JsonFlag),
    /// Stop every worker claiming from a queue (returns once no claim can take a job).
    Pause(QueueNewArg),
    /// Let workers claim from a paused queue again.
    Resume(QueueArg),
    /// Set a queue's limits; flags not given keep their value, `none` removes one.
    Limit(QueueLimitArgs),
    /// Forget a queue's stored controls (pause, limits) once no job of it waits or runs:
    /// the row a mistyped `pause` left behind.
    Remove(QueueArg),
}

/// A control that may name a queue nobody knows yet.
#[derive(Debug, Args)]
pub struct QueueNewArg {
    /// The queue.
    pub queue: String,
    /// Allow a queue with no pending, running or dead job, no stored controls and no live
    /// worker (to prepare one): without it such a name is refused as a likely typo.
    #[arg(long)]
    pub new: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A command taking one queue.
#[derive(Debug, Args)]
pub struct QueueArg {
    /// The queue.
    pub queue: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket queues limit`.
#[derive(Debug, Args)]
pub struct QueueLimitArgs {
    /// The queue.
    pub queue: String,
    /// Running jobs of the queue across all workers: N or none.
    #[arg(long)]
    pub max_running: Option<String>,
    /// Default cap per concurrency key: N or none.
    #[arg(long)]
    pub key_max_running: Option<String>,
    /// Token bucket, N/DURATION (e.g. 10/1s, 600/1m), or none.
    #[arg(long)]
    pub rate: Option<String>,
    /// Allow a queue nobody knows yet (see `queues pause --new`).
    #[arg(long)]
    pub new: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Concurrency keys with their own limits.
    List(JsonFlag),
    /// Set a concurrency key's limits; flags not given keep their value, `none` removes one.
    Limit(KeyLimitArgs),
    /// Ordering keys held up by a dead job: retry it (`docket jobs retry`) or skip it.
    Blocked(BlockedArgs),
}

/// `docket keys limit`.
#[derive(Debug, Args)]
pub struct KeyLimitArgs {
    /// The concurrency key.
    pub key: String,
    /// Running jobs with this key across all workers and queues: N or none.
    #[arg(long)]
    pub max_running: Option<String>,
    /// Token bucket, N/DURATION, or none.
    #[arg(long)]
    pub rate: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket keys blocked`.
#[derive(Debug, Args)]
pub struct BlockedArgs {
    /// At most this many keys.
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket cron …`.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// Periodic jobs with their next tick.
    List(JsonFlag),
    /// Create or update a periodic job (workers' leader enqueues its ticks).
    Add(CronAddArgs),
    /// Remove a periodic job (jobs already enqueued stay).
    Remove(CronNameArg),
    /// Pause a periodic job: its ticks pass unenqueued until it is resumed (a redeploy of
    /// its definition keeps the pause).
    Pause(CronNameArg),
    /// Resume a paused periodic job; the ticks that passed follow its `missed` policy.
    Resume(CronNameArg),
    /// Enqueue one run of a periodic job now, outside its schedule (which stays as it is).
    Run(CronNameArg),
}

/// `docket workflows …`.
#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// Enqueue a workflow from a JSON file (`-`: standard input), all or nothing: {"name":
    /// …, "nodes": [{"name", "queue", "kind", "args", "after": [names or {"node",
    /// "on_failure": "cancel"|"ignore"|"hold"}]}, …]}. Prints the workflow's id and each
    /// node's job id.
    Enqueue(WorkflowFileArgs),
    /// The parents of a workflow node: name, job, state and output.
    Deps(WorkflowJobArgs),
    /// The newest workflows: state and nodes by state.
    List(WorkflowListArgs),
    /// One workflow: its nodes (state, job, depth) and edges.
    Show(WorkflowIdArgs),
    /// Cancel every unfinished node of a workflow, parents first.
    Cancel(WorkflowIdArgs),
    /// Retry every dead or cancelled node of a workflow, parents first (each waits again for
    /// its parents).
    Retry(WorkflowIdArgs),
    /// Skip a held edge: its parent ended dead or cancelled and the edge (policy `hold`)
    /// still waits; it counts as satisfied now and the child runs when its other parents
    /// allow.
    SkipEdge(WorkflowEdgeArgs),
}

/// `docket workflows skip-edge`.
#[derive(Debug, Args)]
pub struct WorkflowEdgeArgs {
    /// The parent's job id.
    pub parent: i64,
    /// The child's job id.
    pub child: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket workflows list`.
#[derive(Debug, Args)]
pub struct WorkflowListArgs {
    /// How many, 1..=1000.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket workflows show|cancel|retry`.
#[derive(Debug, Args)]
pub struct WorkflowIdArgs {
    /// The workflow's id.
    pub id: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket workflows enqueue`.
#[derive(Debug, Args)]
pub struct WorkflowFileArgs {
    /// The graph's JSON file, or `-` for standard input (at most 16 MiB).
    pub file: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket workflows deps`.
#[derive(Debug, Args)]
pub struct WorkflowJobArgs {
    /// The node's job id.
    pub id: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket cron add`.
#[derive(Debug, Args)]
pub struct CronAddArgs {
    /// Name: the schedule's identity.
    pub name: String,
    /// Cron expression, 5 fields or 6 with seconds first (e.g. "0 9 * * MON-FRI").
    #[arg(long)]
    pub cron: String,
    /// IANA time zone the expression is read in.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// Queue each tick enqueues into.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Kind of the enqueued job.
    #[arg(long)]
    pub kind: String,
    /// Arguments as JSON.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Priority of the enqueued job, lower first (-100..=100).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i16,
    /// Claims each enqueued job may take.
    #[arg(long, default_value_t = docket_core::DEFAULT_MAX_ATTEMPTS, allow_negative_numbers = true)]
    pub max_attempts: i32,
    /// Ticks missed while no worker ran: skip, latest (one job for the newest) or all.
    #[arg(long, default_value = "latest")]
    pub missed: String,
    /// Replace a periodic job of the same name (without it, an existing name is refused).
    #[arg(long)]
    pub replace: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A command taking one periodic job by name.
#[derive(Debug, Args)]
pub struct CronNameArg {
    /// The periodic job's name.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket jobs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// waiting, pending, running, succeeded, dead or cancelled; or retrying (pending after a failed
    /// attempt) or scheduled (pending, not due yet).
    #[arg(long)]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only jobs of this priority.
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<String>,
    /// Created at or after this time (2026-12-01T10:00, UTC, or RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Created before this time.
    #[arg(long)]
    pub until: Option<String>,
    /// Only jobs of this ordering key.
    #[arg(long)]
    pub ordering_key: Option<String>,
    /// Only jobs of this concurrency key.
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// A JSON path into args or metadata equal to a value: `args.user_id = 42`.
    #[arg(long)]
    pub field: Option<String>,
    /// Only jobs whose last error is exactly this message.
    #[arg(long)]
    pub error: Option<String>,
    /// At most this many jobs.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

impl ListArgs {
    /// Whether a filter beyond queue and state is given, or a part of the pending jobs
    /// (retrying, scheduled): then the dashboard's search runs.
    pub fn has_search_filters(&self) -> bool {
        matches!(self.state.as_deref(), Some("retrying" | "scheduled"))
            || [
                &self.kind,
                &self.priority,
                &self.since,
                &self.until,
                &self.ordering_key,
                &self.concurrency_key,
                &self.field,
                &self.error,
            ]
            .iter()
            .any(|v| v.is_some())
    }
}

/// A command taking one job id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The job id.
    pub id: i64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket jobs retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The job id.
    pub id: i64,
    /// Claims allowed from now on.
    #[arg(long, default_value_t = 1)]
    pub extra_attempts: i32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete succeeded and cancelled jobs finished longer ago than this.
    #[arg(long, default_value = "7d", allow_hyphen_values = true)]
    pub older_than: String,
    /// Delete dead jobs finished longer ago than this (kept longer: they are evidence).
    #[arg(long, default_value = "30d", allow_hyphen_values = true)]
    pub dead_older_than: String,
    /// A succeeded job with an output is deleted only once it also finished longer ago
    /// than this (its output stays readable that long).
    #[arg(long, default_value = "24h", allow_hyphen_values = true)]
    pub outputs_older_than: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The queue whose claim to explain.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Run it (in a transaction that is rolled back) and show actual rows.
    #[arg(long)]
    pub analyze: bool,
}

/// How the lab's workers take jobs.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LabModeArg {
    /// Read, then update: two workers may take the same job.
    Naive,
    /// FOR UPDATE: correct, but workers queue behind each other's locks.
    ForUpdate,
    /// FOR UPDATE SKIP LOCKED: correct and concurrent.
    SkipLocked,
}

/// `docket lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// How workers take jobs.
    #[arg(value_enum)]
    pub mode: LabModeArg,
    /// Jobs to run.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: u32,
    /// Worker tasks.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `docket embedded …`.
#[derive(Debug, Subcommand)]
pub enum EmbeddedCommand {
    /// Create (if needed) and start the embedded PostgreSQL.
    Start,
    /// Stop it.
    Stop,
    /// Show where it is and whether it runs.
    Status(JsonFlag),
}

/// `docket bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// drain, concurrency, mixed, handlers, steps, workflows, outbox, jetstream, keep,
    /// enqueue, latency or all (scale, churn and the charts are `docket-bench`'s).
    #[arg(long, default_value = "drain")]
    pub scenario: String,
    /// Jobs for drain and bulk enqueue (default 100,000) and for mixed work (default 20,000,
    /// the size its target is stated for).
    #[arg(long)]
    pub jobs: Option<u64>,
    /// Worker processes for drain.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// Concurrency per worker process.
    #[arg(long, default_value_t = 100)]
    pub concurrency: usize,
    /// Claim batch of the workers.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Producers for single-job enqueue.
    #[arg(long, default_value_t = 4)]
    pub producers: u32,
    /// Samples for the latency scenario.
    #[arg(long, default_value_t = 500)]
    pub samples: usize,
    /// Backlog sizes for the scale scenario.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,100000,1000000,5000000"
    )]
    pub sizes: Vec<u64>,
    /// Finished rows kept during the scale scenario.
    #[arg(long, default_value_t = 10_000_000)]
    pub finished: u64,
    /// Where `docket-bench charts`, `churn` and `concurrency-chart` write their PNGs.
    #[arg(long)]
    pub chart_dir: Option<std::path::PathBuf>,
    /// Length of the churn scenario.
    #[arg(long, default_value = "10m")]
    pub duration: String,
    /// Steady enqueue rate of the churn scenario, jobs/s.
    #[arg(long, default_value_t = 2000)]
    pub rate: u64,
    /// Concurrency scenario: slots of the one worker process.
    #[arg(long, value_delimiter = ',', default_value = "10,50,200")]
    pub levels: Vec<usize>,
    /// Concurrency scenario: jobs per drain.
    #[arg(long, value_delimiter = ',', default_value = "20000,200000")]
    pub counts: Vec<u64>,
    /// Concurrency scenario: drains per configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// synchronous_commit for every connection of the run, Docket's and the floor's (the
    /// targets are stated for the server default, on).
    #[arg(long, default_value = "on")]
    pub synchronous_commit: String,
    /// Path of sql-floor.sh (default: ../shared/bench/sql-floor.sh from here or a parent).
    #[arg(long)]
    pub floor_script: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

impl BenchArgs {
    /// `--jobs`, or the drain and enqueue scenarios' default.
    pub fn jobs(&self) -> u64 {
        self.jobs.unwrap_or(100_000)
    }
}

/// A worker process of the benchmarks (started by them).
#[derive(Debug, Args)]
pub struct BenchWorkerArgs {
    /// Run slots.
    #[arg(long)]
    pub concurrency: usize,
    /// Claim batch size.
    #[arg(long)]
    pub batch: usize,
    /// Connections of its pool.
    #[arg(long)]
    pub connections: u32,
    /// Run maintenance and prune finished jobs after this many seconds (churn scenario).
    #[arg(long)]
    pub retention_s: Option<u64>,
    /// Exit once nothing of the queue is ready or running (the drain scenario).
    #[arg(long)]
    pub drain: bool,
    /// Library defaults (`WorkerConfig::default().queue(q, concurrency)`), nothing tuned:
    /// what a user's one-process worker does.
    #[arg(long)]
    pub defaults: bool,
    /// Each job's handler sleeps this long (mixed work).
    #[arg(long, default_value_t = 0)]
    pub sleep_ms: u64,
    /// Print the handlers' summed run time (ns, as each measured its own sleep), the
    /// process's peak RSS (KiB), the wall-clock instant it started connecting (µs since the
    /// epoch) and the CPU it used (10 ms ticks) on stdout at the end: the mixed scenario's
    /// second ideal, the memory target at W = 200, the drain counted from `Worker::new` and
    /// the worker's CPU a job.
    #[arg(long)]
    pub print_handler_time: bool,
    /// Kind "real": each handler sleeps its args' `ms` (the handlers scenario); succeeded
    /// rows are kept for the scenario to read.
    #[arg(long)]
    pub real_handlers: bool,
    /// Succeeded jobs are kept (`WorkerConfig::keep_succeeded(true)`: the keep scenario).
    #[arg(long)]
    pub keep_succeeded: bool,
    /// Each no-op job runs this many memoized steps (`ctx.step`), each recording a small
    /// value (the steps scenario).
    #[arg(long, default_value_t = 0)]
    pub steps: u32,
    /// Each no-op job records an output of this many bytes (`ctx.set_output`: the steps
    /// scenario's large-output case).
    #[arg(long, default_value_t = 0)]
    pub output_bytes: usize,
}
