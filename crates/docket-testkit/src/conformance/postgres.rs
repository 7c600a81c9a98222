//! The PostgreSQL harness: a fresh schema per case on the test server, and a clock moved by
//! shifting every timestamp of the schema's tables into the past (the database's own clock
//! cannot be moved, and every deadline Docket keeps is a timestamp compared with `now()`).

use std::time::Duration;

use docket_postgres::PgStore;

use super::Harness;
use crate::TestDb;

/// [`Harness`] for [`PgStore`].
pub struct PgHarness {
    /// The case's schema.
    pub db: TestDb,
}

impl Harness for PgHarness {
    type S = PgStore;

    async fn fresh() -> Self {
        PgHarness {
            db: TestDb::new().await,
        }
    }

    fn store(&self) -> &PgStore {
        &self.db.store
    }

    async fn second(&self) -> PgStore {
        self.db.second_store(4).await
    }

    async fn reset(&self) {
        self.db
            .exec("TRUNCATE {schema}.jobs, {schema}.queues, {schema}.key_limits, {schema}.job_steps, {schema}.job_signals, {schema}.job_deps, {schema}.workflows, {schema}.jobs_succeeded RESTART IDENTITY")
            .await;
    }

    async fn now(&self) -> chrono::DateTime<chrono::Utc> {
        sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.db.pool)
            .await
            .unwrap_or_else(|e| panic!("now(): {e}"))
    }

    async fn actor(&self) -> String {
        sqlx::query_scalar("SELECT session_user::text")
            .fetch_one(&self.db.pool)
            .await
            .unwrap_or_else(|e| panic!("session_user: {e}"))
    }

    async fn advance(&self, d: Duration) {
        // Every timestamp column of every table of the schema (jobs, queues, key_limits,
        // leader, periodic), found from the catalogue so a new column moves too.
        let ms = d.as_millis() as i64;
        let sql = format!(
            "DO $$
             DECLARE t record; sets text;
             BEGIN
               FOR t IN SELECT table_name, string_agg(format('%I = %I - interval ''{ms} milliseconds''', column_name, column_name), ', ') AS s
                        FROM information_schema.columns
                        WHERE table_schema = '{schema}' AND data_type = 'timestamp with time zone'
                          AND table_name NOT LIKE '\\_%'
                          AND table_name IN (SELECT table_name FROM information_schema.tables
                                             WHERE table_schema = '{schema}'
                                               AND table_type = 'BASE TABLE')
                        GROUP BY table_name
               LOOP
                 EXECUTE format('UPDATE %I.%I SET %s', '{schema}', t.table_name, t.s);
               END LOOP;
               -- The kept successes' own times, packed in their history rows (migration 0035).
               UPDATE {schema}.jobs_succeeded SET jobs = ARRAY(
                 SELECT ROW(r.id, r.queue, r.kind, r.args, r.priority,
                            r.run_at - interval '{ms} milliseconds', r.attempt, r.max_attempts,
                            r.released, r.cancel_requested_at - interval '{ms} milliseconds',
                            r.unique_key, r.ordering_key, r.concurrency_key, r.errors, r.metadata,
                            r.created_at - interval '{ms} milliseconds',
                            r.attempted_at - interval '{ms} milliseconds', r.progress_percent,
                            r.progress_message, r.progress_at - interval '{ms} milliseconds',
                            r.batch_id)::{schema}.succeeded_job
                 FROM unnest(jobs) AS r);
             END $$",
            schema = self.db.schema
        );
        sqlx::raw_sql(&sql)
            .execute(&self.db.pool)
            .await
            .unwrap_or_else(|e| panic!("advance the clock: {e}"));
    }
}
