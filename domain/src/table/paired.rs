//! Attaches [`crate::stats`] to a table's cells from per-position results (the table itself
//! is built from sums, which cannot give ratios, medians or flips).

use std::collections::BTreeMap;

use super::model::{ResultRow, Table};
use crate::limit::Limit;
use crate::stats::{paired_stats, seed_of, Pair};

/// One build's pairs on one suite, with the position index they are sorted by.
type IndexedPairs = Vec<(u32, Pair)>;

/// Fills `stats` of every variant's cells (per suite and combined) in `table`'s table for
/// `limit`, from `results` (the results of the baseline and the variants at that limit).
/// Pairs are positions both sides finished without error. Each cell's bootstrap is seeded
/// from `seed_prefix` (the coordinator passes none), the build, the limit and the suite, so
/// the same data gives the same interval on every request and in every sweep.
pub fn attach_stats(table: &mut Table, limit: Limit, results: &[ResultRow], seed_prefix: &str) {
    let baseline = table.baseline.clone();
    // (suite, index) -> the baseline's valid result.
    let base: BTreeMap<(&str, u32), &ResultRow> = results
        .iter()
        .filter(|r| r.build == baseline && r.limit == limit && r.error.is_none())
        .map(|r| ((r.suite.as_str(), r.index), r))
        .collect();
    // build -> suite -> pairs, in suite order (results come in any order; sort for the seed's
    // sake: the bootstrap depends on the order of the pairs).
    let mut pairs: BTreeMap<&str, BTreeMap<&str, IndexedPairs>> = BTreeMap::new();
    for r in results
        .iter()
        .filter(|r| r.build != baseline && r.limit == limit && r.error.is_none())
    {
        let Some(b) = base.get(&(r.suite.as_str(), r.index)) else {
            continue;
        };
        pairs
            .entry(r.build.as_str())
            .or_default()
            .entry(r.suite.as_str())
            .or_default()
            .push((
                r.index,
                Pair {
                    nodes: r.nodes,
                    base_nodes: b.nodes,
                    solved: r.solved,
                    base_solved: b.solved,
                },
            ));
    }
    let suite_order = table.suite_order.clone();
    let Some(lt) = table.tables.iter_mut().find(|t| t.limit == limit) else {
        return;
    };
    for row in lt.rows.iter_mut().filter(|r| r.build != baseline) {
        let Some(by_suite) = pairs.get_mut(row.build.as_str()) else {
            continue;
        };
        let mut combined = Vec::new();
        for suite in &suite_order {
            let Some(ps) = by_suite.get_mut(suite.as_str()) else {
                continue;
            };
            ps.sort_by_key(|(i, _)| *i);
            let ps: Vec<Pair> = ps.iter().map(|(_, p)| *p).collect();
            let seed = seed_of(&format!("{seed_prefix}/{}/{limit}/{suite}", row.build));
            if let Some(cell) = row.suites.get_mut(suite) {
                cell.stats = paired_stats(&ps, seed);
            }
            combined.extend(ps);
        }
        let seed = seed_of(&format!("{seed_prefix}/{}/{limit}/combined", row.build));
        row.combined.stats = paired_stats(&combined, seed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::compute::{build_table, sums_of};
    use crate::table::fixtures::{result_row, table_build};
    use crate::table::model::{TableBuild, TableInput};

    const D5: Limit = Limit::Depth(5);

    fn r(build: &str, suite: &str, index: u32, nodes: u64, solved: bool) -> ResultRow {
        result_row(build, suite, index, D5, nodes, solved)
    }

    /// The table summed from `results` over suites `a` and `b` of `sizes` positions, at D5.
    fn summed(
        builds: &[TableBuild],
        results: &[ResultRow],
        sizes: [usize; 2],
        counters: &[String],
    ) -> Table {
        build_table(TableInput {
            counters,
            knobs: &[],
            builds,
            limits: &[D5],
            suites: &["a".to_string(), "b".to_string()],
            suite_sizes: &BTreeMap::from([
                ("a".to_string(), sizes[0]),
                ("b".to_string(), sizes[1]),
            ]),
            sums: &sums_of(results, "base"),
        })
    }

    #[test]
    fn stats_per_suite_and_combined_over_shared_valid_positions() {
        let builds = vec![
            table_build("base", &[], true, false),
            table_build("K=1", &[], false, false),
        ];
        let mut err = r("K=1", "a", 2, 5, true);
        err.error = Some("crash".into());
        let results = vec![
            r("base", "a", 0, 100, true),
            r("base", "a", 1, 100, false),
            r("base", "a", 2, 100, false),
            r("base", "b", 0, 100, true),
            r("K=1", "a", 0, 50, true),
            r("K=1", "a", 1, 200, true),
            err, // an error: not compared
            r("K=1", "b", 0, 100, false),
        ];
        let mut t = summed(&builds, &results, [3, 1], &[]);
        attach_stats(&mut t, D5, &results, "1");
        let rows = &t.tables[0].rows;
        assert_eq!(rows[0].combined.stats, None);
        let a = rows[1].suites["a"].stats.clone().expect("stats for a");
        assert_eq!((a.pairs, a.faster, a.slower, a.equal), (2, 1, 1, 0));
        assert_eq!((a.gained, a.lost), (1, 0));
        // sqrt(0.5 * 2.0) = 1.
        assert!((a.geomean_ratio.unwrap() - 1.0).abs() < 1e-12);
        let c = rows[1].combined.stats.clone().expect("combined");
        assert_eq!((c.pairs, c.faster, c.slower, c.equal), (3, 1, 1, 1));
        assert_eq!((c.gained, c.lost), (1, 1));
        assert_eq!(c.mcnemar_p, 1.0);
        // Reproducible; and nothing comparable at another limit leaves stats absent.
        let again = t.clone();
        attach_stats(&mut t, D5, &results, "1");
        assert_eq!(t, again);
        let json = serde_json::to_value(&t).unwrap();
        assert!(json["tables"][0]["rows"][0]["combined"]
            .get("stats")
            .is_none());
        assert_eq!(
            json["tables"][0]["rows"][1]["combined"]["stats"]["equal"],
            1
        );
    }

    #[test]
    fn builds_attached_a_group_at_a_time_give_the_same_table() {
        // What a finished table does to bound memory: each build with the baseline, in
        // groups, must give exactly the statistics and counters of one pass over everything.
        let names = ["base", "K=1", "K=2", "K=3", "K=4", "K=5"];
        let builds: Vec<_> = names
            .iter()
            .map(|n| table_build(n, &[], *n == "base", false))
            .collect();
        let mut results = Vec::new();
        for (b, name) in names.iter().enumerate() {
            for suite in ["a", "b"] {
                for i in 0..7u32 {
                    let nodes = 1_000 + u64::from(i) * 37 + b as u64 * 11 + (i as u64 % 3) * 5;
                    let mut row = r(name, suite, i, nodes, !(i + b as u32).is_multiple_of(3));
                    row.counters = BTreeMap::from([("cut".to_string(), u64::from(i) + 1)]);
                    results.push(row);
                }
            }
        }
        let counters = vec!["cut".to_string()];
        let fresh = || summed(&builds, &results, [7, 7], &counters);
        let mut whole = fresh();
        crate::table::attach_counters(&mut whole, D5, &results);
        attach_stats(&mut whole, D5, &results, "");
        let mut grouped = fresh();
        for group in [&names[1..3], &names[3..5], &names[5..]] {
            let part: Vec<ResultRow> = results
                .iter()
                .filter(|r| r.build == "base" || group.contains(&r.build.as_str()))
                .cloned()
                .collect();
            crate::table::attach_counters(&mut grouped, D5, &part);
            attach_stats(&mut grouped, D5, &part, "");
        }
        assert!(whole.tables[0].rows[1].combined.stats.is_some());
        assert!(whole.tables[0].rows[1].combined.counters.is_some());
        assert_eq!(grouped, whole);
    }
}
