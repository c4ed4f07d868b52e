//! Tests of the renderings, beside them so `render.rs` holds the renderings alone.

use super::*;
use crate::limit::Limit;
use crate::table::compute::{build_table, sums_of};
use crate::table::fixtures::{result_row, table_build as build};
use crate::table::model::{ResultRow, TableBuild, TableInput, TableSweep};
use std::collections::BTreeMap;

/// Asserts that `text` contains each of `parts`, showing `text` when one is missing.
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from\n{text}");
    }
}

fn row(b: &str, limit: Limit, n: u64, s: bool) -> ResultRow {
    result_row(b, "a", 0, limit, n, s)
}

/// The table of `builds` on suite `a` (one position) at `limits`, with knob columns
/// `knobs` and counter columns `counters`, summed from `results` against
/// `head_reference`.
fn table_of(
    builds: &[TableBuild],
    knobs: &[&str],
    counters: &[String],
    limits: &[Limit],
    results: &[ResultRow],
) -> Table {
    let knobs: Vec<String> = knobs.iter().map(|k| k.to_string()).collect();
    build_table(TableInput {
        counters,
        knobs: &knobs,
        builds,
        limits,
        suites: &["a".to_string()],
        suite_sizes: &BTreeMap::from([("a".into(), 1)]),
        sums: &sums_of(results, "head_reference"),
    })
}

#[test]
fn renders_markdown_and_csv() {
    let builds = vec![
        build("head_reference", &[], true, false),
        build("K=300,R=2", &[("K", 300), ("R", 2)], false, false),
        build("K=9", &[("K", 9)], false, true),
    ];
    let d9 = Limit::Depth(9);
    let results = [
        row("head_reference", d9, 48_588_231, true),
        row("K=300,R=2", d9, 47_468_723, false),
    ];
    let t = table_of(&builds, &["K", "R"], &[], &[d9], &results);
    let md = render(&t, Format::Markdown);
    assert!(md.contains("### combined (1 positions, depth 9)"), "{md}");
    // Builds named after their knob values: no build column repeating the knob columns.
    assert!(
        md.contains("| K | R | nodes | delta | solved | done |"),
        "{md}"
    );
    assert!(!md.contains("| build |"), "{md}");
    assert_contains(
        &md,
        &[
            "| head_reference (default) | default | 48,588,231 | -- | 1/1 | 1/1 |",
            "| 300 | 2 | 47,468,723 | -2.30% | 0/1 (-1) | 1/1 |",
            "| 9 | default | -- | build failed | -- | 0/1 |",
        ],
    );
    let csv = render(&t, Format::Csv);
    assert!(
        csv.starts_with("build,state,limit,K,R,suite,positions,done,errors,nodes,solved,compared,nodes_delta_pct,solved_delta,geomean_ratio,ci95_lo,ci95_hi,median_ratio,faster,slower,equal,gained,lost,mcnemar_p,checks,mismatches\n"),
        "{csv}"
    );
    assert_contains(
        &csv,
        &[
            "\n\"K=300,R=2\",ok,depth 9,300,2,a,1,1,0,47468723,0,1,-2.30,-1,,,,,,,,,,,,\n",
            "\nK=9,build_failed,depth 9,9,default,a,1,0,0,0,0,0,,,,,,,,,,,,,,\n",
        ],
    );
    // Cross-checks: a warning under the table only for rows whose checks disagreed, and
    // the row's counts on its combined CSV line.
    assert!(!md.contains("cross-checks"), "{md}");
    let mut flagged = t.clone();
    flagged.tables[0].rows[1].checks = 4;
    flagged.tables[0].rows[1].mismatches = 3;
    let md = render(&flagged, Format::Markdown);
    assert!(
        md.contains("Warning: cross-checks of K=300,R=2 at depth 9: 3 of 4 disagree"),
        "{md}"
    );
    let csv = render(&flagged, Format::Csv);
    assert!(csv.contains(",-2.30,-1,,,,,,,,,,,4,3\n"), "{csv}");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(999), "999");
}

#[test]
fn the_heading_names_the_sweep_its_date_version_source_and_suites() {
    let builds = vec![build("head_reference", &[], true, false)];
    let mut t = build_table(TableInput {
        counters: &[],
        knobs: &[],
        builds: &builds,
        limits: &[Limit::Depth(9)],
        suites: &["b".to_string(), "a".to_string()],
        suite_sizes: &BTreeMap::from([("a".into(), 1), ("b".into(), 1)]),
        sums: &BTreeMap::new(),
    });
    let plain = render(&t, Format::Markdown);
    assert!(
        plain.starts_with("### "),
        "no heading without a sweep: {plain}"
    );
    t.sweep = Some(TableSweep {
        id: 7,
        name: "ceiling".into(),
        engine: "minnow".into(),
        submitted_at: "2026-12-01T09:05:59Z".parse().unwrap(),
        sweep_version: "1.2.3".into(),
    });
    t.suite_sha256 = BTreeMap::from([
        ("a".into(), "a".repeat(64)),
        ("b".into(), "0123456789abcdef".repeat(4)),
    ]);
    let md = render(&t, Format::Markdown);
    assert!(
        md.starts_with(
            "## sweep 7: ceiling (minnow), submitted 2026-12-01 09:05 UTC, Sweep 1.2.3\n\n\
             suites b 0123456789ab, a aaaaaaaaaaaa\n\n"
        ),
        "{md}"
    );
    t.source = Some(crate::source::SourceProvenance {
        sha256: "f".repeat(64),
        origin: Default::default(),
    });
    let md = render(&t, Format::Markdown);
    assert!(
        md.contains("\n\nsource ffffffffffff (registered); suites b 0123456789ab, a "),
        "{md}"
    );
    // The JSON carries the same, whole.
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json["sweep"]["sweep_version"], "1.2.3");
    assert_eq!(json["sweep"]["submitted_at"], "2026-12-01T09:05:59Z");
    assert_eq!(json["suite_sha256"]["a"], "a".repeat(64));
}

