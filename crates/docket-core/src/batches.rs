//! Batches: a set of jobs, added to until the batch is closed, whose callback jobs are
//! enqueued once every member has ended — `on_complete` whatever the members' ends,
//! `on_success` when every member succeeded, `on_failure` when one ended dead or cancelled —
//! each at most once, with the counts (Sidekiq Pro's, Solid Queue's and Oban Pro's batches).
//!
//! A batch is stored as a workflow without edges: its members are nodes named `#1`, `#2`, …
//! in the order they were added, so they are claimed, fenced, reaped, cancelled, retried,
//! shown and pruned exactly as nodes are. The counters and the callbacks live on the
//! workflow's row; the rule that keeps them is in each engine's one place (PostgreSQL: the
//! trigger `jobs_batch_tally` and `batch_settle()`, migration 0031; SQLite and MariaDB:
//! `docket-local`'s `batches` module), run in the transaction that moves a member into or
//! out of an end state, under the batch row's lock — which is what makes each callback once.

use serde::{Deserialize, Serialize};

use crate::{validate, JobId, Limits, NewJob, Schedule, ValidationError};

/// The metadata key a callback job carries its [`BatchResult`] under.
pub const RESULT_KEY: &str = "docket:batch";

/// Members a batch may hold, over every addition: a batch's counters are exact, but its
/// workflow page and its nodes are read whole, so they are bounded like a graph's.
pub const MAX_MEMBERS: usize = 100_000;

/// A callback's occasion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Callback {
    /// Every member ended, whatever its end (fires at the first such moment after close).
    OnComplete,
    /// Every member ended and none of them dead or cancelled (perhaps only after an
    /// operator retried the failures).
    OnSuccess,
    /// Every member ended and one or more ended dead or cancelled.
    OnFailure,
}

impl Callback {
    /// All three, in the order they are enqueued when more than one fires at once.
    pub const ALL: [Callback; 3] = [
        Callback::OnComplete,
        Callback::OnFailure,
        Callback::OnSuccess,
    ];

    /// The name in JSON, SQL and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Callback::OnComplete => "on_complete",
            Callback::OnSuccess => "on_success",
            Callback::OnFailure => "on_failure",
        }
    }

    /// Whether this callback is due for a settled batch with `failed` members dead or
    /// cancelled.
    pub fn applies(self, failed: i64) -> bool {
        match self {
            Callback::OnComplete => true,
            Callback::OnSuccess => failed == 0,
            Callback::OnFailure => failed > 0,
        }
    }
}

impl std::fmt::Display for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn default_queue() -> String {
    "default".into()
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn default_attempts() -> i32 {
    crate::DEFAULT_MAX_ATTEMPTS
}

fn yes() -> bool {
    true
}

/// A job as a batch's JSON spells it (a member or a callback): a workflow node's fields
/// without its name and parents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Queue (default `default`).
    #[serde(default = "default_queue")]
    pub queue: String,
    /// Handler kind.
    pub kind: String,
    /// Handler arguments.
    #[serde(default = "empty_object")]
    pub args: serde_json::Value,
    /// Metadata (a JSON object).
    #[serde(default = "empty_object")]
    pub metadata: serde_json::Value,
    /// Priority (lower first).
    #[serde(default)]
    pub priority: i16,
    /// Claims allowed.
    #[serde(default = "default_attempts")]
    pub max_attempts: i32,
    /// Retry backoff's first delay (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_base_ms: Option<i64>,
    /// Retry backoff's cap (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_cap_ms: Option<i64>,
}

