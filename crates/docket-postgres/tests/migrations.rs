//! The migration rules: one transaction, idempotent; a newer schema with only additive
//! migrations keeps an older binary working; a breaking one stops it with both versions
//! named; a missing schema is named by read-only checks, which write nothing.

use docket_core::{NewJob, Store};
use docket_postgres::migrate::{self, latest_known};
use docket_testkit::{fresh_schema, TestDb};
use serde_json::json;

#[tokio::test]
async fn a_newer_additive_schema_keeps_working_a_breaking_one_names_both_versions() {
    let db = TestDb::new().await;
    let known = latest_known();
    let newer = known + 1;
    // A newer binary applied an additive migration this one has never seen.
    db.exec(&format!(
        "INSERT INTO {{schema}}._sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ({newer}, 'from the future', true, '\\x00', 0)"
    ))
    .await;
    db.store.migrate().await.expect("additive: still usable");
    let v = migrate::check(&db.pool, &db.schema).await.expect("check");
    assert_eq!(v.current(), newer);
    db.store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap();

    // It was breaking after all: min_reader is raised past what this binary knows.
    db.exec(&format!(
        "UPDATE {{schema}}.schema_compat SET min_reader = {newer}"
    ))
    .await;
    for e in [
        db.store.migrate().await.expect_err("too new"),
        migrate::check(&db.pool, &db.schema)
            .await
            .expect_err("too new"),
    ] {
        let m = e.to_string();
        assert!(
            m.contains(&format!("migration {newer}")) && m.contains(&format!("up to {known}")),
            "{m}"
        );
    }
}

#[tokio::test]
async fn a_migration_marked_breaking_raises_min_reader_and_stops_older_binaries() {
    let db = TestDb::new().await;
    let schema = docket_testkit::fresh_schema();
    // A newer binary's migration set: Docket's own plus one breaking migration.
    let dir = tempfile::tempdir().unwrap();
    for m in migrate::MIGRATOR.iter() {
        std::fs::write(
            dir.path().join(format!(
                "{:04}_{}.sql",
                m.version,
                m.description.replace(' ', "_")
            )),
            &*m.sql,
        )
        .unwrap();
    }
    let newer = latest_known() + 1;
    std::fs::write(
        dir.path().join(format!("{newer:04}_rename.sql")),
        "-- docket: breaking\nALTER TABLE jobs RENAME COLUMN priority TO urgency;\n",
    )
    .unwrap();
    let newer_binary = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    migrate::migrate_with(&db.pool, &schema, &newer_binary)
        .await
        .expect("newer binary migrates");
    assert_eq!(
        db.scalar(&format!("SELECT min_reader FROM {schema}.schema_compat"))
            .await,
        newer
    );
    // This binary now refuses the schema, naming both versions, and writes nothing.
    let e = migrate::migrate(&db.pool, &schema)
        .await
        .expect_err("too new");
    assert!(
        e.to_string().contains(&format!("up to {}", latest_known())),
        "{e}"
    );
    // Every migration Docket ships is additive: none carries the marker.
    for m in migrate::MIGRATOR.iter() {
        assert!(
            !m.sql.lines().any(|l| l.trim() == "-- docket: breaking"),
            "migration {} is marked breaking: say so in the release notes",
            m.version
        );
    }
}

#[tokio::test]
async fn check_names_a_missing_schema_and_creates_nothing() {
    let db = TestDb::new().await;
    let missing = fresh_schema();
    let e = migrate::check(&db.pool, &missing)
        .await
        .expect_err("missing");
    assert!(e.to_string().contains(&missing), "{e}");
    let created = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{missing}'"
        ))
        .await;
    assert_eq!(created, 0);
}

#[tokio::test]
async fn a_failed_migration_leaves_the_schema_as_it_was() {
    // A schema whose bookkeeping says 0001 is applied but whose tables are gone: applying
    // 0002 fails (it needs them), and nothing of the attempt remains.
    let db = TestDb::new().await;
    let schema = fresh_schema();
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}._sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL,
           installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL,
           checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL);"
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    let m1 = migrate::MIGRATOR.iter().next().unwrap();
    sqlx::query(&format!(
        "INSERT INTO {schema}._sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, $2, true, $3, 0)"
    ))
    .bind(m1.version)
    .bind(&*m1.description)
    .bind(&*m1.checksum)
    .execute(&db.pool)
    .await
    .unwrap();
    assert!(migrate::migrate(&db.pool, &schema).await.is_err());
    let rows = db
        .scalar(&format!("SELECT count(*) FROM {schema}._sqlx_migrations"))
        .await;
    assert_eq!(rows, 1, "no migration recorded");
    let tables = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_tables WHERE schemaname = '{schema}'"
        ))
        .await;
    assert_eq!(tables, 1, "only the bookkeeping table");
}

