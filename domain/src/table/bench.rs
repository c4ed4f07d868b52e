//! Bench signatures on a table's rows: each build's bench node total (the engine's own
//! benchmark, run by every worker on the build's binary), whether it equals the baseline's
//! (probably no functional change), and which workers' benches disagreed.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{RowBench, Table};

/// What the workers' build records say of one build's bench.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildBench {
    /// The bench total of the build's binary: the first one reported that is not itself a
    /// mismatch; `None` when none is.
    pub nodes: Option<u64>,
    /// Each record whose bench disagreed with an earlier worker's for the same binary, in
    /// words naming both workers.
    pub mismatches: Vec<String>,
}

/// Sets each row's `bench` from `benches` (by build name); rows of builds without one keep
/// none. `options_differ` names the builds whose UCI options differ from the baseline's: no
/// equal bench is claimed for them.
pub fn attach_benches(
    table: &mut Table,
    benches: &BTreeMap<String, BuildBench>,
    options_differ: &BTreeSet<String>,
) {
    let base = benches.get(&table.baseline).and_then(|b| b.nodes);
    for lt in &mut table.tables {
        for row in &mut lt.rows {
            row.bench = benches.get(&row.build).map(|b| RowBench {
                nodes: b.nodes,
                same_as_baseline: row.build != table.baseline
                    && !options_differ.contains(&row.build)
                    && b.nodes.is_some()
                    && b.nodes == base,
                mismatches: b.mismatches.clone(),
            });
        }
    }
}

/// A table of a baseline and one variant, for the tests of this module and of `render`.
#[cfg(test)]
pub(crate) fn table_of_two() -> crate::table::model::Table {
    use std::collections::BTreeMap;
    let builds = vec![
        crate::table::fixtures::table_build("base", &[], true, false),
        crate::table::fixtures::table_build("v1", &[("K", 1)], false, false),
    ];
    let results = vec![
        crate::table::fixtures::result_row("base", "a", 0, crate::limit::Limit::Depth(5), 10, true),
        crate::table::fixtures::result_row("v1", "a", 0, crate::limit::Limit::Depth(5), 9, true),
    ];
    let suites = vec!["a".to_string()];
    let sizes = BTreeMap::from([("a".to_string(), 1)]);
    let sums = crate::table::compute::sums_of(&results, "base");
    crate::table::compute::build_table(crate::table::model::TableInput {
        knobs: &["K".to_string()],
        builds: &builds,
        limits: &[crate::limit::Limit::Depth(5)],
        suites: &suites,
        suite_sizes: &sizes,
        sums: &sums,
        counters: &[],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_benches_are_marked_and_mismatches_kept() {
        let mut table = super::table_of_two();
        let variant = table.tables[0].rows[1].build.clone();
        let mut benches = BTreeMap::from([(
            table.baseline.clone(),
            BuildBench {
                nodes: Some(500),
                mismatches: vec![],
            },
        )]);
        benches.insert(
            variant.clone(),
            BuildBench {
                nodes: Some(500),
                mismatches: vec!["worker w2 benched 501".into()],
            },
        );
        let none = BTreeSet::new();
        attach_benches(&mut table, &benches, &none);
        let rows = &table.tables[0].rows;
        let base = rows[0].bench.as_ref().unwrap();
        assert_eq!((base.nodes, base.same_as_baseline), (Some(500), false));
        let v = rows[1].bench.as_ref().unwrap();
        assert!(v.same_as_baseline);
        assert_eq!(v.mismatches.len(), 1);

        // A variant set by a UCI option: its equal bench says nothing.
        attach_benches(&mut table, &benches, &BTreeSet::from([variant.clone()]));
        assert!(
            !table.tables[0].rows[1]
                .bench
                .as_ref()
                .unwrap()
                .same_as_baseline
        );
        benches.get_mut(&variant).unwrap().nodes = Some(499);
        attach_benches(&mut table, &benches, &none);
        assert!(
            !table.tables[0].rows[1]
                .bench
                .as_ref()
                .unwrap()
                .same_as_baseline
        );
        // No bench anywhere: nothing is claimed.
        attach_benches(&mut table, &BTreeMap::new(), &none);
        assert!(table.tables[0].rows.iter().all(|r| r.bench.is_none()));
    }
}
