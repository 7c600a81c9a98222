//! Connecting: a connection string in, a pool (and the facts the runtime needs) out.
//!
//! Docket accepts what libpq accepts where users meet it:
//! - URLs (`postgres://` or `postgresql://`) and key=value conninfo strings
//!   (`host=db user=app password='s e c' sslmode=require`);
//! - TLS per libpq's `sslmode` (`disable`, `allow`, `prefer` — the default —, `require`,
//!   `verify-ca`, `verify-full`), `sslrootcert`, `sslcert` and `sslkey`, with the system's
//!   root certificates trusted as well (rustls, no OpenSSL). As in libpq, `require` with a
//!   `sslrootcert` verifies the CA (`verify-ca`).
//! - One Docket parameter, `pooler`: `transaction` (also `pgbouncer`) for a transaction-mode
//!   pooler (PgBouncer, Supavisor, RDS Proxy), `none` for a direct connection, `auto` (the
//!   default) to detect well-known pooler endpoints. See [`PoolerMode`].
//!
//! A failed first connection is reported at once with its cause ([`ConnectError`]) instead
//! of after the pool's acquire time-out, and never with the password in it.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

use crate::redact::redact;

/// How Docket talks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolerMode {
    /// A direct connection (or a session-mode pooler): named prepared statements are cached,
    /// LISTEN works on any pooled connection.
    Direct,
    /// A transaction-mode pooler: every statement runs inside an explicit transaction (so the
    /// extended protocol's parse and execute reach the same server connection), no named
    /// prepared statements, no session state kept across transactions, and LISTEN only over a
    /// separate direct URL (`listen_url`) — without one, workers poll.
    Transaction,
}

/// Where the pooler mode came from (logged once at start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolerSource {
    /// `pooler=` in the connection string.
    Explicit,
    /// Recognised from the endpoint (PgBouncer's port 6432, Supabase's pooler hosts and
    /// port 6543, Neon's `-pooler` hosts, RDS Proxy hosts).
    Detected,
    /// Nothing said or recognised: direct.
    Default,
}

/// A parsed connection string. Its `Debug` shows only the redacted string: sqlx's options
/// would print the password.
#[derive(Clone)]
pub struct Target {
    /// sqlx's options (TLS, credentials, and the statement cache as the mode needs).
    pub options: PgConnectOptions,
    /// Direct or through a transaction-mode pooler.
    pub pooler: PoolerMode,
    /// Why that mode.
    pub pooler_source: PoolerSource,
    /// The string with any password replaced by `***`, for messages.
    pub redacted: String,
    password: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.redacted)
            .field("pooler", &self.pooler)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The password, if the string has one (to keep it out of child processes' environments).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

/// Why a connection could not be made. Each variant's message names the cause; its hint
/// says what usually fixes it.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The connection string does not parse.
    #[error("invalid database URL {url}: {reason}")]
    InvalidUrl {
        /// The string, its password removed.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// TCP connect refused: nothing listens there.
    #[error("connection refused by {endpoint}")]
    Refused {
        /// Host and port (or socket).
        endpoint: String,
    },
    /// The TLS negotiation or certificate check failed.
    #[error("TLS with {endpoint} failed: {cause}")]
    Tls {
        /// Host and port.
        endpoint: String,
        /// What failed.
        cause: String,
    },
    /// The server answered but rejected the credentials.
    #[error("authentication failed for user {user:?} at {endpoint}: {cause}")]
    Auth {
        /// Host and port (or socket).
        endpoint: String,
        /// The user name tried.
        user: String,
        /// The server's answer.
        cause: String,
    },
    /// The server answered but has no such database.
    #[error("database {database:?} does not exist at {endpoint}")]
    NoDatabase {
        /// Host and port (or socket).
        endpoint: String,
        /// The database name tried.
        database: String,
    },
    /// No answer within the connect time-out.
    #[error("timed out after {secs} s connecting to {endpoint}")]
    Timeout {
        /// Host and port (or socket).
        endpoint: String,
        /// The time-out, in seconds.
        secs: u64,
    },
    /// Anything else (name resolution, too many connections, server starting up, …).
    #[error("cannot connect to {endpoint}: {cause}")]
    Other {
        /// Host and port (or socket).
        endpoint: String,
        /// The error, its secrets removed.
        cause: String,
    },
}

impl ConnectError {
    /// What usually fixes it, for a CLI's `hint:` line.
    pub fn hint(&self) -> &'static str {
        match self {
            ConnectError::InvalidUrl { .. } => {
                "use postgres://user:password@host:5432/db?sslmode=require or key=value form"
            }
            ConnectError::Refused { .. } => {
                "is PostgreSQL running there? check the host and port of --database-url / DATABASE_URL"
            }
            ConnectError::Tls { .. } => {
                "check sslmode and sslrootcert: verify-ca/verify-full need the CA that signed the server's certificate, verify-full also a host name the certificate names"
            }
            ConnectError::Auth { .. } => "check the user name and password",
            ConnectError::NoDatabase { .. } => {
                "create the database (createdb NAME) or fix the database name in the URL"
            }
            ConnectError::Timeout { .. } => {
                "the host did not answer: check the host name, port, firewall and network"
            }
            ConnectError::Other { .. } => "check --database-url / DATABASE_URL",
        }
    }
}

