//! Issue 10 item 6: the engine's search counters (`info string counters k=v ...`) reach the
//! table. A real local sweep of minnow names `null_skipped` as a column; its sums must equal
//! what minnow itself prints when each variant is built and run without Sweep (the `minnow`
//! test crate's own build and UCI code, not the worker's).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{cli, repo};

const CONFIG: &str = r#"
name = "counters"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [300, 3000]
suites = ["ecm_confident_quick"]
depth = 6
chunk_size = 10
counters = ["null_skipped"]
"#;

/// (null_skipped, null_tried) summed over the suite, run by minnow built with `value` (none:
/// the source's default), each position after `ucinewgame` with the engine definition's options.
fn minnow_sums(value: Option<i64>, dir: &std::path::Path) -> (u64, u64) {
    let defines: Vec<(&str, i64)> = value
        .map(|v| vec![("NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS", v)])
        .unwrap_or_default();
    let exe = minnow::build(
        &defines,
        &dir.join(value.map_or("minnow-default".to_string(), |v| format!("minnow-{v}"))),
    )
    .unwrap();
    let positions = minnow::read_epd(&repo().join("suites/ecm_confident_quick.epd")).unwrap();
    let mut uci = minnow::Uci::spawn(&exe, Duration::from_secs(60)).unwrap();
    uci.handshake().unwrap();
    uci.send("setoption name Hash value 16").unwrap();
    uci.send("setoption name Threads value 1").unwrap();
    uci.sync().unwrap();
    let mut sums = (0, 0);
    for p in &positions {
        let r = uci
            .search_new(&format!("fen {}", p.fen), "go depth 6")
            .unwrap();
        sums.0 += r.counter("null_skipped");
        sums.1 += r.counter("null_tried");
    }
    uci.quit().unwrap();
    sums
}

#[test]
fn counters_in_the_table_are_the_engines_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("counters.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let table = common::run_json(config.to_str().unwrap(), dir.path(), &[]);
    let db = dir.path().join("sweep.db");
    assert_eq!(table["counters"], serde_json::json!(["null_skipped"]));

    let expected: BTreeMap<&str, (u64, u64)> = [
        ("head_reference", None),
        ("NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS=300", Some(300)),
        ("NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS=3000", Some(3000)),
    ]
    .into_iter()
    .map(|(build, value)| (build, minnow_sums(value, dir.path())))
    .collect();
    let rows = table["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let build = row["build"].as_str().unwrap();
        let (skipped, tried) = expected[build];
        let counters = &row["suites"]["ecm_confident_quick"]["counters"];
        assert_eq!(
            counters["null_skipped"].as_u64(),
            Some(skipped),
            "{build}: {counters}"
        );
        // Every counter the engine prints is in the JSON, not only the named columns.
        assert_eq!(
            counters["null_tried"].as_u64(),
            Some(tried),
            "{build}: {counters}"
        );
        assert_eq!(
            row["combined"]["counters"], *counters,
            "one suite: combined is the same"
        );
    }
    // The knob skips more null probes as its ceiling rises: the column is not a constant.
    let skipped: Vec<u64> = expected.values().map(|v| v.0).collect();
    assert!(skipped.iter().any(|&s| s > 0), "{expected:?}");

    // The Markdown shows the named counter as a column, from the same stored results.
    let (code, md, stderr) = cli(&["table", "1", "--database", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(md.contains("| done | null_skipped |"), "{md}");
    let (s3000, _) = expected["NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS=3000"];
    assert!(
        md.contains(&format!(
            "| 90/90 | {} |",
            sweep_domain::table::render::thousands(s3000)
        )),
        "{md}"
    );
}
