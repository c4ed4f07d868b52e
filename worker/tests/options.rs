//! Option checks against a real engine: minnow announces `Hash` (spin 1..1024) and `Threads`
//! (spin 1..1); a variant's option knobs are checked against that before any position runs.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sweep_domain::engine::{EngineKind, Knob, KnobKind};
use sweep_domain::wire::{BuildSpec, EngineInfo, EngineList};
use sweep_worker::allow::EngineBinaries;
use sweep_worker::binaries::{available_engines, check_executable, OptionChecks};
use sweep_worker::engine::uci::{UciEngine, UciOptionType};
use sweep_worker::engine::INIT_TIMEOUT;
use sweep_worker::sandbox::Confinement;

/// The minnow spec with the option knob `Hash = value` (a binary-only variant of `binary`).
fn variant(binary: &Path, option: &str, value: &str) -> BuildSpec {
    let mut spec = common::minnow_spec(&[]);
    spec.binary_path = Some(binary.display().to_string());
    spec.options = vec![
        ("Threads".into(), "1".into()),
        (option.into(), value.into()),
    ];
    spec.checked_options = vec![option.into()];
    spec
}

#[tokio::test]
async fn driver_collects_the_announced_options() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    let engine = UciEngine::start(&bin, &[], INIT_TIMEOUT).await.unwrap();
    let hash = engine
        .announced_options()
        .iter()
        .find(|o| o.name == "Hash")
        .expect("minnow announces Hash")
        .clone();
    engine.quit().await;
    assert_eq!(
        hash.kind,
        UciOptionType::Spin {
            min: Some(1),
            max: Some(1024)
        }
    );
    assert_eq!(hash.default.as_deref(), Some("16"));
}

#[tokio::test]
async fn options_are_checked_against_the_engine() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    let checks = OptionChecks::default();
    // Unsandboxed: what is checked here is the announcement, not the containment.
    let open = Confinement::default();

    assert_eq!(
        checks
            .check(&bin, &variant(&bin, "Hash", "64"), &open)
            .await,
        Ok(())
    );

    let e = checks
        .check(&bin, &variant(&bin, "Hash", "2048"), &open)
        .await
        .unwrap_err();
    assert!(e.contains("`Hash`") && e.contains("`2048`"), "{e}");
    assert!(
        e.contains("option name Hash type spin default 16 min 1 max 1024"),
        "{e}"
    );

    let e = checks
        .check(&bin, &variant(&bin, "Contempt", "10"), &open)
        .await
        .unwrap_err();
    assert!(
        e.contains("`Contempt`") && e.contains("not announced"),
        "{e}"
    );
    assert!(e.contains("Hash, Threads"), "{e}");

    // A binary that is no engine fails the check with a reason, not a hang.
    let e = checks
        .check(
            Path::new("/bin/false"),
            &variant(Path::new("/bin/false"), "Hash", "64"),
            &open,
        )
        .await
        .unwrap_err();
    assert!(e.contains("did not start"), "{e}");
}

#[test]
fn executables_and_available_engines() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let exe = dir.path().join("exe");
    std::fs::write(&exe, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();

    assert_eq!(check_executable(&exe), Ok(()));
    assert_eq!(check_executable(&plain).unwrap_err(), "not executable");
    assert_eq!(
        check_executable(dir.path()).unwrap_err(),
        "not a regular file"
    );
    assert!(check_executable(&dir.path().join("missing"))
        .unwrap_err()
        .contains("No such file"));

    let info = |name: &str, kind: EngineKind, binary: Option<&Path>| EngineInfo {
        name: name.into(),
        protocol: sweep_domain::engine::Protocol::Uci,
        kind,
        binary: binary.map(|b| b.display().to_string()),
        knobs: vec![Knob {
            name: "Hash".into(),
            min: 1,
            max: 64,
            default: 16,
            description: String::new(),
            kind: KnobKind::Option,
            option: None,
        }],
        options: Default::default(),
        origin: None,
        exclude: Vec::new(),
        include_dotfiles: false,
    };
    let list = EngineList {
        engines: vec![
            info("here", EngineKind::Binary, Some(&exe)),
            info("not-executable", EngineKind::Binary, Some(&plain)),
            info(
                "missing",
                EngineKind::Binary,
                Some(&dir.path().join("gone")),
            ),
            info("source", EngineKind::Source, None),
        ],
    };
    let allowed = EngineBinaries::new(
        [&exe, &plain, &dir.path().join("gone")].map(|p| p.display().to_string()),
    );
    assert_eq!(available_engines(&list, &allowed), ["here".to_string()]);
    // An executable binary the worker does not list is not offered to the coordinator.
    assert!(available_engines(&list, &EngineBinaries::default()).is_empty());
}
