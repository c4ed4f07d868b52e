//! Tests of the whole path from config text to a validated spec: most rules are only
//! observable through [`SweepConfig::validate`], and they share one engine, suites and
//! configs, so they live together rather than beside each part.

use std::collections::BTreeMap;

use super::{SweepConfig, SweepSpec, MAX_COUNTER_COLUMNS};
use crate::bounds::MAX_DESCRIPTION;
use crate::crosscheck::share::Share;
use crate::engine::EngineDef;
use crate::limit::Limit;
use crate::FieldError;

fn engines() -> BTreeMap<String, EngineDef> {
    let def = EngineDef::from_toml(
        r#"
name = "minnow"
protocol = "uci"
binary = "minnow"
[source]
path = "."
[build]
command = ["make", "OUT={out}"]
[[knobs]]
name = "CEIL"
min = 0
max = 3000
default = 0
[[knobs]]
name = "R"
min = 1
max = 6
default = 3
"#,
    )
    .unwrap();
    BTreeMap::from([("minnow".to_string(), def)])
}

fn suites() -> BTreeMap<String, usize> {
    BTreeMap::from([("a".to_string(), 90), ("b".to_string(), 25)])
}

const OK: &str = r#"
name = "demo"
engine = "minnow"
knob = "CEIL"
values = [0, 300, 3000]
suites = ["a", "b"]
depth = 6
chunk_size = 10
"#;

fn check(text: &str) -> Result<SweepSpec, FieldError> {
    SweepConfig::from_toml(text)?.validate(&engines(), &suites())
}

#[test]
fn accepts_a_good_config() {
    let spec = check(OK).unwrap();
    assert_eq!(spec.baseline.name, "head_reference");
    assert_eq!(spec.limits, vec![Limit::Depth(6)]);
    assert_eq!(spec.knobs, vec!["CEIL".to_string()]);
    assert_eq!(spec.variants[1].name, "CEIL=300");
    let json = serde_json::to_vec(&SweepConfig::from_toml(OK).unwrap()).unwrap();
    assert_eq!(
        SweepConfig::from_json(&json)
            .unwrap()
            .validate(&engines(), &suites())
            .unwrap(),
        spec
    );
}

