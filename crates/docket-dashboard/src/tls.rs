//! HTTPS without a proxy: `docket dashboard --tls-cert FILE --tls-key FILE`.
//!
//! A dashboard reached beyond loopback carries a login token or a password; over plain HTTP
//! both cross the network in the clear. A TLS-terminating proxy is still the usual setup
//! (docs/deployment.md), but a team without one must not be left with plain HTTP. rustls with
//! `ring` (the provider sqlx already uses here: a second one would leave sqlx without a
//! default).
//!
//! Written by hand rather than with `axum-server`: that crate pulls in its own rustls stack
//! and provider features; what the dashboard needs is an [`axum::serve::Listener`] whose
//! handshakes run beside the accept loop (so a client that stalls its handshake holds one
//! bounded slot for at most [`HANDSHAKE_TIMEOUT`], never the listener).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; more wait in the kernel's accept queue.
const MAX_HANDSHAKES: usize = 256;

/// A certificate or key that cannot be used, named by which file and why (never its content).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or parsed.
    #[error("--tls-cert {path}: {reason}")]
    Cert {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The key file cannot be read or parsed.
    #[error("--tls-key {path}: {reason}")]
    Key {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The key does not belong to the certificate (why).
    #[error("the certificate and key do not go together: {0}")]
    Pair(String),
}

/// The server configuration from a PEM certificate chain and a PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let cert_err = |reason: String| TlsError::Cert {
        path: cert.display().to_string(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if chain.is_empty() {
        return Err(cert_err("no PEM certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Pair(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Pair(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A TCP listener that hands axum finished TLS connections.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp` and handshakes with `config` in the background (the task ends when
    /// this listener is dropped).
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (stream, peer) = tokio::select! {
                    r = tcp.accept() => match r {
                        Ok(c) => c,
                        Err(e) => {
                            // Out of descriptors and the like: pause rather than spin.
                            tracing::warn!(error = %e, "dashboard: accept failed");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        }
                    },
                    _ = tx.closed() => return,
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "dashboard: TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "dashboard: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task only ends when this listener is dropped; never reached while
            // serving, and axum's accept must not return without a connection.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
