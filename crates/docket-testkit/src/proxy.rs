//! A TCP proxy in front of PostgreSQL that can cut the network: after [`Proxy::cut`], every
//! connection through it goes silent in both directions while its sockets stay open — what a
//! worker sees in a network partition (no error, no reset; calls just hang) — and new
//! connections hang too. [`Proxy::heal`] closes the frozen connections and lets new ones
//! through again.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A cuttable proxy.
pub struct Proxy {
    /// The local port to connect to instead of the server's.
    pub port: u16,
    /// The address it listens on (127.0.0.1, or the host end of a [`crate::netns::Link`]).
    pub ip: std::net::IpAddr,
    state: watch::Sender<(u64, bool)>,
    task: tokio::task::JoinHandle<()>,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<(u64, bool)>,
    epoch: u64,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let frozen = |s: &(u64, bool)| s.0 != epoch || s.1;
        if frozen(&state.borrow()) {
            // Silent until healed (the epoch moves on), then closed.
            let _ = state.wait_for(|s| s.0 > epoch && !s.1).await;
            return;
        }
        tokio::select! {
            n = from.read(&mut buf) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if frozen(&state.borrow()) {
                        continue;
                    }
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            r = state.changed() => if r.is_err() { return },
        }
    }
}

/// The port of a `scheme://user@host:port/…` URL.
fn port_of(url: &str) -> u16 {
    url.rsplit_once(':')
        .and_then(|(_, p)| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("a port in the database URL")
}

impl Proxy {
    /// Starts a proxy to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        Proxy::start_on([127, 0, 0, 1].into(), target).await
    }

    /// Starts a proxy to `target` listening on `ip` (e.g. the host end of a network
    /// namespace's link, for a worker inside it).
    pub async fn start_on(ip: std::net::IpAddr, target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = watch::channel((0u64, false));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = rx.clone();
                tokio::spawn(async move {
                    let epoch = state.borrow().0;
                    if state.borrow().1 {
                        // Accepted while cut: hold the socket silently until healed.
                        let mut s = state.clone();
                        let _ = s.wait_for(|s| s.0 > epoch && !s.1).await;
                        drop(client);
                        return;
                    }
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(
                        pump(cr, sw, state.clone(), epoch),
                        pump(sr, cw, state.clone(), epoch)
                    );
                });
            }
        });
        Proxy {
            port,
            ip,
            state: tx,
            task,
        }
    }

    /// Starts a proxy in front of the server of `url` (on 127.0.0.1).
    pub async fn in_front_of(url: &str) -> Proxy {
        Proxy::start(([127, 0, 0, 1], port_of(url)).into()).await
    }

    /// Starts a proxy on `ip` in front of the server of `url` (on 127.0.0.1).
    pub async fn on_in_front_of(ip: std::net::IpAddr, url: &str) -> Proxy {
        Proxy::start_on(ip, ([127, 0, 0, 1], port_of(url)).into()).await
    }

    /// Partitions: every connection goes silent, new ones hang.
    pub fn cut(&self) {
        self.state.send_modify(|s| s.1 = true);
    }

    /// Heals: frozen connections are closed, new ones are forwarded.
    pub fn heal(&self) {
        self.state.send_modify(|s| {
            s.0 += 1;
            s.1 = false;
        });
    }

    /// `url` with its host and port replaced by this proxy.
    pub fn url(&self, url: &str) -> String {
        let (scheme_user, rest) = url.split_once('@').expect("url with user@host");
        let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
        format!("{scheme_user}@{}:{}{path}", self.ip, self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
