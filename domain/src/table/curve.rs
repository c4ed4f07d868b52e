//! Whether a one-knob sweep's curve is monotonic: the calibration plan's own sweep was
//! "non-monotonic, not a stable curve", and a reader of a table of eight rows should not
//! have to spot that by eye.

use super::model::{CurveFlag, Table};

/// The curves of `table` that are not monotonic. Only a sweep of one knob has a curve; a
/// curve needs at least three variants with a delta, and every variant must have one (a
/// pending or failed row makes no curve: it would be judged on missing points). Equal
/// neighbours break neither direction.
pub fn non_monotonic(table: &Table) -> Vec<CurveFlag> {
    let [knob] = table.knobs.as_slice() else {
        return Vec::new();
    };
    let mut flags = Vec::new();
    for lt in &table.tables {
        let variants: Vec<_> = lt
            .rows
            .iter()
            .filter(|r| r.build != table.baseline)
            .collect();
        let suites = table
            .suite_order
            .iter()
            .map(String::as_str)
            .chain(std::iter::once("combined"));
        for suite in suites {
            let mut points: Option<Vec<(i64, f64)>> = Some(Vec::new());
            for row in &variants {
                let cell = if suite == "combined" {
                    Some(&row.combined)
                } else {
                    row.suites.get(suite)
                };
                match (
                    row.defines.get(knob),
                    cell.and_then(|c| c.nodes_delta_pct),
                    &mut points,
                ) {
                    (Some(v), Some(d), Some(p)) => p.push((*v, d)),
                    _ => points = None,
                }
            }
            let Some(mut points) = points else { continue };
            if points.len() < 3 {
                continue;
            }
            points.sort_by_key(|(v, _)| *v);
            let steps: Vec<f64> = points.windows(2).map(|w| w[1].1 - w[0].1).collect();
            let up = steps.iter().any(|s| *s > 0.0);
            let down = steps.iter().any(|s| *s < 0.0);
            if up && down {
                flags.push(CurveFlag {
                    knob: knob.clone(),
                    limit: lt.limit,
                    suite: suite.to_string(),
                    points,
                });
            }
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::limit::Limit;
    use crate::table::model::{Cell, LimitTable, RowState, TableRow};

    fn row(name: &str, value: Option<i64>, delta: Option<f64>) -> TableRow {
        let cell = Cell {
            nodes_delta_pct: delta,
            ..Cell::default()
        };
        TableRow {
            build: name.into(),
            defines: value.map(|v| ("K".to_string(), v)).into_iter().collect(),
            state: RowState::Ok,
            suites: BTreeMap::from([("a".to_string(), cell.clone())]),
            combined: cell,
            checks: 0,
            mismatches: 0,
            bench: None,
            source: None,
            speed: None,
        }
    }

    fn table(deltas: &[(i64, Option<f64>)]) -> Table {
        let mut rows = vec![row("base", None, None)];
        // Rows in a shuffled order: the curve follows knob values, not row order.
        for (v, d) in deltas.iter().rev() {
            rows.push(row(&format!("K={v}"), Some(*v), *d));
        }
        Table {
            baseline: "base".into(),
            knobs: vec!["K".into()],
            counters: vec![],
            suite_order: vec!["a".into()],
            tables: vec![LimitTable {
                limit: Limit::Depth(10),
                rows,
            }],
            source: None,
            curve_flags: vec![],
            suite_sha256: Default::default(),
            sweep: None,
            stages: Vec::new(),
            search: None,
        }
    }

    #[test]
    fn flags_a_curve_that_turns_and_says_where() {
        // The seed sweep's shape: -0.43% at 10, -0.42% at 30, then down again.
        let t = table(&[(10, Some(-0.43)), (30, Some(-0.42)), (100, Some(-0.56))]);
        let flags = non_monotonic(&t);
        assert_eq!(flags.len(), 2, "suite a and combined: {flags:?}");
        assert_eq!(flags[0].suite, "a");
        assert_eq!(flags[1].suite, "combined");
        assert_eq!(
            flags[0].describe(),
            "nodes delta vs K is not monotonic on a (depth 10): -0.43% at 10, -0.42% at 30, -0.56% at 100"
        );
        let mut t = t;
        t.curve_flags = flags;
        let md = crate::table::render::render(&t, crate::table::render::Format::Markdown);
        assert!(
            md.contains(
                "Note: nodes delta vs K is not monotonic on combined (depth 10): -0.43% at 10"
            ),
            "{md}"
        );
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json["curve_flags"][1]["points"][1],
            serde_json::json!([30, -0.42])
        );
    }

    #[test]
    fn monotonic_flat_short_or_incomplete_curves_are_not_flagged() {
        for deltas in [
            vec![
                (10, Some(-0.1)),
                (30, Some(-0.2)),
                (100, Some(-0.2)),
                (300, Some(-0.9)),
            ],
            vec![(10, Some(0.5)), (30, Some(0.7)), (100, Some(0.7))],
            vec![(10, Some(-0.4)), (30, Some(-0.3))],
            vec![
                (10, Some(-0.4)),
                (30, None),
                (100, Some(-0.9)),
                (300, Some(-0.1)),
            ],
        ] {
            assert!(non_monotonic(&table(&deltas)).is_empty(), "{deltas:?}");
        }
        let mut two_knobs = table(&[(10, Some(1.0)), (30, Some(-1.0)), (100, Some(1.0))]);
        two_knobs.knobs.push("R".into());
        assert!(non_monotonic(&two_knobs).is_empty());
    }
}
