//! Connecting to NATS with credentials that stay put: the server URL may name a user, but a
//! password, token or key is read from a file or the environment, never from argv; every
//! error and log line passes through [`docket_core::redact::redact`], and the relay starts
//! no child process.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::NatsError;

/// `s` with every secret of a NATS URL hidden: a password (`user:***@`, as for database
/// URLs) and a token — NATS reads userinfo without a colon as a token (`nats://***@host`),
/// where a database URL would hold a user name there.
pub fn redact(s: &str) -> String {
    // Piece by piece at commas: a cluster's URL list is comma-separated, and a password
    // may not run from one URL into the next.
    s.split(',')
        .map(|piece| redact_tokens(&docket_core::redact::redact(piece)))
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_tokens(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let scheme = head[..i]
            .rsplit(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or("");
        let seg_end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        let seg = &tail[..seg_end];
        let nats = matches!(
            scheme.to_ascii_lowercase().as_str(),
            "nats" | "tls" | "ws" | "wss"
        );
        match seg.rfind('@') {
            Some(at) if nats && !seg[..at].contains(':') => {
                out.push_str("***");
                rest = &tail[at..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// How to reach and authenticate to NATS. `Debug` prints no secret.
#[derive(Clone, Default)]
pub struct NatsOptions {
    /// Server URLs (`nats://host:4222`, `tls://…`; several for a cluster), comma-separated.
    pub url: String,
    /// A `.creds` file (JWT and NKey seed).
    pub creds_file: Option<PathBuf>,
    /// A file holding an NKey seed (`SU…`).
    pub nkey_file: Option<PathBuf>,
    /// A token (from `DOCKET_NATS_TOKEN` or a file, never a flag).
    pub token: Option<String>,
    /// A user and password (the password from `DOCKET_NATS_PASSWORD` or a file).
    pub user_password: Option<(String, String)>,
    /// Require TLS even for a `nats://` URL.
    pub require_tls: bool,
    /// Extra root certificates (PEM) to trust.
    pub ca_file: Option<PathBuf>,
    /// The connection's name, as the server's monitoring shows it.
    pub name: Option<String>,
}

impl std::fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsOptions")
            .field("url", &redact(&self.url))
            .field("creds_file", &self.creds_file)
            .field("nkey_file", &self.nkey_file)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "user",
                &self.user_password.as_ref().map(|(u, _)| u.as_str()),
            )
            .field("require_tls", &self.require_tls)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl NatsOptions {
    /// Options for `url` and nothing else.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// The URL as it may be printed.
    pub fn display_url(&self) -> String {
        redact(&self.url)
    }

    /// Connects. Gives up after `timeout` when no server answers (the client reconnects on
    /// its own once connected).
    pub async fn connect(&self, timeout: Duration) -> Result<async_nats::Client, NatsError> {
        let mut o = async_nats::ConnectOptions::new()
            .connection_timeout(timeout)
            .require_tls(self.require_tls)
            .name(self.name.clone().unwrap_or_else(|| "docket".into()));
        if let Some(p) = &self.creds_file {
            o = o
                .credentials_file(p)
                .await
                .map_err(|e| NatsError::Config(format!("creds file {}: {e}", p.display())))?;
        }
        if let Some(p) = &self.nkey_file {
            let seed = std::fs::read_to_string(p)
                .map_err(|e| NatsError::Config(format!("nkey file {}: {e}", p.display())))?;
            o = o.nkey(seed.trim().to_string());
        }
        if let Some(t) = &self.token {
            o = o.token(t.clone());
        }
        if let Some((u, p)) = &self.user_password {
            o = o.user_and_password(u.clone(), p.clone());
        }
        if let Some(p) = &self.ca_file {
            o = o.add_root_certificates(p.clone());
        }
        let addrs: Vec<async_nats::ServerAddr> = self
            .url
            .split(',')
            .map(|u| {
                u.trim()
                    .parse()
                    .map_err(|e| NatsError::Config(format!("NATS URL {}: {e}", redact(u.trim()))))
            })
            .collect::<Result<_, _>>()?;
        if addrs.is_empty() {
            return Err(NatsError::Config("no NATS URL given".into()));
        }
        o.connect(addrs)
            .await
            .map_err(|e| NatsError::Unavailable(redact(&e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_passwords_are_hidden() {
        assert_eq!(redact("nats://s3cret@host:4222"), "nats://***@host:4222");
        assert_eq!(
            redact("nats://u:pw@h:1,tls://tok@h2"),
            "nats://u:***@h:1,tls://***@h2"
        );
        assert_eq!(redact("nats://host:4222"), "nats://host:4222");
        assert_eq!(
            redact("error at nats://t@h: refused"),
            "error at nats://***@h: refused"
        );
        let o = NatsOptions {
            token: Some("tok".into()),
            user_password: Some(("u".into(), "pw".into())),
            ..NatsOptions::new("nats://x:y@h")
        };
        let d = format!("{o:?}");
        assert!(
            !d.contains("tok\"") && !d.contains("pw") && !d.contains(":y@"),
            "{d}"
        );
    }
}