impl JobSpec {
    /// The spec of `job`, or the first option a batch's job cannot carry: a unique key (a
    /// duplicate would hand back a job outside the batch), ordering or concurrency keys or a
    /// schedule (not supported in workflow nodes either).
    pub fn of(job: &NewJob) -> Result<JobSpec, &'static str> {
        match unsupported(job) {
            Some(what) => Err(what),
            None => Ok(JobSpec::fields_of(job)),
        }
    }

    /// The fields of `job` a spec carries, whatever else it has (see [`unsupported`]).
    pub fn fields_of(job: &NewJob) -> JobSpec {
        let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        JobSpec {
            queue: job.queue.clone(),
            kind: job.kind.clone(),
            args: job.args.clone(),
            metadata: job.metadata.clone(),
            priority: job.priority,
            max_attempts: job.max_attempts,
            backoff_base_ms: job.backoff.map(|b| ms(b.base)),
            backoff_cap_ms: job.backoff.map(|b| ms(b.cap)),
        }
    }

    /// The job this spec enqueues.
    pub fn job(&self) -> NewJob {
        let mut j = NewJob::new(self.queue.clone(), self.kind.clone(), self.args.clone());
        j.metadata = self.metadata.clone();
        j.priority = self.priority;
        j.max_attempts = self.max_attempts;
        if self.backoff_base_ms.is_some() || self.backoff_cap_ms.is_some() {
            let d = crate::Backoff::default();
            let ms = |v: Option<i64>, or: std::time::Duration| {
                v.map(|v| std::time::Duration::from_millis(v.max(0) as u64))
                    .unwrap_or(or)
            };
            j.backoff = Some(crate::Backoff {
                base: ms(self.backoff_base_ms, d.base),
                cap: ms(self.backoff_cap_ms, d.cap),
            });
        }
        j
    }

    /// Checks the job as an enqueue would, and that its metadata leaves Docket's keys alone.
    pub fn check(&self, limits: &Limits) -> Result<(), ValidationError> {
        validate::new_job(&self.job(), limits)?;
        for key in [crate::workflow::MARKER, RESULT_KEY] {
            if self.metadata.get(key).is_some() {
                return Err(ValidationError::Other {
                    what: "metadata",
                    reason: format!("the key {key} is Docket's own"),
                });
            }
        }
        Ok(())
    }
}

/// The first option of `job` a spec cannot carry (a batch's job, a workflow node): a
/// unique key, an ordering or concurrency key, a schedule.
pub fn unsupported(job: &NewJob) -> Option<&'static str> {
    [
        (job.unique_key.is_some(), "a unique key"),
        (job.ordering_key.is_some(), "an ordering key"),
        (job.concurrency_key.is_some(), "a concurrency key"),
        (
            job.schedule != Schedule::Now,
            "a schedule (run_at or delay)",
        ),
    ]
    .into_iter()
    .find(|(yes, _)| *yes)
    .map(|(_, what)| what)
}

/// A batch as a file spells it (the CLI's `docket batches open FILE.json`, what the library
/// sends PostgreSQL's `batch_open()`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    /// The batch's name (1–128 bytes; names a kind of batch, not unique).
    pub name: String,
    /// Members enqueued with the batch.
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
    /// Enqueued once, when every member succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<JobSpec>,
    /// Enqueued once, when every member ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<JobSpec>,
    /// Enqueued once, when every member ended and one failed (dead or cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<JobSpec>,
    /// Closed at once (the default): nothing can be added and the callbacks fire when the
    /// members have ended. `false` keeps it open for [`crate::Store::add_to_batch`] until
    /// [`crate::Store::close_batch`].
    #[serde(default = "yes")]
    pub close: bool,
}

impl BatchSpec {
    /// Reads the CLI's JSON file, naming what is wrong.
    pub fn from_json(text: &str) -> Result<BatchSpec, ValidationError> {
        serde_json::from_str(text).map_err(|e| ValidationError::Other {
            what: "batch file",
            reason: e.to_string(),
        })
    }

    /// The callbacks defined, by occasion.
    pub fn callbacks(&self) -> Vec<(Callback, &JobSpec)> {
        [
            (Callback::OnComplete, &self.on_complete),
            (Callback::OnFailure, &self.on_failure),
            (Callback::OnSuccess, &self.on_success),
        ]
        .into_iter()
        .filter_map(|(c, j)| j.as_ref().map(|j| (c, j)))
        .collect()
    }

