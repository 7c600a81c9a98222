//! Scratch schemas for `docket demo` and `docket bench`: each run starts from an empty
//! schema, and a run only ever drops a schema that a run of its own made. A schema is
//! recognised by the comment it is created with; any other schema of that name (an
//! operator's `--schema shop` turned into `shop_demo`, say) is refused, never dropped.

use docket_postgres::PgStore;

use crate::fail::CliError;
use crate::Ctx;

/// The comment that marks a schema as a scratch schema of `purpose` (demo, bench).
fn marker(purpose: &str) -> String {
    format!(
        "docket {purpose} scratch schema: dropped and re-created by every `docket {purpose}` run"
    )
}

/// Drops `ctx.schema` when an earlier run of `purpose` made it, refuses when someone else
/// did, then creates it afresh (marked), migrates it, and returns a store of `conns`.
pub async fn fresh(ctx: &Ctx, purpose: &str, conns: u32) -> anyhow::Result<PgStore> {
    let admin = ctx.connect(1).await?;
    let comment: Option<Option<String>> = sqlx::query_scalar(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1",
    )
    .bind(&ctx.schema)
    .fetch_optional(admin.pool())
    .await?;
    let s = &ctx.schema;
    match comment {
        None => {}
        Some(Some(c)) if c == marker(purpose) => {
            sqlx::raw_sql(&format!("DROP SCHEMA \"{s}\" CASCADE"))
                .execute(admin.pool())
                .await?;
        }
        Some(_) => {
            return Err(CliError::new(
                crate::cli::exit::CONFLICT,
                format!("schema {s:?} exists and was not made by `docket {purpose}`; refusing to drop or reuse it"),
            )
            .hint("pick another with --schema (the run uses <schema>_demo / <schema>_bench)")
            .into())
        }
    }
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA \"{s}\"; COMMENT ON SCHEMA \"{s}\" IS '{}'",
        marker(purpose)
    ))
    .execute(admin.pool())
    .await?;
    admin.pool().close().await;
    ctx.store(conns).await
}
