//! This engine's side of the rules' executor ([`docket_local::Conn`]): statements from
//! `sql/` run with sqlx. The servers bind strictly by position, so each statement's `?N`
//! placeholders are expanded once ([`Placeholders`]) and its arguments repeated, reordered
//! and list arguments spread to match; rows are read back as plain values by column type
//! (text whatever its collation: the tables compare names byte for byte, which the protocol
//! flags as binary).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use docket_core::Result;
use docket_local::sqltext::Placeholders;
use docket_local::{Arg, Inserted, Row, Value};
use sqlx::mysql::{MySql, MySqlRow};
use sqlx::{Column, Row as _, TypeInfo, ValueRef};

use crate::errors::{corrupt, db_err, is_unique_violation};

docket_local::statements!(
    "candidates_lock",
    "candidates_ready",
    "candidates_starving",
    "claim_context",
    "claim_lease",
    "claimed_rows",
    "complete_apply",
    "complete_check",
    "complete_delete_apply",
    "complete_fast",
    "enqueued_in",
    "fenced_select",
    "heartbeat_apply",
    "key_lock_ensure",
    "key_lock_exists",
    "key_lock_try",
    "queue_lock_ensure",
    "queue_lock_exclusive",
    "queue_lock_share",
    "snooze_apply",
    "table_health"
);

/// Statement `name` split at its placeholders, parsed once.
fn placeholders(name: &'static str) -> Result<Arc<Placeholders>> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Arc<Placeholders>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
        return Ok(p.clone());
    }
    let p = Arc::new(Placeholders::parse(docket_local::exec::text_of(
        sql, name,
    )?)?);
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name, p.clone());
    Ok(p)
}

/// `name`'s text for these arguments, and the values in binding order.
fn prepare<'a>(name: &'static str, args: &[Arg<'a>]) -> Result<(String, Vec<Arg<'a>>)> {
    placeholders(name)?.expand(args)
}

type Query<'q> = sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments>;

/// The text with its values bound in order.
fn query<'q>((text, values): &'q (String, Vec<Arg<'q>>)) -> Query<'q> {
    let mut q = sqlx::query(text);
    for a in values {
        q = match *a {
            Arg::Int(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            // Lists were spread by `expand`.
            Arg::Null | Arg::Ints(_) | Arg::Texts(_) => q.bind(None::<i64>),
        };
    }
    q
}

fn value_of(r: &MySqlRow, i: usize) -> Result<Value> {
    let raw = r.try_get_raw(i).map_err(db_err)?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let ty = raw.type_info().name().to_string();
    let bytes = || -> Result<String> {
        let b: &[u8] = r.try_get_unchecked(i).map_err(db_err)?;
        String::from_utf8(b.to_vec()).map_err(|_| corrupt(format!("column {i} is not UTF-8")))
    };
    Ok(if ty.contains("INT") || ty == "BOOLEAN" || ty == "YEAR" {
        if ty.contains("UNSIGNED") {
            let v: u64 = r.try_get_unchecked(i).map_err(db_err)?;
            Value::Int(i64::try_from(v).map_err(|_| corrupt(format!("{v} is out of range")))?)
        } else {
            Value::Int(r.try_get_unchecked(i).map_err(db_err)?)
        }
    } else if ty == "DOUBLE" {
        Value::Float(r.try_get_unchecked(i).map_err(db_err)?)
    } else if ty == "FLOAT" {
        Value::Float(f64::from(r.try_get_unchecked::<f32, _>(i).map_err(db_err)?))
    } else if ty == "DECIMAL" {
        let t = bytes()?;
        match t.parse::<i64>() {
            Ok(v) => Value::Int(v),
            Err(_) => Value::Float(
                t.parse()
                    .map_err(|_| corrupt(format!("{t:?} is not a number")))?,
            ),
        }
    } else {
        Value::Text(bytes()?)
    })
}

/// An insert's new row id, or that a unique index refused the row (only this statement
/// was rolled back; the transaction goes on).
fn inserted(
    r: std::result::Result<sqlx::mysql::MySqlQueryResult, sqlx::Error>,
) -> Result<Inserted> {
    match r {
        Ok(r) => Ok(Inserted::Id(r.last_insert_id() as i64)),
        Err(e) if is_unique_violation(&e) => Ok(Inserted::Duplicate),
        Err(e) => Err(db_err(e)),
    }
}

/// Rows as plain values (the column names read once).
fn rows_of(rows: &[MySqlRow]) -> Result<Vec<Row>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let names: Arc<[String]> = first
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    rows.iter()
        .map(|r| {
            let values = (0..names.len())
                .map(|i| value_of(r, i))
                .collect::<Result<_>>()?;
            Ok(Row::new(names.clone(), values))
        })
        .collect()
}

/// The pool, for single reads.
#[derive(Clone, Debug)]
pub struct Reader(pub(crate) sqlx::MySqlPool);

docket_local::conn_via!(Reader, |s| &s.0);

/// A connection inside the application's own transaction.
pub struct Caller<'a>(pub(crate) &'a mut sqlx::MySqlConnection);

docket_local::conn_via!(Caller<'_>, |s| &mut *s.0);

/// A transaction of the rules, with the server's now read inside it.
pub struct Tx {
    pub(crate) tx: sqlx::Transaction<'static, MySql>,
    pub(crate) now: i64,
}

docket_local::conn_via!(Tx, |s| &mut *s.tx);

impl docket_local::Tx for Tx {
    fn now(&self) -> i64 {
        self.now
    }

    async fn commit(self) -> Result<()> {
        self.tx.commit().await.map_err(db_err)
    }
}