#[test]
fn counter_columns_show_sums_once_finished() {
    let builds = vec![
        build("head_reference", &[], true, false),
        build("K=3", &[("K", 3)], false, false),
        build("K=9", &[("K", 9)], false, true),
    ];
    let d9 = Limit::Depth(9);
    let mut results = [
        row("head_reference", d9, 100, true),
        row("K=3", d9, 90, false),
    ];
    results[0].counters = BTreeMap::from([("null_skipped".into(), 1234)]);
    results[1].counters = BTreeMap::from([("null_skipped".into(), 56), ("x".into(), 1)]);
    let counters = ["null_skipped".to_string(), "never".to_string()];
    let mut t = table_of(&builds, &["K"], &counters, &[d9], &results);
    // Before the sums are attached (a running sweep), the columns say so.
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "| done | null_skipped | never |",
            "| 1/1 | pending | pending |",
        ],
    );
    crate::table::counters::attach_counters(&mut t, d9, &results);
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "| head_reference (default) | 100 | -- | 1/1 | 1/1 | 1,234 | -- |",
            "| 3 | 90 | -10.00% | 0/1 (-1) | 1/1 | 56 | -- |",
            "| 9 | -- | build failed | -- | 0/1 | -- | -- |",
        ],
    );
    let csv = render(&t, Format::Csv);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",mcnemar_p,checks,mismatches,null_skipped,never"),
        "{csv}"
    );
    assert!(
        csv.contains("\nhead_reference,ok,depth 9,default,a,1,1,0,100,1,1,,,,,,,,,,,,,,,1234,\n"),
        "{csv}"
    );
    let json: serde_json::Value = serde_json::from_str(&render(&t, Format::Json)).unwrap();
    assert_eq!(
        json["counters"],
        serde_json::json!(["null_skipped", "never"])
    );
    // JSON carries every counter, not only the columns.
    assert_eq!(
        json["tables"][0]["rows"][1]["combined"]["counters"],
        serde_json::json!({"null_skipped": 56, "x": 1})
    );
}

#[test]
fn benches_are_listed_with_the_same_bench_note_and_mismatches() {
    let mut t = crate::table::bench::table_of_two();
    let plain = render(&t, Format::Markdown);
    assert!(!plain.contains("Bench"), "no bench, no section: {plain}");
    let bench = |nodes, same, mismatches: Vec<String>| {
        Some(crate::table::RowBench {
            nodes,
            same_as_baseline: same,
            mismatches,
        })
    };
    t.tables[0].rows[0].bench = bench(Some(1_265_358), false, vec![]);
    t.tables[0].rows[1].bench = bench(Some(1_265_358), true, vec!["worker w2 benched 5".into()]);
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "| base | 1,265,358 |  |",
            "| v1 | 1,265,358 | same bench as the baseline: probably no functional change |",
            "Warning: bench mismatch on v1: worker w2 benched 5.",
        ],
    );
    t.tables[0].rows[1].bench = None;
    assert!(render(&t, Format::Markdown).contains("| v1 | not reported |"));
}

#[test]
fn renders_paired_statistics() {
    let builds = vec![
        build("head_reference", &[], true, false),
        build("K=3", &[("K", 3)], false, false),
    ];
    let d9 = Limit::Depth(9);
    let results = [
        row("head_reference", d9, 48_588_231, true),
        row("K=3", d9, 47_468_723, false),
    ];
    let mut t = table_of(&builds, &["K"], &[], &[d9], &results);
    crate::table::paired::attach_stats(&mut t, d9, &results, "1");
    // One pair: every resample is that pair, so the interval is the ratio itself
    // (python3: 47468723/48588231 = 0.9769592...).
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "### paired statistics vs head_reference (depth 9)",
            "| K=3 | combined | 1 | 0.977 [0.977, 0.977] | 0.977 | 1/0/0 | +0/-1 | 1.000 |",
        ],
    );
    let csv = render(&t, Format::Csv);
    assert!(
        csv.contains(",-2.30,-1,0.976959,0.976959,0.976959,0.976959,1,0,0,0,1,1.000000,0,0\n"),
        "{csv}"
    );
}

