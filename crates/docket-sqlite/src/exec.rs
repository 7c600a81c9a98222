//! This engine's side of the rules' executor ([`docket_local::Conn`]): statements from
//! `sql/` run with sqlx, arguments bound by number (SQLite reads `?N` itself), a list
//! argument bound as one JSON array, rows read back as plain values by their stored type.

use std::sync::Arc;

use docket_core::Result;
use docket_local::{sqltext::json_list, Arg, Inserted, Row, Value};
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteRow};
use sqlx::{Column, Row as _, TypeInfo, ValueRef};

use crate::errors::{db_err, is_unique_violation};

docket_local::statements!(
    "claim_context",
    "claim_fast",
    "claim_lease",
    "claimed_rows",
    "complete_all",
    "complete_delete_all",
    "complete_delete_many",
    "complete_many",
    "fenced_state",
    "heartbeat",
    "snooze_many",
    "enqueued_in"
);

/// Statement `name`'s text.
pub(crate) fn text(name: &'static str) -> Result<&'static str> {
    docket_local::exec::text_of(sql, name)
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

/// Statement `name` and its arguments, as SQLite binds them (it reads `?N` itself).
fn prepare<'a, 'q>(
    name: &'static str,
    args: &'a [Arg<'q>],
) -> Result<(&'static str, &'a [Arg<'q>])> {
    Ok((text(name)?, args))
}

/// The statement with its arguments bound in order (`?N` picks the Nth); a list is bound
/// as one JSON array.
fn query<'q>((text, args): &(&'static str, &[Arg<'q>])) -> Query<'q> {
    let mut q = sqlx::query(text);
    for a in args.iter() {
        q = match *a {
            Arg::Null => q.bind(None::<i64>),
            Arg::Int(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Ints(_) | Arg::Texts(_) => q.bind(json_list(a)),
        };
    }
    q
}

/// An insert's new row id, or that a unique index refused the row.
fn inserted(
    r: std::result::Result<sqlx::sqlite::SqliteQueryResult, sqlx::Error>,
) -> Result<Inserted> {
    match r {
        Ok(r) => Ok(Inserted::Id(r.last_insert_rowid())),
        Err(e) if is_unique_violation(&e) => Ok(Inserted::Duplicate),
        Err(e) => Err(db_err(e)),
    }
}

/// A row as plain values, by each value's stored type.
fn row_of(r: &SqliteRow, names: &Arc<[String]>) -> Result<Row> {
    let mut values = Vec::with_capacity(names.len());
    for i in 0..names.len() {
        let v = r.try_get_raw(i).map_err(db_err)?;
        values.push(if v.is_null() {
            Value::Null
        } else {
            match v.type_info().name() {
                "INTEGER" => Value::Int(r.try_get(i).map_err(db_err)?),
                "REAL" => Value::Float(r.try_get(i).map_err(db_err)?),
                _ => Value::Text(r.try_get(i).map_err(db_err)?),
            }
        });
    }
    Ok(Row::new(names.clone(), values))
}

/// Rows as plain values (the column names read once).
fn rows_of(rows: &[SqliteRow]) -> Result<Vec<Row>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let names: Arc<[String]> = first
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    rows.iter().map(|r| row_of(r, &names)).collect()
}

/// The pool, for single reads.
#[derive(Clone, Debug)]
pub struct Reader(pub(crate) sqlx::SqlitePool);

docket_local::conn_via!(Reader, |s| &s.0);

/// A connection inside the application's own transaction.
pub struct Caller<'a>(pub(crate) &'a mut sqlx::SqliteConnection);

docket_local::conn_via!(Caller<'_>, |s| &mut *s.0);

docket_local::conn_via!(crate::store::WriteTx, |s| s.conn());

/// A read transaction (one snapshot) with the database's now.
pub struct ReadTx {
    pub(crate) tx: sqlx::Transaction<'static, Sqlite>,
    pub(crate) now: i64,
}

docket_local::conn_via!(ReadTx, |s| &mut *s.tx);

impl docket_local::Tx for ReadTx {
    fn now(&self) -> i64 {
        self.now
    }

    async fn commit(self) -> Result<()> {
        self.tx.commit().await.map_err(db_err)
    }
}
