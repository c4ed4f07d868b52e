//! The fake `flaky` engine and the `fakes` suite (ten positions) of `tests/fixtures`: a
//! coordinator that knows only them, workers allowed to build the engine, and sweep configs
//! over its `FAULT` knob.

use std::path::{Path, PathBuf};

use super::{start_coordinator_with, start_worker_with, Proc};

/// The arguments that give a coordinator (or `sweep run`) the fixture engines and suites.
pub const FIXTURE_DIRS: [&str; 4] = [
    "--engines-dir",
    "tests/fixtures/engines",
    "--suites-dir",
    "tests/fixtures/suites",
];

/// The argument a worker needs to build the fake engine (its recipe runs `sh build.sh`).
pub const BUILD_WITH_SH: [&str; 2] = ["--allow-build-programs", "make,sh"];

/// Starts a coordinator that knows only the fixture engines and suites, with `extra`
/// arguments.
pub fn start_fixture_coordinator(db_url: &str, extra: &[&str]) -> (Proc, String) {
    let mut args = FIXTURE_DIRS.to_vec();
    args.extend_from_slice(extra);
    start_coordinator_with(db_url, &args)
}

/// A one-core worker called `name` that may build the fake engine.
pub fn start_fixture_worker(base: &str, cache: &Path, name: &str) -> Proc {
    start_worker_with(base, cache, name, 1, &BUILD_WITH_SH)
}

/// Writes `dir/flaky.toml`: a sweep named `flaky` over `values` of the `FAULT` knob (6 and 7
/// behave, 9 never builds) on the fake positions at depth 1, in chunks of `chunk`, with
/// `extra` lines appended.
pub fn flaky_config(dir: &Path, values: &str, chunk: u32, extra: &str) -> PathBuf {
    let file = dir.join("flaky.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"flaky\"\nengine = \"flaky\"\nknob = \"FAULT\"\nvalues = {values}\n\
             suites = [\"fakes\"]\ndepth = 1\nchunk_size = {chunk}\n{extra}"
        ),
    )
    .unwrap();
    file
}
