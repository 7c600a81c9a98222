//! Embeds the migrations: writes `$OUT_DIR/migrations.rs`, the list of `migrations/NNNN_name.sql`
//! as `(version, description, include_str!(file))`, which `src/migrate.rs` turns into sqlx's
//! `Migrator` at start-up.
//!
//! Written here rather than with `sqlx::migrate!`: that macro is sqlx's only reason to build
//! its `macros` feature, whose proc-macro crate compiles every sqlx driver, rustls and tokio a
//! second time for the host — about 190 s of compile time (half that on this project's two
//! cores) in every cold build, for a directory listing. The version and description follow
//! sqlx's own rules (`{version}_{description with _ as space}.sql`), and the checksum is sqlx's
//! (`Migration::new` hashes the text), so schemas migrated by either agree; `tests/migrations.rs`
//! compares this list with sqlx's reading of the directory.
use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // A new migration file changes the directory: rebuild, or it would be silently left out.
    println!("cargo:rerun-if-changed=migrations");
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("migrations");
    let mut found: Vec<(i64, String, String)> = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("migrations directory") {
        let name = entry.expect("migrations entry").file_name();
        let name = name
            .to_str()
            .expect("migration file names are UTF-8")
            .to_owned();
        println!("cargo:rerun-if-changed=migrations/{name}");
        let Some(stem) = name.strip_suffix(".sql") else {
            panic!("migrations/{name}: only NNNN_name.sql files belong here");
        };
        let (version, description) = stem
            .split_once('_')
            .unwrap_or_else(|| panic!("migrations/{name}: expected NNNN_name.sql"));
        let version: i64 = version
            .parse()
            .unwrap_or_else(|_| panic!("migrations/{name}: the version is not a number"));
        // Only these characters, so the name can be pasted into the generated source as is.
        assert!(
            description
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "migrations/{name}: names are lowercase letters, digits and underscores"
        );
        assert!(
            !found.iter().any(|(v, _, _)| *v == version),
            "migrations/{name}: version {version} is taken twice"
        );
        found.push((version, description.replace('_', " "), name));
    }
    found.sort();
    let mut out = String::from("&[\n");
    for (version, description, file) in &found {
        writeln!(
            out,
            "    ({version}, \"{description}\", include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/migrations/{file}\"))),"
        )
        .unwrap();
    }
    out.push_str("]\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("migrations.rs");
    std::fs::write(dest, out).expect("write migrations.rs");
}