/// The host and port (or socket) a set of options points at, for messages.
fn endpoint(o: &PgConnectOptions) -> String {
    match o.get_socket() {
        Some(s) => format!("{}", s.display()),
        None => format!("{}:{}", o.get_host(), o.get_port()),
    }
}

/// Parses a URL or key=value connection string.
pub fn parse(conn: &str) -> Result<Target, ConnectError> {
    let redacted = redact(conn);
    // A malformed string is named without its parameters: a misspelt one (`passwd=`) may
    // carry a secret that redaction does not know to hide.
    let shown = match redacted.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None if !conn.contains("://") => "(key=value string)".to_string(),
        None => redacted.clone(),
    };
    let invalid = |reason: String| ConnectError::InvalidUrl {
        url: shown.clone(),
        reason,
    };
    let trimmed = conn.trim();
    if trimmed.is_empty() {
        return Err(invalid("it is empty".into()));
    }
    let (base, params) =
        if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
            split_url(trimmed)
        } else if trimmed.contains('=') && !other_scheme(trimmed) {
            // A key=value string, whatever its values hold: `password='a://b'` is a
            // conninfo string with a password (found by the `conninfo` fuzz target, which
            // saw it refused as a URL).
            (String::new(), conninfo_pairs(trimmed).map_err(invalid)?)
        } else {
            return Err(invalid(
                "expected postgres://… or key=value pairs (other engines are not built in)".into(),
            ));
        };
    let mut pooler = None;
    let mut ssl_mode: Option<PgSslMode> = None;
    let mut password = None;
    let mut root_cert = false;
    let mut options = if base.is_empty() {
        PgConnectOptions::new()
    } else {
        base.parse::<PgConnectOptions>()
            .map_err(|e| invalid(redact(&e.to_string())))?
    };
    for (k, v) in params {
        match k.as_str() {
            "pooler" => {
                pooler = Some(match v.as_str() {
                    "transaction" | "pgbouncer" => PoolerMode::Transaction,
                    "none" | "direct" | "session" => PoolerMode::Direct,
                    "auto" => continue,
                    other => {
                        return Err(invalid(format!(
                            "pooler={other:?}: use transaction, none or auto"
                        )))
                    }
                })
            }
            "sslmode" | "ssl-mode" => {
                ssl_mode = Some(v.parse().map_err(|_| {
                    invalid(format!(
                    "sslmode={v:?}: use disable, allow, prefer, require, verify-ca or verify-full"
                ))
                })?)
            }
            "sslrootcert" | "ssl-root-cert" => {
                root_cert = true;
                options = options.ssl_root_cert(&v);
            }
            "sslcert" | "ssl-cert" => options = options.ssl_client_cert(&v),
            "sslkey" | "ssl-key" => options = options.ssl_client_key(&v),
            "host" if v.starts_with('/') => options = options.socket(&v),
            "host" | "hostaddr" => options = options.host(&v),
            "port" => {
                options = options.port(v.parse().map_err(|_| invalid(format!("port {v:?}")))?)
            }
            "dbname" => options = options.database(&v),
            "user" => options = options.username(&v),
            "password" => {
                options = options.password(&v);
                password = Some(v);
            }
            "application_name" => options = options.application_name(&v),
            "connect_timeout" => {}
            "options" => {
                // libpq's `-c name=value` list (also `--name=value`).
                let mut words = v.split_whitespace();
                while let Some(w) = words.next() {
                    let setting = match w {
                        "-c" => words.next().unwrap_or_default(),
                        w if w.starts_with("--") => &w[2..],
                        w if w.starts_with("-c") => &w[2..],
                        _ => {
                            return Err(invalid(format!(
                                "options: expected -c name=value, got {w:?}"
                            )))
                        }
                    };
                    match setting.split_once('=') {
                        Some((name, value)) if !name.is_empty() => {
                            options = options.options([(name, value)])
                        }
                        _ => {
                            return Err(invalid(format!(
                                "options: expected name=value, got {setting:?}"
                            )))
                        }
                    }
                }
            }
            other => {
                // Never echo the value: a misspelt parameter may carry a secret.
                return Err(invalid(format!("unknown parameter {other:?}")));
            }
        }
    }
    let mut mode = ssl_mode.unwrap_or(PgSslMode::Prefer);
    // libpq: "require" with a root certificate verifies the chain.
    if matches!(mode, PgSslMode::Require) && root_cert {
        mode = PgSslMode::VerifyCa;
    }
    options = options.ssl_mode(mode);
    if password.is_none() && !base.is_empty() {
        password = url_password(&base);
    }
    let (pooler, pooler_source) = match pooler {
        Some(p) => (p, PoolerSource::Explicit),
        None if looks_like_pooler(&options) => (PoolerMode::Transaction, PoolerSource::Detected),
        None => (PoolerMode::Direct, PoolerSource::Default),
    };
    if pooler == PoolerMode::Transaction {
        // Unnamed statements only, and no startup parameter PgBouncer refuses.
        options = options.statement_cache_capacity(0).extra_float_digits(None);
    }
    Ok(Target {
        options: options.disable_statement_logging(),
        pooler,
        pooler_source,
        redacted,
        password,
    })
}

