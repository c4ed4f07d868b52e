//! Embeds the migrations: writes `$OUT_DIR/migrations.rs`, the file name and text of every
//! migration of each backend in version order (read by `store/migrations.rs`). Done here
//! rather than with `sqlx::migrate!` so that sqlx's proc-macros, which compile a second copy
//! of sqlx and of SQLite's C source for the build host, are not needed (bench/RESULTS.md has
//! what that saves of a cold build). Cargo reruns this when a migration is added or changed.
use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut out = String::new();
    for (name, backend) in [("POSTGRES", "postgres"), ("SQLITE", "sqlite")] {
        let backend_dir = dir.join(backend);
        let mut files: Vec<_> = std::fs::read_dir(&backend_dir)
            .expect("migrations directory")
            .map(|e| e.expect("migration entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        writeln!(out, "pub(super) const {name}: &[(&str, &str)] = &[").unwrap();
        for file in files {
            let file_name = file.file_name().unwrap().to_str().expect("UTF-8 file name");
            let path = file.canonicalize().expect("migration path");
            writeln!(
                out,
                "    ({file_name:?}, include_str!({:?})),",
                path.display().to_string()
            )
            .unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("migrations.rs");
    std::fs::write(target, out).expect("writing migrations.rs");
}
