use std::io::Write;

use super::*;

fn minnow() -> EngineDef {
    EngineDef::from_toml(sweep_domain::engine::fixtures::MINNOW).unwrap()
}

fn export() -> SweepExport {
    let spec = sweep_domain::spec::SweepConfig::from_toml(
        "name = \"x\"\nengine = \"minnow\"\nsuites = [\"s\"]\ndepth = 3\n",
    )
    .unwrap()
    .validate(
        &std::collections::BTreeMap::from([("minnow".to_string(), minnow())]),
        &std::collections::BTreeMap::from([("s".to_string(), 5)]),
    )
    .unwrap();
    SweepExport {
        original: Original {
            sweep_id: 7,
            created_at: chrono::Utc::now(),
            exported_at: chrono::Utc::now(),
            sweep_version: "0.1.0".into(),
            snapshots_left_out: Vec::new(),
        },
        spec,
        engine_def: minnow(),
        source_sha256: None,
        origin: Default::default(),
        snapshots: Vec::new(),
        suites: Vec::new(),
        cancelled: false,
        build_errors: Vec::new(),
        results: Vec::new(),
        cross_checks: Vec::new(),
        build_records: Vec::new(),
        speed_runs: Vec::new(),
    }
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn a_file_reads_back_as_written() {
    let x = export();
    assert_eq!(decode(&encode(&x).unwrap()).unwrap(), x);
}

#[test]
fn files_that_cannot_be_verified_are_refused_with_the_reason() {
    let file = encode(&export()).unwrap();
    assert!(matches!(decode(b"plain text"), Err(Refused::NotGzip(_))));
    assert!(matches!(
        decode(&file[..file.len() / 2]),
        Err(Refused::NotGzip(_))
    ));
    assert!(matches!(
        decode(&gz(b"{\"a\":1}\n{}")),
        Err(Refused::NoHeader)
    ));
    assert!(matches!(decode(&gz(b"no newline")), Err(Refused::NoHeader)));
    // Another version, and a payload changed after its header was written.
    let mut text = Vec::new();
    GzDecoder::new(&file[..]).read_to_end(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let later = text.replacen("\"version\":1", "\"version\":2", 1);
    assert!(matches!(
        decode(&gz(later.as_bytes())),
        Err(Refused::Version(2))
    ));
    let damaged = text.replacen("\"sweep_id\":7", "\"sweep_id\":8", 1);
    let err = decode(&gz(damaged.as_bytes())).unwrap_err();
    assert!(matches!(err, Refused::Checksum { .. }), "{err}");
    assert!(err.to_string().contains("damaged"), "{err}");
}
