//! How commands reach their database: every command that needs only queue operations is
//! written against [`Open`], whose store is any engine's [`docket_core::Store`]; only the
//! PostgreSQL-only commands (bulk import by COPY, `explain`, `grant`, `lab`, the demo and
//! the benchmarks) take the PostgreSQL [`crate::Ctx`] itself. A second engine implements
//! [`Open`] and every generic command works on it unchanged.

use docket_postgres::PgStore;

use crate::Ctx;

/// A database a command can open, lazily: commands check their own input first, so bad
/// input is refused without a connection.
pub(crate) trait Open: Sync {
    /// The engine's store.
    type Store: docket_core::Store;

    /// A store on a schema that must already exist (operator commands never create one).
    async fn existing(&self, conns: u32) -> anyhow::Result<Self::Store>;

    /// A store, migrating first (commands that write jobs).
    async fn migrated(&self, conns: u32) -> anyhow::Result<Self::Store>;

    /// Secrets of this connection (a password) that must never reach a child process's
    /// environment or output.
    fn secrets(&self) -> Vec<String>;

    /// `docket enqueue --bulk`: the NDJSON file at `path` in one transaction, all or nothing.
    async fn bulk_file(&self, path: &str, json: bool) -> anyhow::Result<()>;
}

impl Open for Ctx {
    type Store = PgStore;

    async fn existing(&self, conns: u32) -> anyhow::Result<PgStore> {
        Ctx::existing(self, conns).await
    }

    async fn migrated(&self, conns: u32) -> anyhow::Result<PgStore> {
        self.store(conns).await
    }

    fn secrets(&self) -> Vec<String> {
        docket_postgres::connect::parse(&self.url)
            .ok()
            .and_then(|t| t.password().map(str::to_string))
            .into_iter()
            .collect()
    }

    async fn bulk_file(&self, path: &str, json: bool) -> anyhow::Result<()> {
        crate::enqueue::bulk_pg(self, path, json).await
    }
}
