//! Sums of the engines' search counters (`info string counters k=v ...`) per build and suite,
//! attached to a finished sweep's table from its per-position results.

use std::collections::BTreeMap;

use super::model::{ResultRow, Table};
use crate::limit::Limit;

/// Fills `counters` of every cell (per suite and combined) of `table`'s table for `limit`
/// with the sums of each counter over the build's valid results there, from `results` (every
/// result of the table's builds at that limit). A build with no valid result keeps `None`:
/// no sums is not the same as sums of zero. Sums past `u64::MAX` saturate.
pub fn attach_counters(table: &mut Table, limit: Limit, results: &[ResultRow]) {
    // build -> suite -> counter -> sum
    let mut sums: BTreeMap<&str, BTreeMap<&str, BTreeMap<&str, u128>>> = BTreeMap::new();
    for r in results
        .iter()
        .filter(|r| r.limit == limit && r.error.is_none())
    {
        let cell = sums
            .entry(r.build.as_str())
            .or_default()
            .entry(r.suite.as_str())
            .or_default();
        for (name, value) in &r.counters {
            *cell.entry(name.as_str()).or_default() += u128::from(*value);
        }
    }
    let Some(lt) = table.tables.iter_mut().find(|t| t.limit == limit) else {
        return;
    };
    for row in &mut lt.rows {
        let Some(by_suite) = sums.get(row.build.as_str()) else {
            continue;
        };
        let mut combined: BTreeMap<&str, u128> = BTreeMap::new();
        for (suite, counters) in by_suite {
            if let Some(cell) = row.suites.get_mut(*suite) {
                cell.counters = Some(saturated(counters));
            }
            for (name, v) in counters {
                *combined.entry(name).or_default() += v;
            }
        }
        row.combined.counters = Some(saturated(&combined));
    }
}

fn saturated(sums: &BTreeMap<&str, u128>) -> BTreeMap<String, u64> {
    sums.iter()
        .map(|(k, v)| (k.to_string(), u64::try_from(*v).unwrap_or(u64::MAX)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::compute::{build_table, sums_of};
    use crate::table::fixtures::{result_row, table_build};
    use crate::table::model::{TableBuild, TableInput};

    const D5: Limit = Limit::Depth(5);

    fn r(build: &str, suite: &str, index: u32, skipped: u64, error: bool) -> ResultRow {
        ResultRow {
            position_id: format!("p{index}"),
            error: error.then(|| "crashed".to_string()),
            counters: BTreeMap::from([
                ("null_skipped".to_string(), skipped),
                ("nodes".to_string(), u64::MAX - 1),
            ]),
            ..result_row(build, suite, index, D5, 100, false)
        }
    }

    fn table(results: &[ResultRow]) -> Table {
        let builds: Vec<TableBuild> = ["base", "v1", "v2"]
            .iter()
            .map(|name| table_build(name, &[], *name == "base", false))
            .collect();
        let suites = vec!["a".to_string(), "b".to_string()];
        let sizes = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]);
        let sums = sums_of(results, "base");
        build_table(TableInput {
            knobs: &[],
            builds: &builds,
            limits: &[D5],
            suites: &suites,
            suite_sizes: &sizes,
            sums: &sums,
            counters: &[],
        })
    }

    #[test]
    fn sums_per_suite_and_combined_over_valid_results_only() {
        let results = vec![
            r("base", "a", 0, 3, false),
            r("base", "a", 1, 4, false),
            r("base", "b", 0, 5, false),
            r("v1", "a", 0, 10, false),
            r("v1", "a", 1, 1000, true),
            r("v1", "b", 0, 20, false),
        ];
        let mut t = table(&results);
        attach_counters(&mut t, D5, &results);
        let rows = &t.tables[0].rows;
        let sum = |row: usize, suite: Option<&str>, name: &str| {
            let cell = match suite {
                Some(s) => &rows[row].suites[s],
                None => &rows[row].combined,
            };
            cell.counters.as_ref().map(|c| c[name])
        };
        assert_eq!(sum(0, Some("a"), "null_skipped"), Some(7));
        assert_eq!(sum(0, Some("b"), "null_skipped"), Some(5));
        assert_eq!(sum(0, None, "null_skipped"), Some(12));
        // The failed position's counters are not counted.
        assert_eq!(sum(1, Some("a"), "null_skipped"), Some(10));
        assert_eq!(sum(1, None, "null_skipped"), Some(30));
        // Sums past u64 saturate instead of wrapping.
        assert_eq!(sum(0, None, "nodes"), Some(u64::MAX));
        // No results: no sums, rather than zeros.
        assert_eq!(rows[2].build, "v2");
        assert_eq!(rows[2].combined.counters, None);
    }

    #[test]
    fn other_limits_are_left_alone() {
        let results = vec![r("base", "a", 0, 3, false)];
        let mut t = table(&results);
        attach_counters(&mut t, Limit::Depth(6), &results);
        assert!(t.tables[0]
            .rows
            .iter()
            .all(|r| r.combined.counters.is_none()));
    }
}
