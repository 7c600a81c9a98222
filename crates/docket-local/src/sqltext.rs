//! Placeholders in an engine's SQL text: `?N` (the Nth argument of the rules' list, used
//! as often and in whatever order the dialect needs) or plain `?` (the next argument).
//! SQLite reads both itself; a server that binds strictly by position (MariaDB / MySQL)
//! gets the text with every placeholder as `?` and the arguments repeated and reordered
//! to match, a list argument expanded to one placeholder per element.
//!
//! Written by hand: sqlx has no named or numbered parameters for MySQL (its issue #875),
//! and the alternative — one Rust bind list per dialect — is what put the same rules in two
//! places.

use docket_core::Result;

use crate::exec::{corrupt, Arg};

/// A statement's text split at its placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    /// The text between placeholders (one more than `refs`).
    parts: Vec<String>,
    /// The argument (0-based) each placeholder stands for.
    refs: Vec<usize>,
}

impl Placeholders {
    /// Splits `sql`, skipping quoted strings, quoted names and comments. Mixing `?N` and
    /// plain `?` in one statement is refused (which argument a plain one means would be
    /// a guess).
    pub fn parse(sql: &str) -> Result<Self> {
        let b = sql.as_bytes();
        let (mut parts, mut refs) = (Vec::new(), Vec::new());
        let (mut start, mut i, mut next) = (0, 0, 0);
        let (mut numbered, mut plain) = (false, false);
        while i < b.len() {
            match b[i] {
                q @ (b'\'' | b'"' | b'`') => {
                    i += 1;
                    while i < b.len() && b[i] != q {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                b'-' if b.get(i + 1) == Some(&b'-') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    i += 2;
                    while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                        i += 1;
                    }
                    i += 2;
                }
                b'?' => {
                    parts.push(sql[start..i].to_string());
                    let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if digits > 0 {
                        let n: usize = sql[i + 1..i + 1 + digits]
                            .parse()
                            .map_err(|_| corrupt(format!("bad placeholder in {sql:?}")))?;
                        if n == 0 {
                            return Err(corrupt("placeholders count from ?1"));
                        }
                        refs.push(n - 1);
                        numbered = true;
                    } else {
                        refs.push(next);
                        next += 1;
                        plain = true;
                    }
                    i += 1 + digits;
                    start = i;
                }
                _ => i += 1,
            }
        }
        if numbered && plain {
            return Err(corrupt(
                "a statement mixes ?N and plain ? placeholders".to_string(),
            ));
        }
        parts.push(sql[start.min(sql.len())..].to_string());
        Ok(Placeholders { parts, refs })
    }

    /// The text with one `?` per bound value, and the values in binding order. A list
    /// argument becomes one `?` per element. An empty list of names becomes `''`, which no
    /// name or key is (validation refuses empty ones), so `IN` matches nothing and `NOT IN`
    /// leaves nothing out; an empty list of ids becomes `NULL` (`IN` matches nothing; write
    /// `NOT IN` only over id lists that cannot be empty).
    pub fn expand<'a>(&self, args: &[Arg<'a>]) -> Result<(String, Vec<Arg<'a>>)> {
        let mut text = String::with_capacity(self.parts.iter().map(|p| p.len() + 2).sum());
        let mut out = Vec::with_capacity(self.refs.len());
        for (part, r) in self.parts.iter().zip(&self.refs) {
            text.push_str(part);
            let arg = args.get(*r).ok_or_else(|| {
                corrupt(format!(
                    "placeholder ?{} has no argument ({} given)",
                    r + 1,
                    args.len()
                ))
            })?;
            let n = match arg {
                Arg::Ints(v) => {
                    out.extend(v.iter().map(|i| Arg::Int(*i)));
                    v.len()
                }
                Arg::Texts([]) => {
                    out.push(Arg::Text(""));
                    1
                }
                Arg::Texts(v) => {
                    out.extend(v.iter().map(|s| Arg::Text(s)));
                    v.len()
                }
                a => {
                    out.push(*a);
                    1
                }
            };
            if n == 0 {
                text.push_str("NULL");
            } else {
                for k in 0..n {
                    text.push_str(if k == 0 { "?" } else { ", ?" });
                }
            }
        }
        text.push_str(self.parts.last().map_or("", |s| s.as_str()));
        Ok((text, out))
    }
}

