//! Fixtures the unit tests share.

use sweep_domain::engine::Protocol;
use sweep_domain::wire::BuildSpec;

/// A UCI source build `b` of engine `e` (binary `e`) with the build command `argv`: no
/// defines or options, one-second timeouts.
pub(crate) fn build_spec(argv: &[&str]) -> BuildSpec {
    BuildSpec {
        name: "b".into(),
        engine: "e".into(),
        source_sha256: "00".into(),
        defines: Default::default(),
        build_command: argv.iter().map(|s| s.to_string()).collect(),
        build_timeout_secs: 1,
        binary: "e".into(),
        binary_path: None,
        protocol: Protocol::Uci,
        options: vec![],
        checked_options: vec![],
        fresh_process_per_position: false,
        position_timeout_secs: 1,
        init_timeout_secs: 1,
        report: None,
        bench: None,
    }
}
