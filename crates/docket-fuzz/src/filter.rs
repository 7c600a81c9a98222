//! The job search as the dashboard's query string and `docket jobs list` give it: any query
//! string is a validated search or an error naming the field, and a JSON-path filter
//! (`args.user.id = 42`) prints as text that parses back to the same filter.

use docket_core::{FieldEq, JobQuery};

/// The body of the `job_filter` target: the input as a URL query string, and on its own as a
/// field filter.
pub fn job_filter(data: &[u8]) {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(data)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    if let Ok(q) = JobQuery::from_fields(get) {
        assert!(q.validate().is_ok(), "{q:?} passed from_fields only");
        if let Some(f) = &q.field {
            round_trip(f);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(f) = FieldEq::parse(text) {
            round_trip(&f);
        }
    }
}

fn round_trip(f: &FieldEq) {
    let shown = f.display();
    let again = FieldEq::parse(&shown);
    assert_eq!(again.as_ref().ok(), Some(f), "{f:?} shown as {shown:?}");
}
