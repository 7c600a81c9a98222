//! Numbered, embedded migrations (`migrations/NNNN_name.sql`), applied into Docket's schema.
//!
//! `sqlx`'s migrator keeps its bookkeeping table in the first schema of `search_path`, so we
//! run it on a dedicated connection whose path is exactly Docket's schema. That also lets the
//! migration files use unqualified names, and the functions they create capture the path with
//! `SET search_path FROM CURRENT`. The connection is detached from the pool and closed
//! afterwards so the altered path never leaks into the pool.

use docket_core::{validate, StoreError};
use sqlx::migrate::Migrator;
use sqlx::{Connection, PgPool};

use crate::errors::db_err;

/// The embedded migrations.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Advisory-lock class used by Docket (first key of the two-key form).
pub(crate) const LOCK_CLASS: i32 = 0x444b_5401; // "DKT" + 1

/// Applies pending migrations to `schema`; idempotent, and safe when several processes call
/// it at once (a session advisory lock per schema serialises them).
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<(), StoreError> {
    validate::schema(schema)?;
    let mut conn = pool.acquire().await.map_err(db_err)?.detach();
    sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
        .bind(LOCK_CLASS)
        .bind(format!("migrate:{schema}"))
        .execute(&mut conn)
        .await
        .map_err(db_err)?;
    let result = async {
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
            .execute(&mut conn)
            .await
            .map_err(db_err)?;
        sqlx::query(&format!("SET search_path TO \"{schema}\""))
            .execute(&mut conn)
            .await
            .map_err(db_err)?;
        MIGRATOR.run_direct(&mut conn).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e) => db_err(e),
            other => StoreError::Database(Box::new(other)),
        })
    }
    .await;
    // Closing the session releases the advisory lock even if the unlock below is never sent.
    let _ = conn.close().await;
    result
}