    /// The callbacks as stored: `{"on_success": job, …}`.
    pub fn callbacks_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (c, j) in self.callbacks() {
            m.insert(
                c.as_str().into(),
                serde_json::to_value(j).unwrap_or_default(),
            );
        }
        serde_json::Value::Object(m)
    }

    /// Checks the whole batch: nothing is written unless this passes.
    pub fn validate(&self, limits: &Limits) -> Result<(), BatchError> {
        check_name(&self.name)?;
        check_members(0, self.jobs.len())?;
        for (i, j) in self.jobs.iter().enumerate() {
            j.check(limits).map_err(|e| BatchError::Job {
                what: format!("job #{i}"),
                error: Box::new(e),
            })?;
        }
        for (c, j) in self.callbacks() {
            j.check(limits).map_err(|e| BatchError::Job {
                what: c.as_str().into(),
                error: Box::new(e),
            })?;
        }
        Ok(())
    }
}

/// Checks a batch's name.
pub fn check_name(name: &str) -> Result<(), BatchError> {
    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(BatchError::Name(validate::visible(name)));
    }
    Ok(())
}

/// Checks that `adding` members fit beside `has`.
pub fn check_members(has: i64, adding: usize) -> Result<(), BatchError> {
    let total = usize::try_from(has.max(0))
        .unwrap_or(usize::MAX)
        .saturating_add(adding);
    if total > MAX_MEMBERS {
        return Err(BatchError::TooMany(total));
    }
    Ok(())
}

/// Checks members to add.
pub fn check_jobs(jobs: &[JobSpec], limits: &Limits) -> Result<(), BatchError> {
    check_members(0, jobs.len())?;
    for (i, j) in jobs.iter().enumerate() {
        j.check(limits).map_err(|e| BatchError::Job {
            what: format!("job #{i}"),
            error: Box::new(e),
        })?;
    }
    Ok(())
}

/// A batch built in code: `Batch::new("import").job(a).job(b).on_success(done)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    spec: BatchSpec,
    unsupported: Option<(String, &'static str)>,
}

impl Batch {
    /// An empty batch named `name`, closed when enqueued unless [`Batch::open`] is called.
    pub fn new(name: impl Into<String>) -> Self {
        Batch {
            spec: BatchSpec {
                name: name.into(),
                jobs: Vec::new(),
                on_success: None,
                on_complete: None,
                on_failure: None,
                close: true,
            },
            unsupported: None,
        }
    }

    fn spec_of(&mut self, what: String, job: &NewJob) -> Option<JobSpec> {
        match JobSpec::of(job) {
            Ok(s) => Some(s),
            Err(reason) => {
                self.unsupported.get_or_insert((what, reason));
                None
            }
        }
    }

    /// A member.
    pub fn job(mut self, job: NewJob) -> Self {
        let what = format!("job #{}", self.spec.jobs.len());
        if let Some(s) = self.spec_of(what, &job) {
            self.spec.jobs.push(s);
        }
        self
    }

    /// The job enqueued once every member succeeded.
    pub fn on_success(mut self, job: NewJob) -> Self {
        self.spec.on_success = self.spec_of("on_success".into(), &job);
        self
    }

    /// The job enqueued once every member ended.
    pub fn on_complete(mut self, job: NewJob) -> Self {
        self.spec.on_complete = self.spec_of("on_complete".into(), &job);
        self
    }

    /// The job enqueued once every member ended and one failed.
    pub fn on_failure(mut self, job: NewJob) -> Self {
        self.spec.on_failure = self.spec_of("on_failure".into(), &job);
        self
    }

    /// Keeps the batch open after enqueue: members may be added until it is closed.
    pub fn open(mut self) -> Self {
        self.spec.close = false;
        self
    }

    /// The spec, checked: what is enqueued.
    pub fn spec(&self, limits: &Limits) -> Result<&BatchSpec, BatchError> {
        if let Some((what, reason)) = &self.unsupported {
            return Err(BatchError::Unsupported {
                what: what.clone(),
                option: reason,
            });
        }
        self.spec.validate(limits)?;
        Ok(&self.spec)
    }
}

/// Converts jobs to add to an open batch, refusing options a member cannot carry.
pub fn specs_of(jobs: &[NewJob]) -> Result<Vec<JobSpec>, BatchError> {
    jobs.iter()
        .enumerate()
        .map(|(i, j)| {
            JobSpec::of(j).map_err(|option| BatchError::Unsupported {
                what: format!("job #{i}"),
                option,
            })
        })
        .collect()
}

