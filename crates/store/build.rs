//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds the files of the top-level
//! `migrations/` at compile time, but cargo only watches the files it already knew.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
