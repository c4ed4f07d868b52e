//! Speed jobs end to end (issue 49, items 2 and 3): a local run (`sweep run`, real minnow
//! processes) times a variant that burns CPU per node (`SLOWDOWN_LOOPS`) against the
//! baseline, and a variant built alike against it: equal nodes both, the slow one's time
//! interval above 1, the other's containing 1.
//!
//! A 95 % interval of a variant built alike misses 1 in about one run in twenty by design
//! (more often with few pairs: a bootstrap interval of ten is a little narrow), and this
//! machine's load moves while the suite runs: such a miss is measured again, at most twice,
//! each time by a new sweep of the same config (its work reused, its speed jobs run anew). A
//! bias of the measurement (a side always run first, say) misses every time.

mod common;

use serde_json::Value;

use common::sweeps::{row, run_json};

/// Twenty-four positions at depth 5, 10 pairs: a few seconds of engine time per variant.
const CONFIG: &str = r#"
name = "speed of a slowdown"
engine = "minnow"
suites = ["ecm_confident_quick"]
depth = 5
chunk_size = 30
cross_check = 0

[[variants]]
name = "slow"
defines = { SLOWDOWN_LOOPS = 300 }

[[variants]]
name = "same"
defines = { SLOWDOWN_LOOPS = 0 }

[speed]
positions = { count = 24 }
repeats = 10
"#;

/// The speed of `build`'s row, checked for what every speed row has.
fn speed_of<'a>(table: &'a Value, build: &str) -> &'a Value {
    let speed = &row(table, build)["speed"];
    assert_eq!(speed["repeats"], 10, "{build}: {speed}");
    assert!(speed.get("error").is_none(), "{build}: {speed}");
    // minnow is deterministic and the knob only burns time: the very same nodes.
    assert_eq!(speed["node_ratio"], 1.0, "{build}: {speed}");
    speed
}

/// Whether the `same` row's interval contains 1, and the interval.
fn interval(table: &Value) -> (bool, Value) {
    let same = speed_of(table, "same");
    let [lo, hi] = [0, 1].map(|i| same["ci95"][i].as_f64().unwrap());
    (lo <= 1.0 && 1.0 <= hi, same["ci95"].clone())
}

#[test]
fn a_slowdown_is_slower_with_equal_nodes_and_a_variant_like_the_baseline_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("speed.toml");
    std::fs::write(&file, CONFIG).unwrap();
    let table = run_json(file.to_str().unwrap(), dir.path(), &[]);
    assert!(
        row(&table, "head_reference").get("speed").is_none(),
        "{table}"
    );

    let slow = speed_of(&table, "slow");
    let low = slow["ci95"][0].as_f64().unwrap();
    assert!(
        low > 1.0,
        "slow: interval {} lies above 1: {slow}",
        slow["ci95"]
    );
    assert!(slow["time_ratio"].as_f64().unwrap() > 1.15, "{slow}");
    assert!(slow["nps_ratio"].as_f64().unwrap() < 0.9, "{slow}");
    assert_eq!(slow["fewer_nodes_but_slower"], false, "equal nodes: {slow}");
    assert_eq!(
        slow["positions"], "the first 24 of ecm_confident_quick",
        "{slow}"
    );
    let db = dir.path().join("sweep.db");
    let (code, md, err) = common::cli(&["table", "1", "--database", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(md.contains("### speed vs head_reference (depth 5)"), "{md}");
    assert!(
        md.contains("over the first 24 of ecm_confident_quick on one worker"),
        "{md}"
    );

    let mut tries = vec![interval(&table)];
    while !tries.last().unwrap().0 && tries.len() < 3 {
        let again = run_json(file.to_str().unwrap(), dir.path(), &[]);
        tries.push(interval(&again));
    }
    assert!(
        tries.last().unwrap().0,
        "same: an interval containing 1 in one of {} sweeps: {tries:?}",
        tries.len()
    );
    // The work's node counts agree with the speed runs': the slow build's equal the
    // baseline's.
    let nodes = |b: &str| row(&table, b)["combined"]["nodes"].as_u64().unwrap();
    assert_eq!(nodes("slow"), nodes("head_reference"));
}
