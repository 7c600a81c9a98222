//! Who may use the dashboard, and proof that an action came from its own pages.
//!
//! * **Authentication**: a bearer token (header `Authorization: Bearer T`, or the cookie the
//!   `/login` form sets), or HTTP basic auth, or nothing — which [`crate::serve`] allows on
//!   loopback only. Secrets are compared in constant time and never logged.
//! * **CSRF**: every form carries the process's random token; an action without it, or from
//!   another site (`Sec-Fetch-Site: cross-site`, or an `Origin` that is not this host), is
//!   refused before anything is written.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use docket_core::Store;
use maud::html;
use subtle::ConstantTimeEq;

use crate::layout;
use crate::App;

/// How requests authenticate.
#[derive(Clone)]
pub enum Auth {
    /// Anyone who can connect (loopback only, see [`crate::check_exposure`]).
    Open,
    /// A shared secret.
    Token(String),
    /// HTTP basic auth with one user.
    Basic {
        /// The one user name.
        user: String,
        /// Its password (compared in constant time).
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.write_str(match self {
            Auth::Open => "Open",
            Auth::Token(_) => "Token(..)",
            Auth::Basic { .. } => "Basic(..)",
        })
    }
}

/// The cookie the login form sets.
pub const COOKIE: &str = "docket_token";

fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// 32 random bytes, hex.
pub fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

impl Auth {
    /// The actor a request authenticates as, or `None`.
    pub fn actor(&self, headers: &HeaderMap) -> Option<String> {
        let authz = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match self {
            Auth::Open => Some("local".into()),
            Auth::Token(t) => {
                let given = authz
                    .and_then(|a| a.strip_prefix("Bearer "))
                    .map(str::to_string)
                    .or_else(|| cookie(headers, COOKIE))?;
                same(&given, t).then(|| "token".into())
            }
            Auth::Basic { user, password } => {
                let b64 = authz?.strip_prefix("Basic ")?;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()?;
                let raw = String::from_utf8(raw).ok()?;
                let (u, p) = raw.split_once(':')?;
                // Both compared, whatever the first says, so timing tells nothing.
                let ok = same(u, user) & same(p, password);
                ok.then(|| u.to_string())
            }
        }
    }
}

/// The authenticated actor, put in the request's extensions by [`guard`].
#[derive(Debug, Clone)]
pub struct Actor(pub String);

/// Lets a request through when it authenticates; otherwise a 401 (basic auth asks the
/// browser for credentials; a token deployment shows the login form).
pub async fn guard<S: Store>(
    State(app): State<Arc<App<S>>>,
    mut req: Request,
    next: Next,
) -> Response {
    if !host_allowed(&app.opts, req.headers()) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this dashboard does not answer to that host name (see --allowed-host)",
        )
            .into_response();
    }
    let path = req.uri().path().to_string();
    // Exactly the login page and the assets: not any path that merely ends in /login.
    let open_path = path == app.href("/login") || path.starts_with(&app.href("/assets/"));
    match app.opts.auth.actor(req.headers()) {
        Some(actor) => {
            req.extensions_mut().insert(Actor(actor));
            next.run(req).await
        }
        None if open_path => {
            req.extensions_mut().insert(Actor("anonymous".into()));
            next.run(req).await
        }
        None => match app.opts.auth {
            Auth::Basic { .. } => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Basic realm=\"docket\"")],
                "authentication required",
            )
                .into_response(),
            _ => Redirect::to(&app.href("/login")).into_response(),
        },
    }
}

/// The host name of a `Host` header value: without its port, `[::1]` as `::1`, lower case.
fn host_name(value: &str) -> String {
    let v = value.trim();
    let name = if let Some(rest) = v.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        v.rsplit_once(':').map_or(v, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                v
            }
        })
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether the request's `Host` is one the dashboard answers to (see
/// [`crate::Options::allowed_hosts`]). A request without `Host` (HTTP/1.0) is refused while
/// the list applies.
pub(crate) fn host_allowed(opts: &crate::Options, headers: &HeaderMap) -> bool {
    let loopback = ["localhost", "127.0.0.1", "::1"];
    if opts.allowed_hosts.is_empty() && !matches!(opts.auth, Auth::Open) {
        return true;
    }
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = host_name(host);
    if opts.allowed_hosts.is_empty() {
        return loopback.contains(&name.as_str());
    }
    opts.allowed_hosts
        .iter()
        .any(|a| host_name(a) == name || (a == "loopback" && loopback.contains(&name.as_str())))
}

