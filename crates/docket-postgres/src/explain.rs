//! `EXPLAIN` of what the claim really runs, read from the live definitions of `claim()` and
//! `claim_controlled()` in the schema — not from copies kept beside them, which a later
//! migration could leave behind.
//!
//! Four statements decide a claim's cost: the ready path (nothing starving: by priority),
//! the fast path's two-branch statement (some job waited past the starvation bound), the
//! hinted path (from a position, while an old snapshot holds vacuum back; migration 0036, shown
//! from the lowest position) and the controlled path's candidate scan (queues with limits,
//! keyed jobs). Each is taken from the function's text (the first three between their
//! `-- … path begin/end` markers, the last as
//! the `FOR r IN … LOOP` query), its PL/pgSQL variables turned into parameters, and explained
//! under the plan mode its function runs with: `claim()` plans generically
//! (`plan_cache_mode = force_generic_plan`, migration 0006), so its statements are prepared and
//! their generic plan is shown; `claim_controlled()` uses the default. All of it runs in a
//! transaction that is rolled back, so `ANALYZE` claims nothing.

use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use docket_core::{validate, Result, StoreError};

/// One explainable statement of the claim.
struct Part {
    title: &'static str,
    sql: String,
    generic: bool,
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some(&text[start..end])
}

/// The four statements, from the two functions' definitions.
fn parts(claim: &str, controlled: &str) -> std::result::Result<Vec<Part>, String> {
    let ready = between(claim, "-- ready path begin\n", "-- ready path end")
        .ok_or("claim(): no ready path markers")?;
    let fast = between(claim, "-- fast path begin\n", "-- fast path end")
        .ok_or("claim(): no fast path markers")?;
    let hinted = between(claim, "-- hinted path begin\n", "-- hinted path end")
        .ok_or("claim(): no hinted path markers")?;
    // Up to the line that is only `LOOP` (the scan sits inside the passes' loop, indented).
    let scan = controlled
        .split_once("FOR r IN\n")
        .and_then(|(_, rest)| {
            let mut end = 0;
            for line in rest.split_inclusive('\n') {
                if line.trim() == "LOOP" {
                    return Some(rest[..end].trim_end());
                }
                end += line.len();
            }
            None
        })
        .ok_or("claim_controlled(): no candidate scan (FOR r IN … LOOP)")?;
    // The scan's variables, as the parameters of a prepared statement (a first pass: no key
    // left out yet).
    let scan = scan
        .replace("rated_out", "'{}'::text[]")
        .replace("p_queue", "$1")
        .replace("p_starve_ms", "$5")
        .replace("LIMIT depth", "LIMIT ($2 * 4 + 200)");
    Ok(vec![
        Part {
            title: "-- claim(), ready path (no job waited past the starvation bound)",
            sql: ready.to_string(),
            generic: true,
        },
        Part {
            title: "-- claim(), fast path with a starving job (two branches)",
            sql: fast.to_string(),
            generic: true,
        },
        Part {
            title:
                "-- claim(), hinted path (while an old snapshot holds vacuum back: migration 0036)",
            sql: hinted.to_string(),
            generic: true,
        },
        Part {
            title: "-- claim_controlled(), candidate scan (limits or keyed jobs)",
            sql: scan,
            generic: false,
        },
    ])
}

/// The plans of the claim's statements for `queue` on the current data.
pub(crate) async fn explain_claim(
    conn: &mut PgConnection,
    schema: &str,
    queue: &str,
    analyze: bool,
) -> Result<String> {
    validate::queue(queue)?;
    validate::schema(schema)?;
    // The statements are explained as the claim runs them (an UPDATE, rows locked FOR
    // UPDATE), and PostgreSQL checks UPDATE on jobs even for a plain EXPLAIN. Since
    // migration 0016 only the schema's owner has it (the worker role writes jobs through
    // functions): say so instead of the server's bare "permission denied".
    let may: bool =
        sqlx::query_scalar("SELECT has_table_privilege(format('%I.jobs', $1::text), 'UPDATE')")
            .persistent(false)
            .bind(schema)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
    if !may {
        return Err(StoreError::Denied(
            "`explain` runs the claim's own statements (rolled back), which needs UPDATE on jobs: run it as the schema's owner".into(),
        ));
    }
    let def = |name: &'static str| {
        sqlx::query_scalar::<_, String>(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = $1 AND p.proname = $2",
        )
        .persistent(false)
        .bind(schema)
        .bind(name)
    };
    let claim = def("claim").fetch_one(&mut *conn).await.map_err(db_err)?;
    let controlled = def("claim_controlled")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
    let parts = parts(&claim, &controlled).map_err(|e| StoreError::Unavailable(e.into()))?;
    sqlx::Executor::execute(
        &mut *conn,
        format!("SET LOCAL search_path TO \"{schema}\", pg_temp").as_str(),
    )
    .await
    .map_err(db_err)?;
    let mode = if analyze {
        "ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF"
    } else {
        "COSTS OFF"
    };
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let plan_mode = if p.generic {
            "force_generic_plan"
        } else {
            "auto"
        };
        sqlx::Executor::execute(
            &mut *conn,
            format!("SET LOCAL plan_cache_mode = {plan_mode}").as_str(),
        )
        .await
        .map_err(db_err)?;
        let name = format!("docket_explain_{i}");
        sqlx::Executor::execute(
            &mut *conn,
            format!(
                "PREPARE {name}(text, integer, text, bigint, bigint, boolean, integer, smallint, timestamptz) AS {}",
                p.sql.trim().trim_end_matches(';')
            )
            .as_str(),
        )
        .await
        .map_err(db_err)?;
        // The queue is quoted by the server (format %L), never pasted by us.
        let explain: String = sqlx::query_scalar(&format!(
            "SELECT format('EXPLAIN ({mode}) EXECUTE {name}(%L, 10, %L, 60000, 60000, true, NULL, -32768, ''-infinity'')', $1::text, 'explain')"
        ))
        .persistent(false)
        .bind(queue)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
        let rows = sqlx::raw_sql(&explain)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        out.push(format!(
            "{} [{}]",
            p.title,
            if p.generic {
                "generic plan, as claim() runs it"
            } else {
                "default plan mode"
            }
        ));
        for r in &rows {
            out.push(r.try_get::<String, _>(0).map_err(db_err)?);
        }
        sqlx::Executor::execute(&mut *conn, format!("DEALLOCATE {name}").as_str())
            .await
            .map_err(db_err)?;
    }
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_statements_are_found_in_the_migrated_functions() {
        let schema = include_str!("../schema/current.sql");
        let claim = between(schema, "FUNCTION {{schema}}.claim(", "$function$;\n").unwrap();
        let controlled = between(
            schema,
            "FUNCTION {{schema}}.claim_controlled(",
            "$function$;\n",
        )
        .unwrap();
        let p = parts(claim, controlled).unwrap();
        assert_eq!(p.len(), 4);
        assert!(p[0].sql.contains("ORDER BY priority, run_at"));
        assert!(p[1].sql.contains("starving AS"));
        assert!(p[2].sql.contains("(priority, run_at) >= ($8, $9)"));
        assert!(
            p[3].sql.contains("UNION ALL")
                && p[3].sql.contains("$1")
                && !p[3].sql.contains("depth")
        );
    }
}
