//! The CLI on SQLite (`--database-url sqlite://path/jobs.db`): the file, opened through
//! `Open`; the commands themselves are `crate::engines::run`.

use docket_core::Store;
use docket_sqlite::SqliteStore;

use crate::cli::exit;
use crate::engine::Open;
use crate::engines::Engine;
use crate::enqueue;
use crate::fail::CliError;

/// True for a URL this engine opens.
pub fn is_url(url: &str) -> bool {
    url.trim_start().starts_with("sqlite:")
}

/// A SQLite database file to open.
#[derive(Debug, Clone)]
pub struct SqliteCtx {
    /// The `sqlite://` URL.
    pub url: String,
}

impl SqliteCtx {
    /// The file's path as the URL names it (for messages and the demo).
    pub fn path(&self) -> String {
        let rest = self.url.trim_start().trim_start_matches("sqlite:");
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        rest.split('?').next().unwrap_or(rest).to_string()
    }

    /// Opens the file (created when missing) with a pool of `conns` connections.
    pub async fn connect(&self, conns: u32) -> anyhow::Result<SqliteStore> {
        SqliteStore::connect(&self.url, conns).await.map_err(|e| {
            CliError::new(
                exit::UNAVAILABLE,
                format!("cannot open the SQLite database {}: {e}", self.path()),
            )
            .into()
        })
    }

    /// This binary again as a hidden worker subcommand on the same file (the URL in the
    /// environment, like PostgreSQL's).
    pub fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        let mut c = std::process::Command::new(std::env::current_exe()?);
        c.env("DATABASE_URL", &self.url)
            .arg(subcommand)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        Ok(c)
    }
}

impl Open for SqliteCtx {
    type Store = SqliteStore;

    async fn existing(&self, conns: u32) -> anyhow::Result<SqliteStore> {
        // An operator command never creates the file: a mistyped path must not leave an
        // empty database behind, and one in memory would hold nothing to operate on.
        let path = self.path();
        if path.is_empty() || path == ":memory:" || self.url.contains("mode=memory") {
            return Err(CliError::invalid(
                "a SQLite database in memory lives only as long as one process: name a file (sqlite://path/jobs.db)",
            )
            .into());
        }
        if !std::path::Path::new(&path).exists() {
            return Err(CliError::new(
                exit::FAILURE,
                format!("no SQLite database at {}", crate::output::safe(&path)),
            )
            .hint("check --database-url; `docket migrate` creates it")
            .into());
        }
        let store = self.connect(conns).await?;
        if store.schema_version().await? == 0 {
            return Err(CliError::new(
                exit::FAILURE,
                format!("{} holds no Docket schema", self.path()),
            )
            .hint("check --database-url; `docket migrate` creates it")
            .into());
        }
        Ok(store)
    }

    async fn migrated(&self, conns: u32) -> anyhow::Result<SqliteStore> {
        // A command that writes cannot run on a file opened read-only: say so up front
        // (otherwise SQLite's "attempt to write a readonly database" came back as exit 1).
        let query = self.url.split_once('?').map_or("", |(_, q)| q);
        if query.split('&').any(|kv| kv == "mode=ro") {
            return Err(CliError::invalid(format!(
                "{} is opened read-only (mode=ro) and this command writes",
                crate::output::safe(&self.path())
            ))
            .into());
        }
        let store = self.connect(conns).await?;
        store.migrate().await?;
        Ok(store)
    }

    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    async fn bulk_file(&self, path: &str, json: bool) -> anyhow::Result<()> {
        // SQLite has one writer: the write transaction must not wait for input. A pipe (or
        // anything but a regular file) is first copied to a private temporary file, and
        // every line is validated before the write lock is taken; the transaction then
        // reads a local file it has already checked (memory stays bounded either way).
        let regular = path != "-" && std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let spool = if regular {
            None
        } else {
            let mut input: Box<dyn std::io::Read> = if path == "-" {
                Box::new(std::io::stdin())
            } else {
                Box::new(std::fs::File::open(path).map_err(|e| {
                    CliError::invalid(format!("cannot read {}: {e}", crate::output::safe(path)))
                })?)
            };
            // tempfile creates it 0600 and removes it when dropped.
            let mut f = tempfile::NamedTempFile::new()?;
            std::io::copy(&mut input, f.as_file_mut())?;
            Some(f)
        };
        let path = spool
            .as_ref()
            .map_or(path.to_string(), |f| f.path().display().to_string());
        let path = path.as_str();
        enqueue::bulk_lines(path, async |_chunk| Ok(Vec::new())).await?;
        let store = self.migrated(2).await?;
        let mut tx = store
            .pool()
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| anyhow::anyhow!("cannot begin: {e}"))?;
        let counts = enqueue::bulk_lines(path, async |chunk| {
            Ok(store.enqueue_many_tx(&mut tx, chunk).await?)
        })
        .await?;
        tx.commit()
            .await
            .map_err(|e| anyhow::anyhow!("cannot commit: {e}"))?;
        enqueue::report_bulk(counts, json)
    }
}

impl Engine for SqliteCtx {
    const NAME: &'static str = "SQLite";
    type Demo = crate::demo::sqlite::Db;

    fn demo(&self) -> Self::Demo {
        crate::demo::sqlite::Db(self.clone())
    }

    async fn bench(&self, a: &crate::cli::BenchArgs) -> anyhow::Result<()> {
        crate::engine_bench::run(&crate::engine_bench::sqlite::Bench(self.clone()), a).await
    }

    fn place(&self) -> String {
        self.path()
    }
}