/// Whether `s` starts as a URL of some scheme (`mysql://…`): refused with the engines'
/// message rather than read as key=value pairs.
fn other_scheme(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// The percent-decoded password of a URL's userinfo.
fn url_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, pass) = userinfo.split_once(':')?;
    Some(percent_decode(pass))
}

/// Well-known transaction-pooler endpoints. A session-mode pooler taken for a transaction
/// one only costs speed, never correctness.
fn looks_like_pooler(o: &PgConnectOptions) -> bool {
    if o.get_socket().is_some() {
        return false;
    }
    let host = o.get_host().to_ascii_lowercase();
    o.get_port() == 6432
        || o.get_port() == 6543
        || host.contains(".pooler.supabase.com")
        || host.contains("-pooler.")
        || host.contains(".proxy-") && host.ends_with(".rds.amazonaws.com")
}

/// Splits a URL into the part sqlx parses and the query pairs Docket handles itself (all of
/// them, so that unknown ones are refused instead of logged with their values).
fn split_url(url: &str) -> (String, Vec<(String, String)>) {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b.to_string(), q),
        None => (url.to_string(), ""),
    };
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    (base, pairs)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses libpq's key=value form: values may be single-quoted, with `\'` and `\\` escapes.
pub(crate) fn conninfo_pairs(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!("missing \"=\" after {key:?}"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '\'' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(format!("unterminated quoted value for {key:?}"));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

/// Classifies a failed connection attempt.
pub fn classify(target: &Target, e: sqlx::Error) -> ConnectError {
    let endpoint = endpoint(&target.options);
    let cause = redact(&e.to_string());
    match &e {
        sqlx::Error::Tls(t) => ConnectError::Tls {
            endpoint,
            cause: redact(&tls_cause(t.as_ref())),
        },
        // rustls reports a failed certificate check as an I/O error during the handshake.
        sqlx::Error::Io(io)
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            ConnectError::Tls {
                endpoint,
                cause: redact(&io.to_string()),
            }
        }
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            ConnectError::Refused { endpoint }
        }
        sqlx::Error::Database(d) => match d.code().as_deref() {
            Some("3D000") => ConnectError::NoDatabase {
                endpoint,
                database: target
                    .options
                    .get_database()
                    .unwrap_or(target.options.get_username())
                    .to_string(),
            },
            Some("28P01") | Some("28000") => ConnectError::Auth {
                endpoint,
                user: target.options.get_username().to_string(),
                cause: redact(d.message()),
            },
            _ => ConnectError::Other { endpoint, cause },
        },
        _ => ConnectError::Other { endpoint, cause },
    }
}

