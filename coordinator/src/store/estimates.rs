//! What searches of an engine cost before, for the estimate of a sweep not submitted yet
//! (`sweep submit --dry-run`), written once for both backends.

use sweep_domain::limit::Limit;

use super::sql::{Columns, Reads, Value};
use super::{StoreResult, COST_SWEEPS};

/// What searches of one suite at one limit cost in an engine's newest sweeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchCost {
    /// Suite name (any version).
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Engine milliseconds of those searches, summed.
    pub ms: u64,
    /// How many searches.
    pub searches: u64,
}

/// See [`super::Store::search_costs`]: the engine's newest sweeps by id (an index walk),
/// their results through the `(sweep_id, ...)` index.
pub(crate) async fn search_costs(db: &impl Reads, engine: &str) -> StoreResult<Vec<SearchCost>> {
    db.rows(
        "SELECT su.name AS suite, r.depth, r.nodes_limit,
                CAST(sum(r.time_ms) AS BIGINT) AS ms, count(*) AS n
         FROM results r JOIN suites su ON su.id = r.suite_id
         WHERE r.sweep_id IN (SELECT s.id FROM sweeps s WHERE s.engine = $1
                              ORDER BY s.id DESC LIMIT $2)
           AND r.error IS NULL AND r.origin_sweep_id IS NULL
         GROUP BY su.name, r.depth, r.nodes_limit",
        &[Value::Text(engine), Value::Int(i64::from(COST_SWEEPS))],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(SearchCost {
            suite: r.text("suite")?,
            limit: r.limit()?,
            ms: r.count("ms")?,
            searches: r.count("n")?,
        })
    })
    .collect()
}