/// `schema/current.sql` is the present definition of every table, constraint, index, trigger
/// and function: it must be exactly what the migrations produce (regenerate it with
/// `DOCKET_BLESS=1` after adding a migration).
#[tokio::test]
async fn the_checked_in_schema_is_what_the_migrations_produce() {
    let db = TestDb::new().await;
    let got = docket_postgres::schema_dump::dump(&db.pool, &db.schema)
        .await
        .unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/current.sql");
    if std::env::var("DOCKET_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(path, &got).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "schema/current.sql differs from the migrated schema at line {}:\n  migrated:   {:?}\n  checked in: {:?}\n\
             Regenerate: DOCKET_BLESS=1 cargo test -p docket-postgres --test migrations checked_in_schema",
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
    assert!(got.contains("CREATE OR REPLACE FUNCTION {{schema}}.claim("));
    assert!(
        !got.contains(&db.schema),
        "the schema's own name was left in"
    );
}

/// A migration whose comments were reworded after release: the text schemas recorded before
/// is accepted (`migrate::REWORDED`), and that text is a version of the file in the
/// repository's history that differs from today's in comment lines only — so no statement
/// can have changed unnoticed. (Needs the git history, as every checkout CI runs has.)
#[tokio::test]
async fn a_schema_migrated_before_a_comment_was_reworded_is_still_accepted() {
    use sha2::Digest;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let git = |args: &[&str]| -> String {
        let o = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git (this test reads the migrations' history)");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let statements = |sql: &str| -> Vec<String> {
        sql.lines()
            .map(str::trim_end)
            .filter(|l| !l.trim_start().starts_with("--"))
            .map(str::to_string)
            .collect()
    };
    for &(version, sum) in migrate::REWORDED {
        let m = migrate::MIGRATOR
            .iter()
            .find(|m| m.version == version)
            .unwrap();
        let file = std::fs::read_dir(dir.join("migrations"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(&format!("{version:04}_")))
            .unwrap_or_else(|| panic!("no file for migration {version}"));
        let path = format!("./migrations/{file}");
        let former = git(&["log", "--format=%H", "--", &path])
            .lines()
            .map(|commit| git(&["show", &format!("{commit}:{path}")]))
            .find(|text| {
                let hex: String = sha2::Sha384::digest(text.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                hex == sum
            })
            .unwrap_or_else(|| {
                panic!("migration {version}: no version in the history has the recorded checksum")
            });
        assert_ne!(
            former,
            m.sql.as_ref(),
            "migration {version} was not reworded"
        );
        assert_eq!(
            statements(&former),
            statements(&m.sql),
            "migration {version}: more than its comments changed"
        );
    }

    let db = TestDb::new().await;
    let (version, sum) = migrate::REWORDED[0];
    let bytes: Vec<u8> = (0..sum.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&sum[i..i + 2], 16).unwrap())
        .collect();
    sqlx::query(&format!(
        "UPDATE {}._sqlx_migrations SET checksum = $1 WHERE version = $2",
        db.schema
    ))
    .bind(&bytes)
    .bind(version)
    .execute(&db.pool)
    .await
    .unwrap();
    migrate::check(&db.pool, &db.schema)
        .await
        .expect("the former text is accepted");
    db.store
        .migrate()
        .await
        .expect("and migrating again is a no-op");

    // Any other text is still a changed migration.
    sqlx::query(&format!(
        "UPDATE {}._sqlx_migrations SET checksum = '\\x00' WHERE version = $1",
        db.schema
    ))
    .bind(version)
    .execute(&db.pool)
    .await
    .unwrap();
    let e = migrate::check(&db.pool, &db.schema)
        .await
        .expect_err("changed");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
}

/// The embedded list (`build.rs`) is sqlx's own reading of the directory: same versions,
/// descriptions, text, checksums and transaction mode — so a schema migrated by an earlier
/// build (which used `sqlx::migrate!`) or by sqlx's CLI validates against this one.
#[tokio::test]
async fn the_embedded_migrations_are_what_sqlx_reads_from_the_directory() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let read = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let embedded: Vec<_> = migrate::MIGRATOR.iter().collect();
    let read: Vec<_> = read.iter().collect();
    assert_eq!(embedded.len(), read.len(), "every file embedded");
    assert!(embedded.len() >= 29);
    for (e, r) in embedded.iter().zip(&read) {
        assert_eq!(e.version, r.version);
        assert_eq!(e.description, r.description, "migration {}", e.version);
        assert_eq!(e.sql, r.sql, "migration {}", e.version);
        assert_eq!(e.checksum, r.checksum, "migration {}", e.version);
        assert_eq!(e.no_tx, r.no_tx, "migration {}", e.version);
        assert_eq!(
            e.migration_type, r.migration_type,
            "migration {}",
            e.version
        );
    }
    // In version order, each once.
    assert!(embedded.windows(2).all(|w| w[0].version < w[1].version));
}
