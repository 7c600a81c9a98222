//! Names the build in `docket --version`: the commit it was built from.
//!
//! `DOCKET_COMMIT` from the environment when a packager sets it; else the commit cargo
//! recorded in a published package (`.cargo_vcs_info.json`); else git's HEAD when building
//! in a checkout (uncommitted changes are not marked: watching the index for them would
//! rebuild the CLI after every `git status`); else "unknown".
//! Written by hand: the crates that do this (vergen, built) bring more than one `git` call.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The commit recorded by `cargo package` (`{"git": {"sha1": "…"}, …}`).
fn packaged() -> Option<String> {
    let text = std::fs::read_to_string(".cargo_vcs_info.json").ok()?;
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + 6..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    let sha = &rest[start..start + len];
    sha.chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| sha.chars().take(12).collect())
}

fn main() {
    println!("cargo:rerun-if-env-changed=DOCKET_COMMIT");
    // Watched only where it exists (a published package): cargo treats a watched file that
    // is missing as changed, and reran this script — and rebuilt the CLI and everything that
    // depends on it — on every cargo command in a checkout.
    if Path::new(".cargo_vcs_info.json").exists() {
        println!("cargo:rerun-if-changed=.cargo_vcs_info.json");
    }
    let commit = if let Some(c) = std::env::var("DOCKET_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
    {
        c
    } else if let Some(sha) = packaged() {
        sha
    } else if let Some(sha) = git(&["rev-parse", "--short=12", "HEAD"]) {
        // Rebuild when HEAD moves (a commit, a checkout), not on every build.
        if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
            let dir = Path::new(&dir);
            let mut watch = vec![dir.join("HEAD"), dir.join("packed-refs")];
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch.push(dir.join(r));
            }
            // Only files that exist: a missing one would rerun this script on every build.
            for f in watch.iter().filter(|f| f.exists()) {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
        sha
    } else {
        "unknown".to_string()
    };
    println!("cargo:rustc-env=DOCKET_COMMIT={commit}");
}
