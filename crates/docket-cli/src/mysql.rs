//! The CLI on MariaDB / MySQL (`--database-url mysql://user:pass@host:3306/db`): the
//! database, opened through `Open`; the commands themselves are `crate::engines::run`.

use docket_core::Store;
use docket_mysql::MySqlStore;

use crate::cli::exit;
use crate::engine::Open;
use crate::engines::Engine;
use crate::enqueue;
use crate::fail::CliError;

/// True for a URL this engine opens.
pub fn is_url(url: &str) -> bool {
    let u = url.trim_start();
    u.starts_with("mysql://") || u.starts_with("mariadb://")
}

/// A MariaDB / MySQL database to open.
#[derive(Debug, Clone)]
pub struct MySqlCtx {
    /// The `mysql://` URL.
    pub url: String,
}

impl MySqlCtx {
    /// The URL sqlx reads (`mariadb://` is accepted as a spelling of `mysql://`).
    fn sqlx_url(&self) -> String {
        let u = self.url.trim();
        match u.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => u.to_string(),
        }
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> String {
        crate::fail::redact(&self.url)
    }

    /// The URL of database `db` on the same server, same credentials.
    pub fn with_database(&self, db: &str) -> MySqlCtx {
        let u = self.sqlx_url();
        let (head, query) = match u.split_once('?') {
            Some((h, q)) => (h.to_string(), Some(q.to_string())),
            None => (u.clone(), None),
        };
        let after_scheme = head.find("://").map_or(0, |i| i + 3);
        let base = match head[after_scheme..].find('/') {
            Some(i) => head[..after_scheme + i].to_string(),
            None => head.clone(),
        };
        let mut url = format!("{base}/{db}");
        if let Some(q) = query {
            url.push('?');
            url.push_str(&q);
        }
        MySqlCtx { url }
    }

    /// The database the URL names.
    pub fn database(&self) -> Option<String> {
        let u = self.sqlx_url();
        let head = u.split('?').next().unwrap_or_default().to_string();
        let after_scheme = head.find("://").map_or(0, |i| i + 3);
        head[after_scheme..]
            .split_once('/')
            .map(|(_, db)| db.to_string())
            .filter(|db| !db.is_empty())
    }

    /// Opens a pool of `conns` connections and the store on it.
    pub async fn connect(&self, conns: u32) -> anyhow::Result<MySqlStore> {
        if self.database().is_none() {
            return Err(CliError::invalid("the MySQL URL names no database")
                .hint("mysql://user:password@host:3306/DATABASE")
                .into());
        }
        MySqlStore::connect(&self.sqlx_url(), conns)
            .await
            .map_err(|e| {
                CliError::new(
                    exit::UNAVAILABLE,
                    format!(
                        "cannot connect to {}: {}",
                        self.shown(),
                        docket_core::redact::redact(&e.to_string())
                    ),
                )
                .into()
            })
    }

    /// This binary again as a hidden worker subcommand on the same database (the URL in
    /// the environment, never in argv).
    pub fn child(&self, subcommand: &str) -> anyhow::Result<std::process::Command> {
        let mut c = std::process::Command::new(std::env::current_exe()?);
        c.env("DATABASE_URL", &self.url)
            .arg(subcommand)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        Ok(c)
    }
}

impl Open for MySqlCtx {
    type Store = MySqlStore;

    async fn existing(&self, conns: u32) -> anyhow::Result<MySqlStore> {
        let store = self.connect(conns).await?;
        if store.schema_version().await? == 0 {
            return Err(CliError::new(
                exit::FAILURE,
                format!(
                    "database {} holds no Docket schema",
                    self.database().unwrap_or_default()
                ),
            )
            .hint("check --database-url; `docket migrate` creates it")
            .into());
        }
        Ok(store)
    }

    async fn migrated(&self, conns: u32) -> anyhow::Result<MySqlStore> {
        let store = self.connect(conns).await?;
        store.migrate().await?;
        Ok(store)
    }

    fn secrets(&self) -> Vec<String> {
        // mysql://user:PASSWORD@host/db
        let u = self.sqlx_url();
        let rest = u.split_once("://").map_or("", |(_, r)| r);
        let auth = rest.split_once('@').map_or("", |(a, _)| a);
        auth.split_once(':')
            .map(|(_, p)| p.to_string())
            .filter(|p| !p.is_empty())
            .into_iter()
            .collect()
    }

    async fn bulk_file(&self, path: &str, json: bool) -> anyhow::Result<()> {
        let store = self.migrated(2).await?;
        let mut tx = store
            .pool()
            .begin()
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

impl Engine for MySqlCtx {
    const NAME: &'static str = "MariaDB / MySQL";
    type Demo = crate::demo::mysql::Db;

    fn demo(&self) -> Self::Demo {
        crate::demo::mysql::Db(self.clone())
    }

    async fn bench(&self, a: &crate::cli::BenchArgs) -> anyhow::Result<()> {
        crate::engine_bench::run(&crate::engine_bench::mysql::Bench(self.clone()), a).await
    }

    fn place(&self) -> String {
        format!(
            "database {} on {}",
            self.database().unwrap_or_default(),
            self.shown()
        )
    }
}
