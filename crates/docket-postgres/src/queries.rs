//! Every SQL statement Docket runs, loaded from `sql/*.sql` (one file per query, each with a
//! header comment naming its parameters and invariants) and rendered once per store with the
//! configured schema name. Keeping the registry in one place lets a test prove that every
//! file is used and that nothing else hides SQL.

macro_rules! queries {
    ($($name:ident),* $(,)?) => {
        /// The rendered statements of one schema.
        #[derive(Debug)]
        pub struct Queries {
            $(
                #[doc = concat!("`sql/", stringify!($name), ".sql`")]
                pub $name: String,
            )*
        }

        impl Queries {
            /// Renders every statement for `schema` (already validated as an identifier).
            pub fn render(schema: &str) -> Self {
                Queries {
                    $($name: include_str!(concat!("../sql/", stringify!($name), ".sql"))
                        .replace("{{schema}}", schema),)*
                }
            }

            /// File names of the registry, for the "every file is used" test.
            pub fn file_names() -> &'static [&'static str] {
                &[$(concat!(stringify!($name), ".sql")),*]
            }
        }
    };
}

queries!(
    claim,
    claim_probe,
    horizon_age,
    complete_many,
    complete_delete_many,
    complete_outputs,
    output,
    progress_many,
    record_steps,
    job_steps,
    prune_steps,
    park_many,
    signal,
    job_signal,
    fail_many,
    snooze_many,
    heartbeat,
    lease_status,
    reap,
    prune,
    retry,
    cancel,
    notify,
    get,
    list,
    active_count,
    any_active,
    stats_queues,
    stats_table,
    enqueue_many,
    unique_holder,
    leader_try,
    leader_resign,
    queue_lock,
    queue_pause,
    queue_resume,
    queue_remove,
    queue_limits,
    queues_list,
    key_limit_set,
    key_limit_delete,
    key_limits_list,
    blocked_keys,
    skip,
    unblock_keys,
    hand_over_keys,
    db_now,
    why,
    worker_beat,
    worker_gone,
    workers_list,
    workers_recent,
    leader_lease,
    search,
    search_finished,
    search_window,
    overview,
    dead_groups,
    errored_jobs,
    run_now,
    samples_record,
    samples_list,
    queue_health,
    depth_sample,
    depth_list,
    sample_buckets_record,
    sample_buckets_list,
    audit_insert,
    audit_list,
    periodic_upsert,
    periodic_list,
    periodic_remove,
    periodic_pause,
    periodic_due,
    periodic_advance,
    periodic_job,
    enqueue_copy_ids,
    enqueue_copy,
    may_copy,
    idle_bound,
    enqueue_workflow,
    complete_nodes,
    dep_outputs,
    prune_workflows,
    workflows_list,
    workflow_nodes,
    workflow_edges,
    spawn_nodes,
    batch_open,
    batch_add,
    batch_close,
    batch_list,
    workflow_kind,
    skip_edge,
    outbox_publish,
    outbox_origin,
    outbox_claim,
    outbox_mark,
    outbox_fail,
    outbox_prune,
    outbox_stats,
    outbox_list,
    outbox_list_published,
);

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutant whose text no longer occurs in its function would be caught by nothing and
    /// look caught: every edit must match the function's current definition.
    #[test]
    fn every_mutant_edit_matches_its_function() {
        let schema = include_str!("../schema/current.sql");
        for m in docket_core::mutants::Mutant::ALL {
            for (func, from, _) in m.function_edits() {
                let head = format!("CREATE OR REPLACE FUNCTION {{{{schema}}}}.{func}(");
                let at = schema
                    .find(&head)
                    .unwrap_or_else(|| panic!("{}: no function {func}", m.name()));
                let rest = &schema[at + head.len()..];
                let def = &rest[..rest.find("\nCREATE ").unwrap_or(rest.len())];
                assert!(def.contains(from), "{}: {from:?} not in {func}()", m.name());
            }
        }
    }

    #[test]
    fn every_sql_file_is_registered_and_every_entry_has_a_file() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/sql");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let mut registered: Vec<String> = Queries::file_names()
            .iter()
            .map(|s| s.to_string())
            .collect();
        registered.sort();
        assert_eq!(on_disk, registered);
    }

    #[test]
    fn every_query_has_a_header_and_is_rendered() {
        let q = Queries::render("docket_x");
        for name in Queries::file_names() {
            let path = format!("{}/sql/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).unwrap();
            assert!(text.starts_with("-- "), "{name} lacks a header comment");
        }
        assert!(q.claim.contains("docket_x.claim("));
        assert!(!q.claim.contains("{{schema}}"));
    }
}
