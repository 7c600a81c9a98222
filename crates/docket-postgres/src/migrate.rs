//! Numbered, embedded migrations (`migrations/NNNN_name.sql`), applied into Docket's schema.
//!
//! All pending migrations run in **one transaction** that holds a transaction-scoped advisory
//! lock per schema and sets `search_path` with `SET LOCAL`. Nothing outlives the transaction,
//! so this works through a transaction-mode pooler (a session lock or a session `SET` would
//! stay on whichever server connection the pooler picked), any number of processes may call
//! it at once, and a failed migration leaves the schema as it was. The migration files use
//! unqualified names; the functions they create capture the path with
//! `SET search_path FROM CURRENT`.
//!
//! Bookkeeping stays in sqlx's `_sqlx_migrations` table (same columns and checksums as
//! sqlx's own migrator, which earlier versions used), inside Docket's schema.
//!
//! # Newer schemas (rolling upgrades)
//! A binary that finds migrations it does not know (a newer binary migrated first) keeps
//! working when they are **additive** — new tables, columns with defaults, new functions or
//! indexes: nothing an older binary reads or writes changes meaning. A migration that is not
//! additive carries the line `-- docket: breaking` and raises `schema_compat.min_reader` to
//! its own version; a binary that knows less than that refuses with
//! [`SchemaError::TooNew`], naming both versions.

use docket_core::{validate, StoreError};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{PgConnection, PgPool, Row};
use std::borrow::Cow;
use std::sync::LazyLock;

use crate::errors::db_err;

/// The embedded migrations, in version order: `(version, description, text)` of each
/// `migrations/NNNN_name.sql`, listed by `build.rs`.
const EMBEDDED: &[(i64, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The embedded migrations as sqlx's migrator (checksums are computed once, on first use —
/// SHA-384 of about 180 KB of SQL).
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| Migrator {
    migrations: Cow::Owned(
        EMBEDDED
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    // sqlx's own rule for a migration that must run outside a transaction.
                    sql.starts_with("-- no-transaction"),
                )
            })
            .collect(),
    ),
    ..Migrator::DEFAULT
});

/// Advisory-lock class used by Docket (first key of the two-key form).
pub(crate) const LOCK_CLASS: i32 = 0x444b_5401; // "DKT" + 1

/// Migrations and schema checks prepare no named statements, so they run the same through a
/// transaction-mode pooler (they are rare: caching buys nothing).
fn query_persistent_off(
    sql: &str,
) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sql).persistent(false)
}

fn scalar<O>(
    sql: &str,
) -> sqlx::query::QueryScalar<'_, sqlx::Postgres, O, sqlx::postgres::PgArguments>
where
    (O,): for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
{
    sqlx::query_scalar(sql).persistent(false)
}

/// Migrations whose comments were reworded after release, with the checksum (SHA-384, as
/// sqlx's) of the text schemas migrated before the rewording recorded. Only comments may
/// change this way — the statements of an applied migration are fixed — so a schema that
/// recorded the former text is the same schema. A test checks each entry is what `git`
/// holds for the former text (`tests/migrations.rs`).
pub const REWORDED: &[(i64, &str)] = &[
    // 2026-12-05: its citation of a benchmark round became that round's date and commit.
    (
        11,
        "e74a7d99930a8e75fad88f9ced9154747c350f54a601c6cd36e1e8be097ed89005aaace7aa09c8e157af29ba8b16616f",
    ),
    // 2026-12-05: its citation of a benchmark round became that round's date and commit.
    (
        13,
        "66e800fb1de82a1491e427f6e4a77192a0a5220e88cff883d079de1cbd08d45f97a2b8ffb1ac1e3bd25edaf76578d98a",
    ),
];

/// Whether `recorded` is migration `m`'s checksum, now or before its comments were reworded.
pub fn checksum_matches(m: &sqlx::migrate::Migration, recorded: &[u8]) -> bool {
    let hex: String = recorded.iter().map(|b| format!("{b:02x}")).collect();
    *m.checksum == *recorded
        || REWORDED
            .iter()
            .any(|(v, former)| *v == m.version && *former == hex)
}

/// The marker of a migration older binaries cannot run against.
const BREAKING: &str = "-- docket: breaking";

