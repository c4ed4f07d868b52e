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

/// What one build of a sweep cost on one suite at one limit (see
/// [`super::Store::build_costs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCost {
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Engine milliseconds of its results, those taken from earlier sweeps included.
    pub ms: u64,
    /// Engine milliseconds of the results measured in this sweep.
    pub measured_ms: u64,
}

/// See [`super::Store::build_costs`]: the sweep's results through its `(sweep_id, ...)`
/// index, summed per build, suite and limit.
pub(crate) async fn build_costs(db: &impl Reads, id: i64) -> StoreResult<Vec<BuildCost>> {
    db.rows(
        "SELECT b.name AS build, su.name AS suite, r.depth, r.nodes_limit,
                CAST(sum(r.time_ms) AS BIGINT) AS ms,
                CAST(sum(CASE WHEN r.origin_sweep_id IS NULL THEN r.time_ms ELSE 0 END)
                     AS BIGINT) AS measured_ms
         FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
         WHERE r.sweep_id = $1
         GROUP BY b.name, su.name, r.depth, r.nodes_limit",
        &[Value::Int(id)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(BuildCost {
            build: r.text("build")?,
            suite: r.text("suite")?,
            limit: r.limit()?,
            ms: r.count("ms")?,
            measured_ms: r.count("measured_ms")?,
        })
    })
    .collect()
}
