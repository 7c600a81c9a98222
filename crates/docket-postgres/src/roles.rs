//! The least-privilege role model: three group roles per schema, each with only what its
//! users need. `docket grant` runs (or prints) the script; the schema's owner keeps running
//! migrations.
//!
//! | role | may | may not |
//! |---|---|---|
//! | application (`<schema>_app`) | enqueue, through `enqueue()` / `enqueue_jobs()`, and write to the outbox through `publish()` (SECURITY DEFINER, validated, `search_path` pinned) | read any job, change any job, insert rows directly, claim |
//! | worker (`<schema>_worker`) | everything the runtime does: claim, complete, heartbeat, reap, prune, cron, controls; job rows only through the functions that are the state machine's transitions (migration 0016) | write a job row directly (mark a job it never claimed succeeded, insert finished rows, delete history), create or alter objects, rewrite the audit log |
//! | operator (`<schema>_operator`) | read every table (`docket stats`, `jobs list/show/why`, the dashboard's pages) | write anything; `explain` (it runs the claim's statements, rolled back: the owner's tool) |
//!
//! Whatever a role may write, the table's CHECK constraints (migration 0008) keep every row
//! within the invariants, and no session setting changes a limit.

use docket_core::{validate, ValidationError};

/// The group roles to grant to (login roles are then made members: `GRANT app TO alice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// Enqueue only.
    pub app: String,
    /// The runtime's role.
    pub worker: String,
    /// Read-only.
    pub operator: String,
}

impl Roles {
    /// `<schema>_app`, `<schema>_worker`, `<schema>_operator`.
    pub fn for_schema(schema: &str) -> Roles {
        Roles {
            app: format!("{schema}_app"),
            worker: format!("{schema}_worker"),
            operator: format!("{schema}_operator"),
        }
    }

    fn validate(&self) -> Result<(), ValidationError> {
        for r in [&self.app, &self.worker, &self.operator] {
            // Role names are spliced into SQL as identifiers: the schema rule, plus room.
            let ok = !r.is_empty()
                && r.len() <= 63
                && r.bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
                && r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !r.starts_with("pg_");
            if !ok {
                return Err(ValidationError::Other {
                    what: "role name",
                    reason: format!(
                        "{r:?}: use 1-63 of a-z 0-9 _, not starting with a digit or pg_"
                    ),
                });
            }
        }
        Ok(())
    }
}

const ENQUEUE: &str =
    "enqueue(text, text, jsonb, smallint, timestamptz, integer, text, jsonb, text, text)";
const SIGNAL: &str = "signal(bigint, text, jsonb)";
const ENQUEUE_WORKFLOW: &str = "enqueue_workflow(jsonb)";
const BATCHES: &str =
    "batch_open(text, jsonb, jsonb, boolean), \"{s}\".batch_add(bigint, jsonb), \"{s}\".batch_close(bigint)";
const PUBLISH: &str = "publish(text, jsonb, text, jsonb)";
const ENQUEUE_JOBS: &str = "enqueue_jobs(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[], text[], text[])";

/// The grant script for `schema`: creates the group roles when missing (NOLOGIN), revokes
/// what PUBLIC has, and grants each role its share. Idempotent.
pub fn grant_script(schema: &str, roles: &Roles) -> Result<String, ValidationError> {
    validate::schema(schema)?;
    roles.validate()?;
    let (s, a, w, o) = (schema, &roles.app, &roles.worker, &roles.operator);
    let batches = BATCHES.replace("{s}", s);
    let keep_jobs =
        if docket_core::mutants::active(docket_core::mutants::Mutant::GrantKeepsJobWrites) {
            String::new()
        } else {
            format!("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".jobs FROM \"{w}\";\n")
        };
    let mut sql = String::new();
    for r in [a, w, o] {
        sql.push_str(&format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{r}') THEN CREATE ROLE \"{r}\" NOLOGIN; END IF; END $$;\n"
        ));
    }
    sql.push_str(&format!(
        "-- Nobody but these roles and the owner reaches the schema.
REVOKE ALL ON SCHEMA \"{s}\" FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA \"{s}\" FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA \"{s}\" FROM PUBLIC;
GRANT USAGE ON SCHEMA \"{s}\" TO \"{a}\", \"{w}\", \"{o}\";
-- Application: enqueue through the validating definer functions, nothing else.
REVOKE ALL ON ALL TABLES IN SCHEMA \"{s}\" FROM \"{a}\";
GRANT EXECUTE ON FUNCTION \"{s}\".{ENQUEUE}, \"{s}\".{ENQUEUE_JOBS}, \"{s}\".{SIGNAL}, \"{s}\".{ENQUEUE_WORKFLOW}, \"{s}\".{batches}, \"{s}\".{PUBLISH} TO \"{a}\";
-- Worker: the runtime's reads and writes; a job row only through the functions that are
-- the state machine's transitions (claim, the fenced completions, reap, prune, controls:
-- migration 0016), never by a statement of its own.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \"{s}\" TO \"{w}\";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA \"{s}\" TO \"{w}\";
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA \"{s}\" TO \"{w}\";
{keep_jobs}-- Kept successes only through the fenced completion that moves them (migration 0035).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".jobs_succeeded FROM \"{w}\";
-- The record of key hand-overs is written by the key-release trigger only (migration 0017).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".key_handovers FROM \"{w}\";
-- A step is recorded only through the fenced record_step(), a signal only through signal()
-- (migration 0019).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".job_steps, \"{s}\".job_signals FROM \"{w}\";
-- Workflows and their edges only through enqueue_workflow(), the trigger that ends a node and
-- prune_workflows() (migration 0030); batches through batch_open/add/close() and the trigger
-- that counts their members (migration 0031).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".workflows, \"{s}\".job_deps FROM \"{w}\";
-- The outbox only through publish() and the relay's fenced functions (migrations 0032, 0034).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\".outbox, \"{s}\".outbox_origin, \"{s}\".outbox_sent FROM \"{w}\";
-- The audit log is append-only for everyone but its owner: an entry, once written, is
-- neither rewritten nor removed by the roles it records.
REVOKE UPDATE, DELETE, TRUNCATE ON \"{s}\".operator_actions FROM \"{w}\", \"{o}\", \"{a}\";
-- Nor is the migration history the worker's to change.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON \"{s}\"._sqlx_migrations, \"{s}\".schema_compat FROM \"{w}\";
-- Operator: read-only (and the helpers its reports call: \"why\" reads token buckets, a job
-- page finds a kept success through kept_job()).
GRANT SELECT ON ALL TABLES IN SCHEMA \"{s}\" TO \"{o}\";
GRANT EXECUTE ON FUNCTION \"{s}\".bucket_tokens(double precision, timestamptz, integer, bigint), \"{s}\".lock_space(text), \"{s}\".backoff_delay(integer, bigint, bigint), \"{s}\".kept_job(bigint) TO \"{o}\";
"
    ));
    Ok(sql)
}
