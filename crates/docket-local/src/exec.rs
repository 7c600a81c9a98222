//! The one thing the rules ask of an engine's connection: run a named statement with
//! positional arguments, and give rows back as plain values.
//!
//! Why values and not sqlx's own types: the rules are written once for two drivers whose
//! sqlx types differ (and whose generic bounds make shared code unreadable); a job row is a
//! few dozen values, copied once, next to a round trip to the database. Written by hand
//! because no crate offers a driver-neutral row (sqlx's `Any` driver cannot hand back the
//! SQLite connection the commit hooks need).
//!
//! A statement is named by its file (`queue_pause` for `sql/queue_pause.sql`); each engine
//! keeps its own text. Arguments are positional in the order the rules list them; an
//! engine's SQL refers to them as `?1`, `?2`, … (or plain `?` when it uses each once, in
//! order), so one argument list serves both dialects whatever order and repetition each
//! needs. A list argument ([`Arg::Ints`], [`Arg::Texts`]) is one JSON array on SQLite and
//! expands to one placeholder per element on MariaDB.

use std::future::Future;
use std::sync::Arc;

use docket_core::{Result, StoreError};

/// One bound value.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Text(&'a str),
    /// A list of ids (see the module docs).
    Ints(&'a [i64]),
    /// A list of names or keys (see the module docs).
    Texts(&'a [String]),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<i32> for Arg<'_> {
    fn from(v: i32) -> Self {
        Arg::Int(v.into())
    }
}
impl From<i16> for Arg<'_> {
    fn from(v: i16) -> Self {
        Arg::Int(v.into())
    }
}
impl From<u32> for Arg<'_> {
    fn from(v: u32) -> Self {
        Arg::Int(v.into())
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Int(v.into())
    }
}
impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Float(v)
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<&'a [i64]> for Arg<'a> {
    fn from(v: &'a [i64]) -> Self {
        Arg::Ints(v)
    }
}
impl<'a> From<&'a [String]> for Arg<'a> {
    fn from(v: &'a [String]) -> Self {
        Arg::Texts(v)
    }
}
impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Arg::Null, Into::into)
    }
}
impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().map_or(Arg::Null, Arg::Text)
    }
}

/// `args![a, b, c]`: the arguments of one statement, in the rules' order.
#[macro_export]
macro_rules! args {
    ($($v:expr),* $(,)?) => { &[$($crate::exec::Arg::from($v)),*][..] };
}

/// One column's value as the database returned it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Text(String),
}

/// One row: its columns' names (shared by the rows of one result) and values.
#[derive(Debug, Clone)]
pub struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    /// A row of `values` under `names` (same length).
    pub fn new(names: Arc<[String]>, values: Vec<Value>) -> Self {
        Row { names, values }
    }

    fn value(&self, col: &str) -> Result<&Value> {
        self.names
            .iter()
            .position(|n| n == col)
            .map(|i| &self.values[i])
            .ok_or_else(|| corrupt(format!("no column {col:?} in the row")))
    }

    /// Column `col` as `T`; a missing column or a value of another type is an error that
    /// names the column.
    pub fn get<T: FromValue>(&self, col: &str) -> Result<T> {
        T::from_value(self.value(col)?).map_err(|e| corrupt(format!("{col}: {e}")))
    }

    /// Column `col` as `T`, `None` when the row has no such column (a column only some
    /// statements select).
    pub fn get_if<T: FromValue>(&self, col: &str) -> Result<Option<T>> {
        if self.names.iter().any(|n| n == col) {
            self.get(col).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The first column as `T` (a scalar query).
    pub fn first<T: FromValue>(&self) -> Result<T> {
        let v = self.values.first().ok_or_else(|| corrupt("an empty row"))?;
        T::from_value(v).map_err(|e| corrupt(format!("{}: {e}", self.names[0])))
    }
}

/// Types a column decodes into.
pub trait FromValue: Sized {
    /// Decodes `v`, or says why it cannot.
    fn from_value(v: &Value) -> std::result::Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(*f as i64),
            Value::Text(t) => t.parse().map_err(|_| format!("{t:?} is not an integer")),
            other => Err(format!("expected an integer, found {other:?}")),
        }
    }
}
impl FromValue for i32 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        let i = i64::from_value(v)?;
        i32::try_from(i).map_err(|_| format!("{i} is out of range"))
    }
}
impl FromValue for i16 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        let i = i64::from_value(v)?;
        i16::try_from(i).map_err(|_| format!("{i} is out of range"))
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        Ok(i64::from_value(v)? != 0)
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i as f64),
            Value::Float(f) => Ok(*f),
            Value::Text(t) => t.parse().map_err(|_| format!("{t:?} is not a number")),
            Value::Null => Err("expected a number, found NULL".into()),
        }
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Text(t) => Ok(t.clone()),
            other => Err(format!("expected text, found {other:?}")),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// What an insert that may meet a unique key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// The new row's id.
    Id(i64),
    /// A unique index refused the row (only this statement was undone).
    Duplicate,
}