/// Refuses an action that does not carry this process's CSRF token or comes from another
/// site.
pub fn check_csrf<S: Store>(
    app: &App<S>,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Result<(), Box<Response>> {
    let refuse = |why: &str| {
        Err(Box::new(
            (StatusCode::FORBIDDEN, format!("action refused: {why}")).into_response(),
        ))
    };
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|s| s == "cross-site" || s == "same-site")
    {
        return refuse("it came from another site");
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let origin_host = origin.split("://").nth(1);
        if origin != "null" && (host.is_none() || origin_host != host) {
            return refuse("its Origin is not this dashboard");
        }
    }
    match token {
        Some(t) if same(t, &app.csrf) => Ok(()),
        _ => refuse("missing or wrong CSRF token (reload the page)"),
    }
}

/// The token login form.
pub async fn login_page<S: Store>(State(app): State<Arc<App<S>>>) -> Response {
    let body = html! {
        h1 { "Sign in" }
        form method="post" action=(app.href("/login")) class="login" {
            label { "Token " input type="password" name="token" autocomplete="current-password"; }
            button type="submit" { "Sign in" }
        }
    };
    layout::page(&app, "Sign in", "", body, false).into_response()
}

/// Checks the token and sets the cookie (HttpOnly, SameSite=Strict, scoped to the base path).
pub async fn login<S: Store>(
    State(app): State<Arc<App<S>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let token = form_urlencoded::parse(body.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let ok = matches!(&app.opts.auth, Auth::Token(t) if same(&token, t));
    if !ok {
        return (StatusCode::UNAUTHORIZED, "wrong token").into_response();
    }
    let path = if app.opts.base_path.is_empty() {
        "/".to_string()
    } else {
        app.opts.base_path.clone()
    };
    // The token is hex or whatever the operator chose; a cookie value cannot hold ';' or
    // spaces, and such a token could not be set this way.
    if token
        .bytes()
        .any(|b| b == b';' || b == b',' || b.is_ascii_whitespace())
    {
        return (
            StatusCode::BAD_REQUEST,
            "this token cannot be kept in a cookie; send it as Authorization: Bearer",
        )
            .into_response();
    }
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let secure = if app.opts.secure_cookie || https {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{COOKIE}={token}; Path={path}; HttpOnly; SameSite=Strict{secure}");
    ([(header::SET_COOKIE, cookie)], Redirect::to(&app.href("/"))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_host_names_are_answered() {
        let with_host = |h: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, h.parse().unwrap());
            m
        };
        let open = crate::Options::default();
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8080",
            "localhost.",
        ] {
            assert!(host_allowed(&open, &with_host(ok)), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil",
            "[::2]",
        ] {
            assert!(!host_allowed(&open, &with_host(bad)), "{bad}");
        }
        assert!(!host_allowed(&open, &HeaderMap::new()), "no Host at all");
        let named = crate::Options {
            allowed_hosts: vec!["jobs.internal".into(), "loopback".into()],
            ..Default::default()
        };
        assert!(host_allowed(&named, &with_host("jobs.internal:443")));
        assert!(host_allowed(&named, &with_host("127.0.0.1")));
        assert!(!host_allowed(&named, &with_host("other.internal")));
        let token = crate::Options {
            auth: Auth::Token("t".into()),
            ..Default::default()
        };
        assert!(
            host_allowed(&token, &with_host("any.example")),
            "authenticated: any"
        );
    }

    #[test]
    fn basic_and_token_auth() {
        let mut h = HeaderMap::new();
        let basic = Auth::Basic {
            user: "ops".into(),
            password: "s3cret".into(),
        };
        assert_eq!(basic.actor(&h), None);
        let enc = base64::engine::general_purpose::STANDARD.encode("ops:s3cret");
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {enc}").parse().unwrap(),
        );
        assert_eq!(basic.actor(&h).as_deref(), Some("ops"));
        let enc = base64::engine::general_purpose::STANDARD.encode("ops:wrong");
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {enc}").parse().unwrap(),
        );
        assert_eq!(basic.actor(&h), None);

        let token = Auth::Token("abc".into());
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "x=1; docket_token=abc".parse().unwrap());
        assert_eq!(token.actor(&h).as_deref(), Some("token"));
        h.insert(header::COOKIE, "docket_token=abd".parse().unwrap());
        assert_eq!(token.actor(&h), None);
        assert_eq!(
            format!("{token:?}"),
            "Token(..)",
            "Debug never shows the secret"
        );
    }
}