#[test]
fn several_limits_get_a_summary_and_pending_rows_say_so() {
    let builds = vec![
        build("head_reference", &[], true, false),
        build("K=1", &[("K", 1)], false, false),
    ];
    let (d4, d6) = (Limit::Depth(4), Limit::Depth(6));
    let results = [
        row("head_reference", d4, 100, true),
        row("K=1", d4, 90, true),
        row("head_reference", d6, 400, true),
    ];
    let t = table_of(&builds, &["K"], &[], &[d4, d6], &results);
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "### combined (1 positions, depth 6)",
            "| build | depth 4 | depth 6 |",
            "| K=1 | -10.00% | pending |",
            "| 1 | -- | pending | 0/1 | 0/1 |",
        ],
    );
}

/// A table of the baseline and three variants at depth 9: `K=3` searched fewer nodes but is
/// slower, `K=4`'s speed job failed before its first pair, `K=5` has no speed.
fn table_with_speed() -> Table {
    let builds = vec![
        build("head_reference", &[], true, false),
        build("K=3", &[("K", 3)], false, false),
        build("K=4", &[("K", 4)], false, false),
        build("K=5", &[("K", 5)], false, false),
    ];
    let d9 = Limit::Depth(9);
    let results = [
        row("head_reference", d9, 1_000, true),
        row("K=3", d9, 900, true),
        row("K=4", d9, 1_000, true),
        row("K=5", d9, 1_000, true),
    ];
    let mut t = table_of(&builds, &["K"], &[], &[d9], &results);
    t.tables[0].rows[1].speed = Some(crate::table::fixtures::fewer_nodes_but_slower());
    t.tables[0].rows[2].speed = Some(crate::table::speed_of(
        &[],
        Some("engine crashed, at move 3 | exit 11".into()),
        1,
    ));
    t
}

#[test]
fn speed_shows_its_figures_the_flag_and_failed_jobs() {
    let t = table_with_speed();
    let md = render(&t, Format::Markdown);
    assert_contains(
        &md,
        &[
            "### speed vs head_reference (depth 9)",
            "CPU time (user + system) of the engine processes",
            "| build | pairs | time × [95% CI] | nps × | nodes × | wall × | |",
            "| K=3 | 10 | 1.302 [1.281, 1.324] | 0.691 | 0.900 | 1.299 | **fewer nodes but slower** |",
            "| K=4 | 0 | -- | -- | -- | -- | speed job failed: engine crashed, at move 3 \\| exit 11 |",
            "**fewer nodes but slower**: the variant searched fewer nodes",
        ],
    );
    assert!(!md.contains("| K=5 | "), "no speed, no line: {md}");
    // After the tables in Markdown, before them in a review (with the statistics).
    let at = |md: &str, part: &str| md.find(part).unwrap_or_else(|| panic!("{part}: {md}"));
    assert!(at(&md, "### combined") < at(&md, "### speed vs"), "{md}");
    let review = render(&t, Format::Review);
    assert!(
        at(&review, "### speed vs") < at(&review, "### combined"),
        "{review}"
    );
    // One pair: a ratio, no interval, and the reason.
    let mut one = t.clone();
    let s = one.tables[0].rows[1].speed.as_mut().unwrap();
    (s.repeats, s.ci95, s.fewer_nodes_but_slower) = (1, None, false);
    let md = render(&one, Format::Markdown);
    assert!(
        md.contains("| K=3 | 1 | 1.302 (one pair: no interval) | 0.691 |"),
        "{md}"
    );
    assert!(!md.contains("**fewer nodes but slower**"), "{md}");
}

#[test]
fn speed_columns_end_the_csv_only_when_a_row_has_speed() {
    let t = table_with_speed();
    let csv = render(&t, Format::Csv);
    assert!(
        csv.lines().next().unwrap().ends_with(
            ",checks,mismatches,speed_time_ratio,speed_ci95_low,speed_ci95_high,speed_nps_ratio,speed_repeats,speed_flag,speed_error"
        ),
        "{csv}"
    );
    assert_contains(
        &csv,
        &[
            // The row's speed on its combined line only, as its cross-checks.
            "\nK=3,ok,depth 9,3,a,1,1,0,900,1,1,-10.00,0,,,,,,,,,,,,,,,,,,,\n",
            ",0,0,1.3021,1.2812,1.3244,0.6912,10,fewer_nodes_but_slower,\n",
            // A failed job: no figure becomes a number; its error quoted (it has a comma).
            ",0,0,,,,,0,,\"engine crashed, at move 3 | exit 11\"\n",
            // No speed: empty fields.
            "\nK=5,ok,depth 9,5,combined,1,1,0,1000,1,1,0.00,0,,,,,,,,,,,0,0,,,,,,,\n",
        ],
    );
    let mut plain = t.clone();
    for r in &mut plain.tables[0].rows {
        r.speed = None;
    }
    assert!(!render(&plain, Format::Csv).contains("speed_"));
}