/// A batch refused or an operation it cannot take; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The batch's name is empty, too long or holds a control character.
    #[error("invalid batch name {0:?}: use 1-128 bytes without control characters")]
    Name(String),
    /// Over [`MAX_MEMBERS`].
    #[error("{0} members, over the limit of {MAX_MEMBERS} per batch")]
    TooMany(usize),
    /// A member or a callback is invalid.
    #[error("{what}: {error}")]
    Job {
        /// Which job (`job #3`, `on_success`).
        what: String,
        /// What is wrong with it.
        error: Box<ValidationError>,
    },
    /// A job carries an option a batch's job does not support.
    #[error("{what}: {option} is not supported in a batch")]
    Unsupported {
        /// Which job.
        what: String,
        /// The option.
        option: &'static str,
    },
    /// The batch was closed: nothing can be added.
    #[error("batch {0} is closed: nothing can be added to it")]
    Closed(i64),
    /// The id names a workflow that is not a batch.
    #[error("workflow {0} is not a batch")]
    NotABatch(i64),
}

/// An enqueued batch: its id (also its workflow's) and its members' jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchOpened {
    /// The batch's id.
    pub id: i64,
    /// The members enqueued with it, in order.
    pub jobs: Vec<JobId>,
}

/// What a callback job is told (its metadata under [`RESULT_KEY`]; `ctx.batch()` in a
/// handler, `DOCKET_BATCH` for a `docket work --exec` command).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResult {
    /// The batch's id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Why this callback fired.
    pub callback: Callback,
    /// Members.
    pub total: i64,
    /// Members that succeeded.
    pub succeeded: i64,
    /// Members that ended dead.
    pub dead: i64,
    /// Members that ended cancelled.
    pub cancelled: i64,
}

impl BatchResult {
    /// The result a job's metadata carries, if it is a batch's callback.
    pub fn of(metadata: &serde_json::Value) -> Option<BatchResult> {
        serde_json::from_value(metadata.get(RESULT_KEY)?.clone()).ok()
    }
}

/// A batch as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchStatus {
    /// Its id (its workflow's).
    pub id: i64,
    /// Its name.
    pub name: String,
    /// When it was opened.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was closed (`None`: open, members may still be added).
    pub closed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When every member had last ended after close (`None` while one is unfinished).
    pub ended_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Members added.
    pub total: i64,
    /// Members not ended (waiting, pending or running).
    pub unfinished: i64,
    /// Members that succeeded.
    pub succeeded: i64,
    /// Members dead.
    pub dead: i64,
    /// Members cancelled.
    pub cancelled: i64,
    /// The callbacks defined, each with its job once it fired.
    pub callbacks: Vec<(Callback, Option<JobId>)>,
}

impl BatchStatus {
    /// Where it stands: `open`, `running`, `succeeded` or `failed`.
    pub fn state(&self) -> &'static str {
        if self.closed_at.is_none() {
            "open"
        } else if self.unfinished > 0 {
            "running"
        } else if self.dead + self.cancelled > 0 {
            "failed"
        } else {
            "succeeded"
        }
    }

    /// The members by end, as people read them: "3 succeeded, 1 dead, 2 unfinished".
    pub fn counts_text(&self) -> String {
        let parts = [
            (self.succeeded, "succeeded"),
            (self.dead, "dead"),
            (self.cancelled, "cancelled"),
            (self.unfinished, "unfinished"),
        ];
        let text: Vec<String> = parts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, s)| format!("{n} {s}"))
            .collect();
        if text.is_empty() {
            "no members".into()
        } else {
            text.join(", ")
        }
    }

    /// The callback jobs' result as it is written into their metadata.
    pub fn result(&self, callback: Callback) -> BatchResult {
        BatchResult {
            id: self.id,
            name: self.name.clone(),
            callback,
            total: self.total,
            succeeded: self.succeeded,
            dead: self.dead,
            cancelled: self.cancelled,
        }
    }
}