/// A list argument as one JSON array (SQLite's form: `json_each(?N)`).
pub fn json_list(a: &Arg<'_>) -> Option<String> {
    match a {
        Arg::Ints(v) => Some(serde_json::to_string(v).unwrap_or_else(|_| "[]".into())),
        Arg::Texts(v) => Some(serde_json::to_string(v).unwrap_or_else(|_| "[]".into())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(args: &[Arg<'_>]) -> Vec<String> {
        args.iter().map(|a| format!("{a:?}")).collect()
    }

    #[test]
    fn numbered_placeholders_repeat_and_reorder_the_arguments() {
        let p = Placeholders::parse("UPDATE q SET a = ?2, b = ?2 WHERE name = ?1").unwrap();
        let (sql, args) = p.expand(&[Arg::Text("q1"), Arg::Int(7)]).unwrap();
        assert_eq!(sql, "UPDATE q SET a = ?, b = ? WHERE name = ?");
        assert_eq!(texts(&args), ["Int(7)", "Int(7)", "Text(\"q1\")"]);
    }

    #[test]
    fn plain_placeholders_take_the_arguments_in_order() {
        let p = Placeholders::parse("SELECT ? + ?").unwrap();
        let (sql, args) = p.expand(&[Arg::Int(1), Arg::Int(2)]).unwrap();
        assert_eq!(sql, "SELECT ? + ?");
        assert_eq!(texts(&args), ["Int(1)", "Int(2)"]);
    }

    #[test]
    fn quoted_text_and_comments_keep_their_question_marks() {
        let sql = "-- what? ?9\nSELECT '?', \"?\", `?`, /* ?3 */ ?1";
        let p = Placeholders::parse(sql).unwrap();
        let (out, args) = p.expand(&[Arg::Int(5)]).unwrap();
        assert_eq!(out, "-- what? ?9\nSELECT '?', \"?\", `?`, /* ?3 */ ?");
        assert_eq!(args.len(), 1);
    }

    #[test]
    fn a_list_expands_to_one_placeholder_per_element_and_an_empty_one_to_a_value_nothing_takes() {
        let p = Placeholders::parse("SELECT id FROM jobs WHERE id IN (?2) AND queue = ?1").unwrap();
        let ids = [3i64, 4, 5];
        let (sql, args) = p.expand(&[Arg::Text("q"), Arg::Ints(&ids)]).unwrap();
        assert_eq!(
            sql,
            "SELECT id FROM jobs WHERE id IN (?, ?, ?) AND queue = ?"
        );
        assert_eq!(args.len(), 4);
        let (sql, args) = p.expand(&[Arg::Text("q"), Arg::Ints(&[])]).unwrap();
        assert_eq!(sql, "SELECT id FROM jobs WHERE id IN (NULL) AND queue = ?");
        assert_eq!(args.len(), 1);
        let p = Placeholders::parse("SELECT 1 WHERE k NOT IN (?1)").unwrap();
        let (sql, args) = p.expand(&[Arg::Texts(&[])]).unwrap();
        assert_eq!(sql, "SELECT 1 WHERE k NOT IN (?)");
        assert_eq!(texts(&args), ["Text(\"\")"]);
    }

    #[test]
    fn mixing_styles_or_a_missing_argument_is_refused() {
        assert!(Placeholders::parse("SELECT ?1, ?").is_err());
        assert!(Placeholders::parse("SELECT ?0").is_err());
        let p = Placeholders::parse("SELECT ?2").unwrap();
        assert!(p.expand(&[Arg::Int(1)]).is_err());
    }

    #[test]
    fn a_list_becomes_one_json_array_for_sqlite() {
        let keys = vec!["a\"b".to_string()];
        assert_eq!(json_list(&Arg::Texts(&keys)).unwrap(), r#"["a\"b"]"#);
        assert_eq!(json_list(&Arg::Ints(&[1, 2])).unwrap(), "[1,2]");
        assert!(json_list(&Arg::Int(1)).is_none());
    }
}