#[test]
fn counter_columns_are_checked_and_kept_out_of_old_identities() {
    let with = |list: &str| {
        check(&OK.replace(
            "chunk_size = 10",
            &format!("chunk_size = 10\ncounters = {list}"),
        ))
    };
    let spec = with(r#"["null_skipped", "tt.hits"]"#).unwrap();
    assert_eq!(
        spec.counters,
        vec!["null_skipped".to_string(), "tt.hits".to_string()]
    );
    for (list, field, problem) in [
        (r#"["a b"]"#, "counters[0]", "not a counter name"),
        (r#"["x", "x"]"#, "counters[1]", "named twice"),
        (r#"[""]"#, "counters[0]", "not a counter name"),
    ] {
        let err = with(list).unwrap_err();
        assert_eq!(err.field, field, "{list}: {err}");
        assert!(err.problem.contains(problem), "{list}: {err}");
    }
    let many: Vec<String> = (0..=MAX_COUNTER_COLUMNS)
        .map(|i| format!("\"c{i}\""))
        .collect();
    let err = with(&format!("[{}]", many.join(", "))).unwrap_err();
    assert_eq!(err.field, "counters");
    // A spec without counters serializes as before, so sweeps stored earlier keep their
    // identity (an identical resubmission still finds them).
    let plain = check(OK).unwrap();
    assert!(!serde_json::to_string(&plain).unwrap().contains("counters"));
}

#[test]
fn each_bad_field_is_named() {
    // (what OK says, what the bad config says instead, the field named, the problem).
    let edits = [
        (
            r#"engine = "minnow""#,
            r#"engine = "nope""#,
            "engine",
            "unknown engine",
        ),
        (
            r#"knob = "CEIL""#,
            r#"knob = "OTHER""#,
            "knob",
            "not a declared",
        ),
        ("3000]", "3001]", "values[2]", "out of range"),
        (r#""b"]"#, r#""zz"]"#, "suites[1]", "unknown suite"),
        ("depth = 6", "depth = 0", "depth", "out of range"),
        ("depth = 6", "depth = 1000", "depth", "out of range"),
        ("depth = 6", "depht = 6", "depht", "unknown field"),
        ("depth = 6", r#"depth = "six""#, "depth", "invalid type"),
        (
            "chunk_size = 10",
            "chunk_size = -1",
            "chunk_size",
            "out of range",
        ),
        ("[0, 300", "[300, 300", "values[1]", "twice"),
        (
            "depth = 6",
            "depth = 6\ndepths = [6, 8]",
            "depths",
            "only one of",
        ),
        ("depth = 6", "depths = [6, 6]", "depths[1]", "twice"),
        ("depth = 6", "nodes = 0", "nodes", "out of range"),
        ("depth = 6", "", "depth", "give a search limit"),
        ("values = [0, 300, 3000]", "", "values", "give the values"),
        (r#"knob = "CEIL""#, "", "knob", "needs a `knob`"),
    ];
    assert_each_bad_field_named(OK, &edits);
    let grid = check(&format!("{OK}\n[grid]\nCEIL = [1]\n")).unwrap_err();
    assert_eq!(grid.field, "grid", "{grid}");
    assert!(grid.problem.contains("only one of"), "{grid}");
}

/// Checks each edit of `base`, (what `base` says, what the bad config says instead, the
/// field the error names, words of its problem): the edited config is refused, naming
/// that field and that problem.
fn assert_each_bad_field_named(base: &str, edits: &[(&str, &str, &str, &str)]) {
    for (from, to, field, words) in edits {
        assert!(base.contains(from), "{from:?} is not in the config");
        let err = check(&base.replace(from, to)).unwrap_err();
        assert_eq!(err.field, *field, "{err}");
        assert!(err.problem.contains(words), "{err}");
    }
}

const BASE: &str = r#"
name = "demo"
engine = "minnow"
suites = ["a", "b"]
depths = [6, 8]
"#;

#[test]
fn grid_is_a_cartesian_product() {
    let spec = check(&format!("{BASE}[grid]\nCEIL = [0, 300]\nR = [2, 3]\n")).unwrap();
    assert_eq!(spec.knobs, vec!["CEIL".to_string(), "R".to_string()]);
    let names: Vec<&str> = spec.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        ["CEIL=0,R=2", "CEIL=0,R=3", "CEIL=300,R=2", "CEIL=300,R=3"]
    );
    assert_eq!(
        spec.variants[2].defines,
        BTreeMap::from([("CEIL".into(), 300), ("R".into(), 2)])
    );
    assert_eq!(spec.limits, vec![Limit::Depth(6), Limit::Depth(8)]);
    let err = check(&format!("{BASE}[grid]\nCEIL = [0, 99999]\n")).unwrap_err();
    assert_eq!(err.field, "grid.CEIL[1]", "{err}");
    let err = check(&format!("{BASE}[grid]\nNOPE = [1]\n")).unwrap_err();
    assert_eq!(err.field, "grid.NOPE", "{err}");
}

#[test]
fn explicit_variants_move_knobs_together() {
    let text = format!(
        "{BASE}[[variants]]\nname = \"band-a\"\ndefines = {{ CEIL = 10, R = 2 }}\n\
         [[variants]]\nname = \"band-b\"\ndefines = {{ CEIL = 30 }}\n"
    );
    let spec = check(&text).unwrap();
    assert_eq!(spec.knobs, vec!["CEIL".to_string(), "R".to_string()]);
    assert_eq!(spec.variants[0].name, "band-a");
    assert_eq!(
        spec.variants[1].defines,
        BTreeMap::from([("CEIL".into(), 30)])
    );
    let dup = text.replace("CEIL = 30 ", "CEIL = 10, R = 2 ");
    assert_eq!(check(&dup).unwrap_err().field, "variants[1].defines");
    let clash = text.replace("band-b", "head_reference");
    assert_eq!(check(&clash).unwrap_err().field, "variants[1].name");
    let bad = text.replace("band-b", "a|b");
    assert_eq!(check(&bad).unwrap_err().field, "variants[1].name");
    let unknown = text.replace("CEIL = 30", "ZZ = 30");
    assert_eq!(check(&unknown).unwrap_err().field, "variants[1].defines.ZZ");
}

#[test]
fn a_variant_may_build_other_code_and_each_wrong_part_is_named() {
    let git = "[source]\ngit = \"https://git.example.org/minnow\"\n";
    let text = format!("{BASE}[[variants]]\nname = \"patch\"\nrev = \"feature\"\n{git}");
    let spec = check(&text).unwrap();
    let source = spec.variants[0].source.as_ref().expect("its own source");
    assert_eq!(source.origin.git_rev.as_deref(), Some("feature"));
    assert_eq!(source.origin.kind, crate::source::SourceKind::Git);
    assert!(spec.variants[0].defines.is_empty());
    let sha = "a".repeat(64);
    let uploaded = format!("{BASE}[[variants]]\nname = \"patch\"\nsha256 = \"{sha}\"\n");
    assert_eq!(
        check(&uploaded).unwrap().variants[0]
            .source
            .as_ref()
            .unwrap()
            .sha256,
        sha
    );
    let named = |text: String| check(&text).unwrap_err().field;
    let no_git = format!("{BASE}[[variants]]\nname = \"patch\"\nrev = \"feature\"\n");
    assert_eq!(named(no_git), "variants[0].rev");
    let both = text.replace(
        "rev = \"feature\"",
        &format!("rev = \"feature\"\nsha256 = \"{sha}\""),
    );
    assert_eq!(named(both), "variants[0]");
    assert_eq!(named(uploaded.replace(&sha, "xyz")), "variants[0].sha256");
    assert_eq!(
        named(text.replace("\"feature\"", "\"--upload-pack=x\"")),
        "variants[0].rev"
    );
    let nothing = format!("{BASE}[[variants]]\nname = \"patch\"\n");
    assert_eq!(named(nothing), "variants[0].defines");
    let twice = format!(
        "{BASE}[[variants]]\nname = \"a\"\nrev = \"f\"\n[[variants]]\nname = \"b\"\nrev = \"f\"\n{git}"
    );
    assert_eq!(named(twice), "variants[1].defines");
    // Old stored specs (no `source` on variants) read back as before.
    let old = check(&format!(
        "{BASE}[[variants]]\nname = \"v\"\ndefines = {{ CEIL = 1 }}\n"
    ))
    .unwrap();
    assert!(!serde_json::to_string(&old).unwrap().contains("\"source\""));
}

#[test]
fn baseline_alone_and_node_limits() {
    let spec = check(&BASE.replace("depths = [6, 8]", "nodes = 20000")).unwrap();
    assert!(spec.variants.is_empty());
    assert!(spec.knobs.is_empty());
    assert_eq!(spec.limits, vec![Limit::Nodes(20_000)]);
}

#[test]
fn limits_jobs() {
    let many: Vec<String> = (0..=255).map(|v| v.to_string()).collect();
    let seed = OK
        .replace("[0, 300, 3000]", &format!("[{}]", many.join(",")))
        .replace("chunk_size = 10", "chunk_size = 1");
    let big = BTreeMap::from([("a".to_string(), 879), ("b".to_string(), 1000)]);
    // The seed plan's scale: 256 values on the 879-position suite, one position per job.
    let one = seed.replace(r#"suites = ["a", "b"]"#, r#"suites = ["a"]"#);
    let config = SweepConfig::from_toml(&one).unwrap();
    assert!(config.validate(&engines(), &big).is_ok());
    // Twice the suites and twice the depths: 965,806 jobs, over the bound.
    let config = SweepConfig::from_toml(&seed.replace("depth = 6", "depths = [6, 7]")).unwrap();
    let err = config.validate(&engines(), &big).unwrap_err();
    assert!(err.problem.contains("jobs"), "{err}");
}

#[test]
fn free_text_is_bounded_and_free_of_control_characters() {
    let huge = "x".repeat(3_900_000);
    let err = check(&format!("{OK}description = \"{huge}\"\n")).unwrap_err();
    assert_eq!(err.field, "description", "{err}");
    assert!(
        err.problem
            .contains(&format!("at most {MAX_DESCRIPTION} bytes")),
        "{err}"
    );
    let spec = check(&format!(
        "{OK}description = \"\"\"\nline one\n\tline two\"\"\"\n"
    ))
    .unwrap();
    assert!(spec.description.contains("\tline two"));
    let cases = [
        (
            OK.replace("name = \"demo\"", "name = \"de\\u0000mo\""),
            "name",
        ),
        (format!("{OK}description = \"a\\u0000b\"\n"), "description"),
        (
            OK.replace(
                "engine = \"minnow\"",
                &format!("engine = \"{}\"", "e".repeat(300)),
            ),
            "engine",
        ),
        (
            OK.replace("knob = \"CEIL\"", "knob = \"CE\\u0007IL\""),
            "knob",
        ),
        (OK.replace("\"b\"]", "\"b\\u0000\"]"), "suites[1]"),
        (
            format!("{BASE}[[variants]]\nname = \"v\\u001b\"\ndefines = {{ CEIL = 1 }}\n"),
            "variants[0].name",
        ),
        (
            format!("{BASE}[[variants]]\nname = \"v\"\ndefines = {{ \"C\\u0000\" = 1 }}\n"),
            "variants[0].defines",
        ),
        (
            format!("{BASE}[grid]\n\"{}\" = [1]\n", "K".repeat(300)),
            "grid",
        ),
        (
            format!("{OK}[baseline]\nname = \"{}\"\n", "b".repeat(65)),
            "baseline.name",
        ),
    ];
    for (text, field) in cases {
        let err = check(&text).unwrap_err();
        assert_eq!(err.field, field, "{err}");
        assert!(err.problem.len() < 200, "the text is not echoed: {err}");
    }
}

#[test]
fn cross_checks_are_checked_and_kept_out_of_old_identities() {
    let with =
        |extra: &str| check(&OK.replace("chunk_size = 10", &format!("chunk_size = 10\n{extra}")));
    // Defaults: 2 %, at least 3, and left out of the stored spec (old identities stay).
    let plain = check(OK).unwrap();
    assert_eq!(plain.cross_check, Share(0.02));
    assert_eq!(plain.cross_check_min, 3);
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("cross_check"), "{json}");
    let stored: SweepSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(stored, plain);
    // Written out when not the default, and read back.
    let off = with("cross_check = 0\ncross_check_min = 5").unwrap();
    assert_eq!((off.cross_check, off.cross_check_min), (Share(0.0), 5));
    let json = serde_json::to_string(&off).unwrap();
    assert!(json.contains("\"cross_check\":0.0"), "{json}");
    assert_eq!(serde_json::from_str::<SweepSpec>(&json).unwrap(), off);
    assert_ne!(off.identity(None), plain.identity(None));
    for (extra, field) in [
        ("cross_check = 1.5", "cross_check"),
        ("cross_check = -0.1", "cross_check"),
        ("cross_check = nan", "cross_check"),
        ("cross_check_min = 10001", "cross_check_min"),
        ("cross_check = \"lots\"", "cross_check"),
    ] {
        let err = with(extra).unwrap_err();
        assert_eq!(err.field, field, "{extra}: {err}");
    }
}

#[test]
fn identity_is_engine_source_and_spec() {
    let spec = check(OK).unwrap();
    let id = spec.identity(Some("abc"));
    assert_eq!(id.len(), 64);
    // Field order in the config does not matter; the spec's content does.
    let reordered = OK
        .replace("depth = 6\n", "")
        .replace("engine", "depth = 6\nengine");
    assert_eq!(check(&reordered).unwrap().identity(Some("abc")), id);
    assert_ne!(spec.identity(Some("abd")), id);
    assert_ne!(spec.identity(None), id);
    let other = check(&OK.replace("depth = 6", "depth = 7")).unwrap();
    assert_ne!(other.identity(Some("abc")), id);
}

#[test]
fn declared_knobs_join_the_engine_for_this_sweep() {
    let declare = "[[knobs]]\nname = \"NEW\"\nmin = 0\nmax = 9\ndefault = 3\n";
    let text = format!(
        "{}{declare}",
        OK.replace("knob = \"CEIL\"", "knob = \"NEW\"")
            .replace("[0, 300, 3000]", "[1, 9]")
    );
    let (spec, def) = SweepConfig::from_toml(&text)
        .unwrap()
        .validate_with_engine(&engines(), &suites())
        .unwrap();
    assert_eq!(spec.knobs, ["NEW"]);
    assert_eq!(def.knob("NEW").map(|k| k.max), Some(9));
    assert_eq!(def.knobs.len(), engines()["minnow"].knobs.len() + 1);
    // The declaration survives the JSON the CLI sends.
    let json = serde_json::to_vec(&SweepConfig::from_toml(&text).unwrap()).unwrap();
    assert_eq!(
        SweepConfig::from_json(&json).unwrap(),
        SweepConfig::from_toml(&text).unwrap()
    );
    let edits = [
        ("[1, 9]", "[1, 10]", "values[1]", "out of range"),
        (
            r#"name = "NEW""#,
            r#"name = "R""#,
            "knobs[0].name",
            "already declares",
        ),
        (
            "default = 3\n",
            "default = 3\nkind = \"option\"\n",
            "knobs[0].kind",
            "unknown field",
        ),
        (
            r#"name = "NEW""#,
            r#"name = "N\u0000""#,
            "knobs[0].name",
            "control character",
        ),
    ];
    assert_each_bad_field_named(&text, &edits);
    // Without the declaration the knob is unknown, and the error says how to declare it.
    let err = check(&text.replace(declare, "")).unwrap_err();
    assert_eq!(err.field, "knob");
    assert!(err.problem.contains("[[knobs]]"), "{err}");
}

#[test]
fn toml_errors_give_line_column_and_a_suggestion() {
    let text = "name = \"x\"\nengine = \"minnow\"\nknob = \"K\"\nvalues = [1, 2\n";
    let err = SweepConfig::from_toml(text).unwrap_err();
    assert_eq!(err.field, "body");
    // Where the parser noticed the missing `]`: the end of the text.
    assert!(
        err.problem.starts_with("line 5, column 1: invalid array"),
        "{err}"
    );
    assert!(!err.problem.contains('\n'), "one line: {err}");
    let text = "name = \"x\"\nengine = \"minnow\"\nknob = \"K\"\nvaluez = [1]\n";
    let err = SweepConfig::from_toml(text).unwrap_err();
    assert_eq!(err.field, "valuez");
    assert!(err.problem.contains("did you mean `values`?"), "{err}");
}

#[test]
fn json_errors_name_the_field() {
    let err = SweepConfig::from_json(br#"{"name":"x","engine":"minnow","knob":"CEIL","values":[1],"suites":["a"],"depth":3,"extra":1}"#).unwrap_err();
    assert_eq!(err.field, "extra");
    let err = SweepConfig::from_json(b"{not json").unwrap_err();
    assert_eq!(err.field, "body");
    assert!(err.problem.contains("key must be a string"), "{err}");
    let err = SweepConfig::from_json(br#"{"name":"x"}"#).unwrap_err();
    assert_eq!(err.field, "engine", "{err}");
}

const STAGED: &str = r#"
name = "staged"
engine = "minnow"
knob = "CEIL"
values = [0, 300, 1000, 3000]
[[stages]]
suites = ["b"]
depth = 6
[[stages]]
suites = ["a"]
depth = 6
promote = 2
max_solved_loss = 1
"#;

#[test]
fn stages_keep_the_first_as_the_sweep_and_the_rest_in_order() {
    let spec = check(STAGED).unwrap();
    assert_eq!(spec.suites, ["b"]);
    assert_eq!(spec.limits, [Limit::Depth(6)]);
    assert_eq!(spec.stage_count(), 2);
    assert_eq!(spec.stages[0].suites, ["a"]);
    assert_eq!(
        (spec.stages[0].promote, spec.stages[0].max_solved_loss),
        (2, 1)
    );
    assert_eq!(spec.all_suites(), ["b", "a"]);
    assert_eq!(spec.stage(1).unwrap().promotion.unwrap().promote, 2);
    assert!(spec.stage(2).is_none());
    // A sweep without stages keeps the identity it had before stages existed.
    let plain = check(OK).unwrap();
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("stages").is_none());
    let again: SweepSpec = serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(again, spec);
}

#[test]
fn each_bad_stage_field_is_named() {
    let cases: &[(&str, &str, &str)] = &[
        ("promote = 2", "promote = 5", "stages[1].promote"),
        ("promote = 2", "promote = 0", "stages[1].promote"),
        ("promote = 2\n", "\n", "stages[1].promote"),
        (
            "max_solved_loss = 1",
            "max_solved_loss = -1",
            "stages[1].max_solved_loss",
        ),
        ("suites = [\"a\"]", "suites = [\"b\"]", "stages[1].suites"),
        (
            "suites = [\"a\"]",
            "suites = [\"zz\"]",
            "stages[1].suites[0]",
        ),
        ("suites = [\"a\"]", "suites = []", "stages[1].suites"),
        (
            "depth = 6\npromote",
            "depth = 99\npromote",
            "stages[1].depth",
        ),
        ("depth = 6\npromote", "promote", "stages[1].depth"),
        (
            "depth = 6\npromote",
            "depth = 6\nnodes = 5\npromote",
            "stages[1].nodes",
        ),
        (
            "suites = [\"b\"]\ndepth = 6",
            "suites = [\"b\"]\ndepth = 6\npromote = 1",
            "stages[0].promote",
        ),
        (
            "values = [0, 300, 1000, 3000]",
            "values = [0, 300, 1000, 3000]\nsuites = [\"a\"]",
            "suites",
        ),
        (
            "values = [0, 300, 1000, 3000]",
            "values = [0, 300, 1000, 3000]\ndepth = 5",
            "depth",
        ),
        (
            "knob = \"CEIL\"\nvalues = [0, 300, 1000, 3000]",
            "",
            "stages",
        ),
    ];
    for (from, to, field) in cases {
        assert!(STAGED.contains(from), "{from}");
        let text = STAGED.replacen(from, to, 1);
        let err = check(&text).expect_err(&text);
        assert_eq!(err.field, *field, "{text}\n{err}");
    }
    // A repeated (suite, limit) says which stage measured it first.
    let err = check(&STAGED.replacen("suites = [\"a\"]", "suites = [\"b\"]", 1)).unwrap_err();
    assert!(
        err.problem.contains("already measured by stages[0]"),
        "{err}"
    );
    // The same suite at a new limit is something new.
    let spec = check(&STAGED.replacen(
        "suites = [\"a\"]\ndepth = 6",
        "suites = [\"b\"]\ndepth = 7",
        1,
    ))
    .unwrap();
    assert_eq!(spec.stages[0].limits, [Limit::Depth(7)]);
}

const SEARCHED: &str = r#"
name = "searched"
engine = "minnow"
suites = ["a"]
depth = 6

[grid]
CEIL = [0, 300, 1000]
R = [2, 3, 4]

[search]
strategy = "coordinate"
max_rounds = 2
max_solved_loss = 1
"#;

#[test]
fn a_search_starts_at_the_baselines_settings() {
    let spec = check(SEARCHED).unwrap();
    let search = spec.search.clone().unwrap();
    assert_eq!(search.start, "CEIL=0,R=3");
    assert_eq!((search.max_rounds, search.max_solved_loss), (2, 1));
    assert_eq!(spec.variants.len(), 9);
    // The baseline's own defines move the start.
    let moved = check(&SEARCHED.replace("[search]", "[baseline]\ndefines = { R = 4 }\n\n[search]"))
        .unwrap();
    assert_eq!(moved.search.unwrap().start, "CEIL=0,R=4");
    // Defaults: 3 rounds, no solved position lost.
    let plain = check(
        &SEARCHED
            .replace("max_rounds = 2\n", "")
            .replace("max_solved_loss = 1\n", ""),
    )
    .unwrap();
    let s = plain.search.unwrap();
    assert_eq!((s.max_rounds, s.max_solved_loss), (3, 0));
    // A sweep without a search keeps the identity it had before searches existed.
    let json = serde_json::to_value(check(OK).unwrap()).unwrap();
    assert!(json.get("search").is_none());
}

#[test]
fn each_bad_search_field_is_named() {
    assert_each_bad_field_named(
        SEARCHED,
        &[
            (
                "\"coordinate\"",
                "\"spsa\"",
                "search.strategy",
                "unknown strategy",
            ),
            (
                "max_rounds = 2",
                "max_rounds = 0",
                "search.max_rounds",
                "out of range",
            ),
            (
                "max_rounds = 2",
                "max_rounds = 11",
                "search.max_rounds",
                "out of range",
            ),
            (
                "max_solved_loss = 1",
                "max_solved_loss = -1",
                "search.max_solved_loss",
                "out of range",
            ),
            ("R = [2, 3, 4]", "R = [2, 4]", "grid.R", "give 3"),
            (
                "[grid]\nCEIL = [0, 300, 1000]\nR = [2, 3, 4]",
                "knob = \"R\"\nvalues = [2, 3]",
                "search",
                "needs a [grid]",
            ),
            (
                "max_rounds = 2",
                "max_round = 2",
                "search.max_round",
                "unknown field",
            ),
        ],
    );
    let staged = SEARCHED.replace("suites = [\"a\"]\ndepth = 6\n", "")
        + "\n[[stages]]\nsuites = [\"a\"]\ndepth = 6\n\n[[stages]]\nsuites = [\"b\"]\ndepth = 6\npromote = 2\nmax_solved_loss = 1\n";
    let err = check(&staged).unwrap_err();
    assert_eq!(err.field, "stages[1].max_solved_loss", "{err}");
    assert!(check(&staged.replace("max_solved_loss = 1\n", "")).is_ok());
}

#[test]
fn speed_takes_its_defaults_and_names_each_bad_field() {
    let with = |extra: &str| check(&format!("{OK}\n[speed]\n{extra}"));
    // Without `[speed]`: none, and nothing of it in the stored spec (old identities stay).
    let plain = check(OK).unwrap();
    assert_eq!(plain.speed, None);
    assert!(!serde_json::to_string(&plain).unwrap().contains("speed"));
    // Defaults: the first suite, its first 16 positions (or all, when fewer), 10 pairs, at
    // the sweep's first depth.
    let speed = with("").unwrap().speed.unwrap();
    assert_eq!(
        (speed.suite.as_str(), speed.repeats, speed.limit),
        ("a", 10, Limit::Depth(6))
    );
    assert_eq!(speed.count, 16.min(suites()["a"] as u32));
    let chosen = with("positions = { suite = \"b\", count = 2 }\nrepeats = 4").unwrap();
    let speed = chosen.speed.clone().unwrap();
    assert_eq!(
        (speed.suite.as_str(), speed.count, speed.repeats),
        ("b", 2, 4)
    );
    let json = serde_json::to_string(&chosen).unwrap();
    assert_eq!(serde_json::from_str::<SweepSpec>(&json).unwrap(), chosen);
    assert_ne!(chosen.identity(None), plain.identity(None));
    for (extra, field) in [
        ("repeats = 1", "speed.repeats"),
        ("repeats = 101", "speed.repeats"),
        ("positions = { suite = \"nope\" }", "speed.positions.suite"),
        ("positions = { count = 0 }", "speed.positions.count"),
        ("positions = { count = 100000 }", "speed.positions.count"),
        ("fast = true", "speed.fast"),
    ] {
        let err = with(extra).unwrap_err();
        assert!(err.field.starts_with(field), "{extra}: {err}");
    }
    let by_nodes = OK.replace("depth = 6", "nodes = 10000");
    let err = check(&format!("{by_nodes}\n[speed]\n")).unwrap_err();
    assert_eq!(err.field, "speed", "{err}");
}
