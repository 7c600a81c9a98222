//! Connection strings: the PostgreSQL parser (URLs and key=value conninfo) takes anything
//! without panicking, and no password survives into the text Docket keeps for messages —
//! the redacted string of a parsed target, the error that refuses a string, or `redact`
//! applied to a string of any engine.

/// The body of the `conninfo` target. The whole input is parsed as it is; then, when it has
/// a first line, that line is taken as a password (4 or more visible ASCII characters) and
/// placed where users place one, in each form Docket reads, with the rest of the input
/// shaping the host.
pub fn conninfo(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = docket_postgres::connect::parse(text);
    let _ = docket_core::redact::redact(text);
    let Some((password, rest)) = text.split_once('\n') else {
        return;
    };
    if password.len() < 4 || !password.bytes().all(|b| b.is_ascii_graphic()) {
        return;
    }
    let host: String = rest
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(40)
        .collect();
    let host = if host.is_empty() { "db".into() } else { host };
    let scheme = ["postgres", "postgresql", "mysql", "mariadb"][rest.len() % 4];
    let filler = "Q".repeat(password.len());
    let real = forms(scheme, &host, password);
    let reference = forms(scheme, &host, &filler);
    for ((conn, written), (plain, _)) in real.iter().zip(&reference) {
        check_hidden(conn, plain, password, written);
    }
}

/// The password placed in each form Docket reads, with the text it is written as there.
fn forms(scheme: &str, host: &str, password: &str) -> Vec<(String, String)> {
    let encoded: String = form_urlencoded::byte_serialize(password.as_bytes()).collect();
    let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
    let unquoted = if password.contains(['\'', '\\']) {
        format!("host={host} user=app")
    } else {
        format!("host={host} password={password} user=app")
    };
    vec![
        (
            format!("{scheme}://app:{password}@{host}:5432/jobs?sslmode=disable"),
            password.to_string(),
        ),
        (
            format!("{scheme}://app:{encoded}@{host}/jobs"),
            encoded.clone(),
        ),
        (
            format!("{scheme}://app@{host}/jobs?application_name=x&password={encoded}"),
            encoded,
        ),
        (
            format!("host={host} user=app password='{quoted}' dbname=jobs"),
            quoted,
        ),
        (unquoted, password.to_string()),
    ]
}

/// `conn` holds the password as `written`; neither may appear in what Docket would show of
/// `conn` more often than in what it shows of `plain`, the same string with a filler in the
/// password's place (so the host, or a word of Docket's own messages such as "postgres",
/// does not count as a leak).
fn check_hidden(conn: &str, plain: &str, password: &str, written: &str) {
    let reference = shown(plain);
    for (s, r) in shown(conn).iter().zip(&reference) {
        for secret in [password, written] {
            assert!(
                s.matches(secret).count() <= r.matches(secret).count(),
                "the password {password:?} of {conn:?} is shown in {s:?}"
            );
        }
    }
}

/// What Docket shows of a connection string: the redacted text, and the parsed target's
/// redacted form and `Debug`, or the error refusing it.
fn shown(conn: &str) -> Vec<String> {
    let mut out = vec![docket_core::redact::redact(conn)];
    match docket_postgres::connect::parse(conn) {
        Ok(target) => {
            out.push(target.redacted.clone());
            out.push(format!("{target:?}"));
        }
        Err(e) => {
            out.push(e.to_string());
            out.push(String::new());
        }
    }
    out
}