/// The innermost cause of a TLS failure (rustls' reason, e.g. "invalid peer certificate:
/// UnknownIssuer" or "NotValidForName").
fn tls_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if !msg.contains(&m) {
            msg = format!("{msg}: {m}");
        }
        cur = s.source();
    }
    msg
}

/// Opens one connection now, so a bad URL, a refused port or a TLS failure is reported at
/// once with its cause (a pool would retry until its acquire time-out).
pub async fn check(target: &Target, timeout: Duration) -> Result<(), ConnectError> {
    match tokio::time::timeout(timeout, PgConnection::connect_with(&target.options)).await {
        Ok(Ok(c)) => {
            let _ = c.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(classify(target, e)),
        Err(_) => Err(ConnectError::Timeout {
            endpoint: endpoint(&target.options),
            secs: timeout.as_secs(),
        }),
    }
}

/// A pool of at most `max` connections on `target`, tagged `application_name = app` unless
/// the string names one. The first connection is made (and checked) before this returns.
///
/// Without an explicit `pooler=`, a PgBouncer Docket did not recognise from its endpoint is
/// recognised by its refusal of a startup parameter it does not know (`extra_float_digits`,
/// which sqlx sends): `target` is switched to [`PoolerMode::Transaction`] (source
/// [`PoolerSource::Detected`]), the log says so once, and the connection is made again.
pub async fn pool(target: &mut Target, app: &str, max: u32) -> Result<PgPool, ConnectError> {
    let named = |t: &Target| {
        let mut t = t.clone();
        if t.options.get_application_name().is_none() {
            t.options = t.options.application_name(app);
        }
        t
    };
    let mut first = named(target);
    match check(&first, Duration::from_secs(10)).await {
        Err(e)
            if target.pooler_source != PoolerSource::Explicit && refused_startup_parameter(&e) =>
        {
            tracing::warn!(
                endpoint = %endpoint(&target.options),
                "the server refused a startup parameter as PgBouncer does: switched to \
                 pooler=transaction — every statement in its own transaction, no named \
                 prepared statements. Add pooler=transaction to the connection string to start \
                 that way"
            );
            target.pooler = PoolerMode::Transaction;
            target.pooler_source = PoolerSource::Detected;
            target.options = target
                .options
                .clone()
                .statement_cache_capacity(0)
                .extra_float_digits(None);
            first = named(target);
            check(&first, Duration::from_secs(10)).await?;
        }
        other => other?,
    }
    let target = first;
    PgPoolOptions::new()
        .max_connections(max.max(1))
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(target.options.clone())
        .await
        .map_err(|e| classify(&target, e))
}

/// PgBouncer's answer to a startup parameter it does not pass on (unless listed in its
/// `ignore_startup_parameters`).
fn refused_startup_parameter(e: &ConnectError) -> bool {
    matches!(e, ConnectError::Other { cause, .. }
        if cause.contains("unsupported startup parameter: extra_float_digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `conninfo` fuzz target: "://" inside a key=value string's password made
    /// the whole string a URL of no known scheme, refused; another scheme's URL still is.
    #[test]
    fn a_conninfo_password_may_hold_a_url() {
        let t = parse("host=db user=app password='postgres://x' dbname=jobs").unwrap();
        assert!(!t.redacted.contains("postgres://x"), "{}", t.redacted);
        let e = parse("mysql://root:pw@h/db?a=b").err().unwrap().to_string();
        assert!(e.contains("other engines are not built in"), "{e}");
        assert!(!e.contains("pw@"), "{e}");
    }

    #[test]
    fn conninfo_with_quotes_and_escapes() {
        let p = conninfo_pairs(r"host=db port=5433 password='a b\'c' user = app").unwrap();
        assert_eq!(
            p,
            vec![
                ("host".into(), "db".into()),
                ("port".into(), "5433".into()),
                ("password".into(), "a b'c".into()),
                ("user".into(), "app".into()),
            ]
        );
        assert!(conninfo_pairs("host").is_err());
        assert!(conninfo_pairs("password='open").is_err());
    }

    #[test]
    fn pooler_mode_explicit_detected_default() {
        let t = parse("postgres://u@h:5432/db?pooler=transaction").unwrap();
        assert_eq!(
            (t.pooler, t.pooler_source),
            (PoolerMode::Transaction, PoolerSource::Explicit)
        );
        let t = parse("postgres://u@h:6432/db").unwrap();
        assert_eq!(
            (t.pooler, t.pooler_source),
            (PoolerMode::Transaction, PoolerSource::Detected)
        );
        let t = parse("postgres://u@h:6432/db?pooler=none").unwrap();
        assert_eq!(
            (t.pooler, t.pooler_source),
            (PoolerMode::Direct, PoolerSource::Explicit)
        );
        let t = parse("postgres://u@aws-0-eu.pooler.supabase.com:5432/db").unwrap();
        assert_eq!(t.pooler, PoolerMode::Transaction);
        let t = parse("host=ep-cool-1-pooler.eu.aws.neon.tech dbname=x").unwrap();
        assert_eq!(t.pooler, PoolerMode::Transaction);
        let t = parse("postgres://u@h/db").unwrap();
        assert_eq!(
            (t.pooler, t.pooler_source),
            (PoolerMode::Direct, PoolerSource::Default)
        );
    }

    #[test]
    fn ssl_modes_follow_libpq() {
        let mode = |s: &str| parse(s).unwrap().options.get_ssl_mode();
        assert!(matches!(mode("postgres://h/db"), PgSslMode::Prefer));
        assert!(matches!(
            mode("postgres://h/db?sslmode=require"),
            PgSslMode::Require
        ));
        assert!(matches!(
            mode("postgres://h/db?sslmode=require&sslrootcert=/ca.pem"),
            PgSslMode::VerifyCa
        ));
        assert!(matches!(
            mode("host=h sslmode=verify-full sslrootcert=/ca.pem"),
            PgSslMode::VerifyFull
        ));
        assert!(parse("postgres://h/db?sslmode=maybe").is_err());
    }

    #[test]
    fn bad_strings_are_refused_without_echoing_secrets() {
        for bad in [
            "",
            "   ",
            "mysql://root@h/db",
            "postgres://u:hunter2@h/db?pasword=hunter2",
            "host=h password='hunter2",
            "postgres://u:hunter2@h/db?port=x",
        ] {
            let e = parse(bad).expect_err(bad).to_string();
            assert!(!e.contains("hunter2"), "{bad:?} -> {e}");
        }
    }

    #[test]
    fn libpq_options_become_startup_settings() {
        let t = parse("postgres://h/db?options=-c%20synchronous_commit%3Don%20-c%20work_mem%3D8MB")
            .unwrap();
        assert_eq!(
            t.options.get_options(),
            Some("-c synchronous_commit=on -c work_mem=8MB")
        );
        assert!(parse("postgres://h/db?options=-x").is_err());
    }

    #[test]
    fn password_kept_for_scrubbing_and_never_debug_printed() {
        for (s, want) in [
            ("postgres://u:p%40ss@h/db", Some("p@ss")),
            ("postgres://u@h/db?password=qwerty", Some("qwerty")),
            ("host=h password='a b'", Some("a b")),
            ("postgres://u@h/db", None),
        ] {
            let t = parse(s).unwrap();
            assert_eq!(t.password(), want, "{s}");
            if let Some(p) = want {
                assert!(!format!("{t:?}").contains(p), "{t:?}");
            }
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%2Ftmp%2Fca.pem"), "/tmp/ca.pem");
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert_eq!(percent_decode("50%"), "50%");
    }
}