/// The marker a member's metadata carries beside the workflow's: it may not spawn (a
/// spawned node would not be counted).
pub const MEMBER_KEY: &str = "batch";

/// The metadata of member `index` (1-based) of batch `id`: its own plus the node marker.
pub fn member_metadata(spec: &JobSpec, id: i64, index: i64) -> serde_json::Value {
    let mut m = match &spec.metadata {
        serde_json::Value::Object(o) => o.clone(),
        _ => Default::default(),
    };
    m.insert(
        crate::workflow::MARKER.to_owned(),
        serde_json::json!({"id": id, "node": member_name(index), MEMBER_KEY: true}),
    );
    serde_json::Value::Object(m)
}

/// Member `index`'s node name (1-based): `#1`, `#2`, …
pub fn member_name(index: i64) -> String {
    format!("#{index}")
}

/// Whether a claimed job's metadata marks it a batch's member.
pub fn is_member(metadata: &serde_json::Value) -> bool {
    metadata
        .get(crate::workflow::MARKER)
        .and_then(|m| m.get(MEMBER_KEY))
        .and_then(serde_json::Value::as_bool)
        == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_file_shape_round_trips_and_refuses_unknown_fields() {
        let b = BatchSpec::from_json(
            r#"{"name":"import","jobs":[{"kind":"row","args":{"n":1}}],"on_success":{"queue":"mail","kind":"done"}}"#,
        )
        .unwrap();
        assert!(b.close);
        assert_eq!(b.jobs[0].queue, "default");
        assert_eq!(
            b.callbacks_json(),
            json!({"on_success": {"queue": "mail", "kind": "done", "args": {}, "metadata": {}, "priority": 0, "max_attempts": 25}})
        );
        assert!(BatchSpec::from_json(r#"{"name":"x","jobz":[]}"#).is_err());
        assert!(
            BatchSpec::from_json(r#"{"name":"x","jobs":[{"kind":"k","after":["a"]}]}"#).is_err()
        );
    }

    #[test]
    fn bad_batches_are_refused_naming_the_job() {
        let limits = Limits::default();
        let ok = |k: &str| NewJob::new("q", k, json!({}));
        assert!(matches!(
            Batch::new("").spec(&limits),
            Err(BatchError::Name(_))
        ));
        let e = Batch::new("b")
            .job(ok("a"))
            .job(ok("bad kind!"))
            .spec(&limits)
            .unwrap_err();
        assert!(e.to_string().starts_with("job #1:"), "{e}");
        let e = Batch::new("b")
            .on_failure(ok("a").unique_key("u"))
            .spec(&limits)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "on_failure: a unique key is not supported in a batch"
        );
        let mut j = ok("a");
        j.metadata = json!({"docket:batch": 1});
        let e = Batch::new("b").on_complete(j).spec(&limits).unwrap_err();
        assert!(e.to_string().contains("docket:batch"), "{e}");
        assert!(matches!(
            check_members(MAX_MEMBERS as i64, 1),
            Err(BatchError::TooMany(_))
        ));
        assert!(check_members(MAX_MEMBERS as i64 - 1, 1).is_ok());
    }

    #[test]
    fn callbacks_apply_by_outcome_and_results_round_trip() {
        assert!(Callback::OnComplete.applies(0) && Callback::OnComplete.applies(2));
        assert!(Callback::OnSuccess.applies(0) && !Callback::OnSuccess.applies(1));
        assert!(!Callback::OnFailure.applies(0) && Callback::OnFailure.applies(1));
        let r = BatchResult {
            id: 7,
            name: "n".into(),
            callback: Callback::OnFailure,
            total: 3,
            succeeded: 2,
            dead: 1,
            cancelled: 0,
        };
        let meta = json!({RESULT_KEY: r});
        assert_eq!(BatchResult::of(&meta), Some(r));
        let m = member_metadata(
            &JobSpec::of(&NewJob::new("q", "k", json!({}))).unwrap(),
            4,
            2,
        );
        assert!(is_member(&m));
        assert_eq!(crate::workflow::marker(&m), Some((4, "#2")));
        assert!(!is_member(
            &json!({"docket:workflow": {"id": 1, "node": "a"}})
        ));
    }
}
