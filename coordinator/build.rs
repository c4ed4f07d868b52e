//! Rebuilds the coordinator when a migration is added or changed: `sqlx::migrate!` embeds
//! the migrations when it compiles, and cargo does not otherwise know to look at them (a new
//! migration would silently be left out of an incremental build).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