/// A connection (or a pool, or a transaction) an engine runs the rules' statements on.
pub trait Conn: Send {
    /// Runs statement `name`; the rows it changed.
    fn execute(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Runs statement `name`; the rows it returned.
    fn fetch_all(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Row>>> + Send;

    /// Runs insert `name`; the new row's id, or that a unique index refused it.
    fn insert(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Inserted>> + Send;

    /// The first row `name` returns, if any.
    fn fetch_optional(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Option<Row>>> + Send {
        async move { Ok(self.fetch_all(name, args).await?.into_iter().next()) }
    }

    /// The first row `name` returns; none is an error.
    fn fetch_one(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Row>> + Send {
        async move {
            self.fetch_optional(name, args)
                .await?
                .ok_or_else(|| corrupt(format!("{name} returned no row")))
        }
    }

    /// The first column of the first row `name` returns.
    fn scalar<T: FromValue + Send>(
        &mut self,
        name: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<T>> + Send {
        async move { self.fetch_one(name, args).await?.first() }
    }
}

/// A value the store wrote itself but cannot read back (a hand-edited row).
pub fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Database(what.into().into())
}

/// Statement `name`'s text from an engine's table, or an error naming it.
pub fn text_of(
    table: fn(&str) -> Option<&'static str>,
    name: &'static str,
) -> Result<&'static str> {
    table(name).ok_or_else(|| corrupt(format!("this engine has no statement {name:?}")))
}

/// `statements!("extra", …)`: the engine's `sql(name)` table — every statement the rules
/// run (listed here, once) and the engine's own extras — each embedded from the engine
/// crate's `sql/NAME.sql`. An engine missing a file the rules need does not compile.
#[macro_export]
macro_rules! statements {
    ($($extra:literal),* $(,)?) => {
        $crate::statements!(@table
            "active_count", "any_active", "audit_insert", "audit_list", "blocked_keys",
            "candidates_past_held",
            "cancel", "complete_output", "dead_groups", "depth_fresh", "depth_insert",
            "depth_list", "depth_now", "depth_prev", "depth_prune", "depth_top", "enqueue_insert", "errored_jobs", "fenced_row", "finish_attempt", "get",
            "job_state", "key_limit", "key_limit_delete", "key_limit_set", "key_limits_list",
            "key_running", "key_tokens_spend", "leader_get", "leader_insert",
            "leader_resign", "leader_update", "lease_status", "list", "now",
            "ordering_behind", "output", "overview", "park", "progress", "periodic_advance", "periodic_due",
            "periodic_list", "periodic_pause", "periodic_remove", "periodic_upsert", "prune", "queue_control",
            "queue_health", "queue_limits", "queue_pause", "queue_remove", "queue_resume", "queue_tokens_spend",
            "queues_list", "reap_expired", "retry", "run_now", "running_in_queue",
            "samples_forget", "samples_list", "samples_record", "sample_buckets_forget",
            "sample_buckets_list", "sample_buckets_record", "search", "search_finished",
            "search_window", "search_window_scan", "signal_get", "signal_insert", "signal_wake",
            "signals_prune", "skip", "stats_queues", "step_fence",
            "step_get", "step_insert", "steps_list", "steps_prune", "unique_holder",
            "why_ahead", "why_job", "why_key_queues", "why_ordering", "why_served", "worker_beat",
            "worker_forget", "worker_gone", "workers_list", "workers_recent", "leader_lease",
            "workflow_insert", "workflow_node", "dep_insert", "deps_of_parent", "dep_consume",
            "child_satisfied", "child_cancel", "node_row", "children_lock", "dep_outputs",
            "deps_rearm", "node_rewait", "deps_waiting_count", "workflows_prune",
            "workflows_prune_empty", "workflows_list", "workflow_nodes", "workflow_edges",
            "workflow_names_taken", "workflow_grow", "child_grow", "batch_insert", "batch_lock",
            "batch_member", "batch_grow", "batch_close", "batch_tally", "batch_row", "batch_list",
            "batch_ended", "batch_fired", "job_links", "batch_members", "workflow_kind", "job_lock", "dep_row",
            "outbox_insert", "outbox_origin", "outbox_heads", "outbox_lock", "outbox_lease", "outbox_claimed",
            "outbox_mark", "outbox_fail", "outbox_stats", "outbox_list", "outbox_list_published",
            "outbox_prune"
            $(, $extra)*
        );
    };
    (@table $($name:literal),*) => {
        /// Statement `name`'s text (`sql/NAME.sql`).
        pub(crate) fn sql(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/", $name, ".sql"))),)*
                _ => None,
            }
        }
    };
}

/// `impl Conn for $ty`, for an engine module that has, in scope where this is invoked:
/// `prepare(name, args) -> Result<P>` (the statement's text and values as the driver binds
/// them), `query(&P)` (the sqlx query), `rows_of(&[driver rows]) -> Result<Vec<Row>>`,
/// `inserted(driver result) -> Result<Inserted>` and `db_err`. `$exec` is the sqlx
/// executor of `$s` (a pool, a connection, a transaction).
#[macro_export]
macro_rules! conn_via {
    ($ty:ty, |$s:ident| $exec:expr) => {
        impl $crate::Conn for $ty {
            async fn execute(
                &mut self,
                name: &'static str,
                args: &[$crate::Arg<'_>],
            ) -> $crate::core::Result<u64> {
                let $s = self;
                let p = prepare(name, args)?;
                let r = query(&p).execute($exec).await.map_err(db_err)?;
                Ok(r.rows_affected())
            }

            async fn fetch_all(
                &mut self,
                name: &'static str,
                args: &[$crate::Arg<'_>],
            ) -> $crate::core::Result<Vec<$crate::Row>> {
                let $s = self;
                let p = prepare(name, args)?;
                rows_of(&query(&p).fetch_all($exec).await.map_err(db_err)?)
            }

            async fn insert(
                &mut self,
                name: &'static str,
                args: &[$crate::Arg<'_>],
            ) -> $crate::core::Result<$crate::Inserted> {
                let $s = self;
                let p = prepare(name, args)?;
                inserted(query(&p).execute($exec).await)
            }
        }
    };
}