/// The newest migration this binary knows.
pub fn latest_known() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Why a schema cannot be used by this binary.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema does not exist, or holds no Docket tables.
    #[error(
        "schema {schema:?} has no Docket tables; run `docket migrate` (or Store::migrate) first"
    )]
    Missing {
        /// The schema.
        schema: String,
    },
    /// The schema exists but this role may not create objects in it.
    #[error("role {role:?} lacks USAGE and CREATE on schema {schema:?} (owned by {owner:?}); migrate as its owner or GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")]
    NoPrivilege {
        /// The schema.
        schema: String,
        /// The role connected.
        role: String,
        /// The schema's owner.
        owner: String,
    },
    /// A newer binary applied a migration that this one cannot work with.
    #[error("schema {schema:?} is at migration {current} and needs a binary that knows migration {min_reader} or later; this binary knows up to {known}")]
    TooNew {
        /// The schema.
        schema: String,
        /// Its newest applied migration.
        current: i64,
        /// The oldest migration a binary must know to use it.
        min_reader: i64,
        /// The newest migration this binary knows.
        known: i64,
    },
    /// An applied migration's text differs from this binary's copy.
    #[error("migration {version} applied to schema {schema:?} differs from this binary's copy (checksum mismatch)")]
    Changed {
        /// The schema.
        schema: String,
        /// The migration.
        version: i64,
    },
    /// A migration failed half-way in an earlier run (only possible with sqlx's own runner).
    #[error("migration {version} in schema {schema:?} is marked failed; fix it by hand")]
    Dirty {
        /// The schema.
        schema: String,
        /// The migration.
        version: i64,
    },
}

impl From<SchemaError> for StoreError {
    fn from(e: SchemaError) -> Self {
        StoreError::Database(Box::new(e))
    }
}

/// What a schema holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaVersion {
    /// Applied migrations, ascending.
    pub applied: Vec<i64>,
    /// The lowest binary version (newest known migration) that may use the schema.
    pub min_reader: i64,
}

impl SchemaVersion {
    /// The newest applied migration.
    pub fn current(&self) -> i64 {
        self.applied.last().copied().unwrap_or(0)
    }
}

/// Reads what is applied (nothing when the schema or its bookkeeping table is missing).
/// (Boxed: an `async fn` over `&mut PgConnection` trips the compiler's higher-ranked `Send`
/// check when a caller spawns `migrate`.)
fn read_version<'a>(
    conn: &'a mut PgConnection,
    schema: &'a str,
    migrator: &'a Migrator,
) -> futures::future::BoxFuture<'a, Result<Option<SchemaVersion>, StoreError>> {
    Box::pin(async move {
        let present: bool =
            scalar("SELECT to_regclass(quote_ident($1) || '._sqlx_migrations') IS NOT NULL")
                .bind(schema)
                .fetch_one(&mut *conn)
                .await
                .map_err(db_err)?;
        if !present {
            return Ok(None);
        }
        let rows = query_persistent_off(&format!(
            "SELECT version, success, checksum FROM \"{schema}\"._sqlx_migrations ORDER BY version"
        ))
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?;
        let mut v = SchemaVersion::default();
        for r in &rows {
            let version: i64 = r.try_get("version").map_err(db_err)?;
            if !r.try_get::<bool, _>("success").map_err(db_err)? {
                return Err(SchemaError::Dirty {
                    schema: schema.into(),
                    version,
                }
                .into());
            }
            let checksum: Vec<u8> = r.try_get("checksum").map_err(db_err)?;
            if let Some(m) = migrator.iter().find(|m| m.version == version) {
                if !checksum_matches(m, &checksum) {
                    return Err(SchemaError::Changed {
                        schema: schema.into(),
                        version,
                    }
                    .into());
                }
            }
            v.applied.push(version);
        }
        let compat: bool =
            scalar("SELECT to_regclass(quote_ident($1) || '.schema_compat') IS NOT NULL")
                .bind(schema)
                .fetch_one(&mut *conn)
                .await
                .map_err(db_err)?;
        if compat {
            v.min_reader = scalar(&format!(
                "SELECT coalesce(max(min_reader), 0) FROM \"{schema}\".schema_compat"
            ))
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
        }
        Ok(Some(v))
    })
}

fn check_compatible(schema: &str, v: &SchemaVersion, known: i64) -> Result<(), StoreError> {
    if v.min_reader > known {
        return Err(SchemaError::TooNew {
            schema: schema.into(),
            current: v.current(),
            min_reader: v.min_reader,
            known,
        }
        .into());
    }
    if v.current() > known {
        tracing::warn!(
            schema,
            current = v.current(),
            known,
            "schema has newer (additive) migrations than this binary knows; continuing"
        );
    }
    Ok(())
}

/// Checks, without writing anything, that `schema` is migrated and usable by this binary.
/// Read-only commands call this instead of [`migrate`].
pub fn check<'a>(
    pool: &'a PgPool,
    schema: &'a str,
) -> futures::future::BoxFuture<'a, Result<SchemaVersion, StoreError>> {
    Box::pin(async move {
        validate::schema(schema)?;
        let mut conn = pool.acquire().await.map_err(db_err)?;
        // One transaction, so a transaction-mode pooler keeps both reads on one server.
        query_persistent_off("BEGIN READ ONLY")
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
        let v = read_version(&mut conn, schema, &MIGRATOR).await;
        let _ = query_persistent_off("ROLLBACK").execute(&mut *conn).await;
        match v? {
            None => Err(SchemaError::Missing {
                schema: schema.into(),
            }
            .into()),
            Some(v) if v.applied.is_empty() => Err(SchemaError::Missing {
                schema: schema.into(),
            }
            .into()),
            Some(v) => {
                check_compatible(schema, &v, latest_known())?;
                Ok(v)
            }
        }
    })
}

