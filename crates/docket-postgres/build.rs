//! `sqlx::migrate!` embeds the migrations directory at compile time, but cargo only knows to
//! rebuild when a file it tracks changes; a *new* migration file would be silently left out.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
