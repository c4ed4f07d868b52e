//! Views of a positions report: every position in suite order, only the flips, or the
//! largest node changes first (what a reviewer looks at before anything else).

use std::str::FromStr;

use super::model::{Change, PositionComparison, PositionsReport, ResultRow};

/// Which positions of a report to keep, and in what order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PositionsView {
    /// Every position with a result on either side, in suite order.
    #[default]
    All,
    /// Positions gained or lost, in suite order.
    Flips,
    /// Positions both sides searched without error and with nodes, whose node counts
    /// differ, largest change first (by the size of the ratio, so halving and doubling weigh
    /// the same).
    NodeChange,
}

impl FromStr for PositionsView {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(Self::All),
            "flips" => Ok(Self::Flips),
            "node_change" => Ok(Self::NodeChange),
            other => Err(format!(
                "unknown view `{other}` (views: all, flips, node_change)"
            )),
        }
    }
}

/// `ln(build / baseline)` of a position's nodes, when both searched it without error and with
/// nodes.
fn node_log_ratio(row: &PositionComparison) -> Option<f64> {
    let nodes = |r: &Option<ResultRow>| {
        r.as_ref()
            .filter(|r| r.error.is_none() && r.nodes > 0)
            .map(|r| r.nodes as f64)
    };
    Some((nodes(&row.build)? / nodes(&row.baseline)?).ln())
}

impl PositionsReport {
    /// Keeps the rows of `view`, in its order, before paging; `total` counts what is kept
    /// (`gained` and `lost` stay whole).
    pub fn view(mut self, view: PositionsView) -> Self {
        match view {
            PositionsView::All => {}
            PositionsView::Flips => self
                .rows
                .retain(|r| matches!(r.change, Change::Gained | Change::Lost)),
            PositionsView::NodeChange => {
                let mut keyed: Vec<(f64, PositionComparison)> = self
                    .rows
                    .into_iter()
                    .filter_map(|r| node_log_ratio(&r).map(|k| (k.abs(), r)))
                    .filter(|(k, _)| *k > 0.0)
                    .collect();
                // Stable: equal changes stay in suite order.
                keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
                self.rows = keyed.into_iter().map(|(_, r)| r).collect();
            }
        }
        self.total = self.rows.len();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use crate::table::compute::compare_positions;
    use crate::table::fixtures::result_row;

    fn row(build: &str, index: u32, nodes: u64, solved: bool, error: bool) -> ResultRow {
        ResultRow {
            position_id: format!("p{index}"),
            error: error.then(|| "crashed".to_string()),
            ..result_row(build, "s", index, Limit::Depth(8), nodes, solved)
        }
    }

    fn report() -> PositionsReport {
        let results = vec![
            row("base", 0, 100, true, false),
            row("v", 0, 110, false, false), // lost, +10 %
            row("base", 1, 100, false, false),
            row("v", 1, 50, true, false), // gained, halved
            row("base", 2, 100, true, false),
            row("v", 2, 300, true, false), // tripled
            row("base", 3, 100, true, false),
            row("v", 3, 0, true, true), // error: no ratio
            row("base", 4, 0, true, false),
            row("v", 4, 10, true, false), // baseline without nodes: no ratio
            row("base", 5, 100, true, false),
            row("v", 5, 100, true, false), // the same nodes: no change
        ];
        compare_positions("v", "base", Limit::Depth(8), &["s".into()], &results)
    }

    fn ids(r: &PositionsReport) -> Vec<&str> {
        r.rows.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn all_keeps_suite_order() {
        let r = report().view(PositionsView::All);
        assert_eq!(ids(&r), ["p0", "p1", "p2", "p3", "p4", "p5"]);
        assert_eq!(r.total, 6);
    }

    #[test]
    fn flips_keep_only_gained_and_lost() {
        let r = report().view(PositionsView::Flips);
        assert_eq!(ids(&r), ["p0", "p1"]);
        assert_eq!((r.total, r.gained.len(), r.lost.len()), (2, 1, 1));
    }

    #[test]
    fn node_change_orders_by_ratio_and_drops_positions_without_one() {
        let r = report().view(PositionsView::NodeChange);
        // x3 before x0.5 before x1.1; the errored and zero-node positions have no ratio, and
        // the unchanged one is no change.
        assert_eq!(ids(&r), ["p2", "p1", "p0"]);
        assert_eq!(r.total, 3);
    }

    #[test]
    fn views_parse_and_unknown_ones_are_named() {
        assert_eq!("flips".parse(), Ok(PositionsView::Flips));
        assert_eq!("node_change".parse(), Ok(PositionsView::NodeChange));
        assert!("biggest"
            .parse::<PositionsView>()
            .unwrap_err()
            .contains("biggest"));
    }
}