/// Applies pending migrations to `schema`; idempotent, and safe when several processes call
/// it at once.
pub fn migrate<'a>(
    pool: &'a PgPool,
    schema: &'a str,
) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
    migrate_with(pool, schema, &MIGRATOR)
}

/// [`migrate`] with another set of migrations (tests of the migration rules use their own).
#[doc(hidden)]
pub fn migrate_with<'a>(
    pool: &'a PgPool,
    schema: &'a str,
    migrator: &'a Migrator,
) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
    Box::pin(async move {
        let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        validate::schema(schema)?;
        let mut tx = pool.begin().await.map_err(db_err)?;
        query_persistent_off("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(format!("migrate:{schema}"))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        // Skip CREATE SCHEMA when it exists: a role that owns its schema but may not create
        // schemas in the database (a managed database's usual grant) must still migrate.
        let exists: bool = scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(schema)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        if !exists {
            sqlx::Executor::execute(&mut *tx, format!("CREATE SCHEMA \"{schema}\"").as_str())
                .await
                .map_err(db_err)?;
        } else {
            let (usable, role, owner): (bool, String, String) = sqlx::query_as::<
                _,
                (bool, String, String),
            >(
                "SELECT has_schema_privilege($1, 'USAGE') AND has_schema_privilege($1, 'CREATE'),
                        current_user::text, pg_get_userbyid(nspowner)::text
                 FROM pg_namespace WHERE nspname = $1",
            )
            .persistent(false)
            .bind(schema)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
            if !usable {
                // Nothing to apply needs no privilege: a least-privilege role (the worker's,
                // the operator's) runs against a schema its owner migrated. Only pending
                // migrations need CREATE.
                let version = read_version(&mut tx, schema, migrator).await.ok().flatten();
                if let Some(v) = version {
                    if migrator.iter().all(|m| v.applied.contains(&m.version)) {
                        check_compatible(schema, &v, known)?;
                        return Ok(());
                    }
                }
                return Err(SchemaError::NoPrivilege {
                    schema: schema.into(),
                    role,
                    owner,
                }
                .into());
            }
        }
        sqlx::Executor::execute(
            &mut *tx,
            // A managed database's statement_timeout must not cut a migration off half-way
            // (it would roll back and block the upgrade); this lasts only this transaction.
            format!("SET LOCAL search_path TO \"{schema}\"; SET LOCAL statement_timeout = 0")
                .as_str(),
        )
        .await
        .map_err(db_err)?;
        sqlx::Executor::execute(
            &mut *tx,
            "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
                version BIGINT PRIMARY KEY,
                description TEXT NOT NULL,
                installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
                success BOOLEAN NOT NULL,
                checksum BYTEA NOT NULL,
                execution_time BIGINT NOT NULL
            )",
        )
        .await
        .map_err(db_err)?;
        let version = read_version(&mut tx, schema, migrator)
            .await?
            .unwrap_or_default();
        check_compatible(schema, &version, known)?;
        for m in migrator.iter() {
            if version.applied.contains(&m.version) {
                continue;
            }
            let started = std::time::Instant::now();
            sqlx::Executor::execute(&mut *tx, &*m.sql)
                .await
                .map_err(db_err)?;
            if m.sql.lines().any(|l| l.trim() == BREAKING) {
                query_persistent_off("UPDATE schema_compat SET min_reader = $1")
                    .bind(m.version)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?;
            }
            query_persistent_off(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
                 VALUES ($1, $2, TRUE, $3, $4)",
            )
            .bind(m.version)
            .bind(&*m.description)
            .bind(&*m.checksum)
            .bind(i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        if let Some(m) = docket_core::mutants::current() {
            mutate_functions(&mut tx, schema, m).await?;
        }
        tx.commit().await.map_err(db_err)
    })
}

/// Rewrites the schema's functions into the mutant `m` (test builds only; see
/// [`docket_core::mutants`]). Idempotent: a schema mutated before has nothing left to edit.
async fn mutate_functions(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    schema: &str,
    m: docket_core::mutants::Mutant,
) -> Result<(), StoreError> {
    for (func, from, to) in m.function_edits() {
        let defs: Vec<String> = sqlx::query_scalar(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = $1 AND p.proname = $2 AND p.prokind = 'f'",
        )
        .persistent(false)
        .bind(schema)
        .bind(func)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_err)?;
        // None left to edit: this schema was migrated by a mutant process before.
        let hits = defs.iter().filter(|d| d.contains(from));
        for def in hits {
            sqlx::Executor::execute(&mut **tx, def.replace(from, to).as_str())
                .await
                .map_err(db_err)?;
        }
    }
    Ok(())
}
