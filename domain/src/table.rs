//! Delta tables: pure arithmetic over stored results. The types live in `model`, the
//! arithmetic in `compute`, the extras attached to a table in [`bench`], [`counters`],
//! [`paired`], [`speed`] and [`curve`], and rendering in [`render`]; this module only gathers
//! them, so data flows one way (every part builds on `model`, nothing builds on this module).

pub mod bench;
mod compute;
pub mod counters;
pub mod curve;
#[cfg(test)]
mod fixtures;
mod model;
pub mod paired;
pub mod planned;
pub mod positions;
pub mod promote;
pub mod render;
pub mod search;
pub mod speed;

pub use bench::{attach_benches, BuildBench};
pub use compute::{build_table, compare_positions, sums_of};
pub use counters::attach_counters;
pub use curve::non_monotonic;
pub use model::{
    Cell, CellSums, Change, CurveFlag, LimitTable, PositionComparison, PositionsReport, Promotion,
    ResultRow, RowBench, RowSpeed, RowState, SearchReport, SearchStep, StageState, StageTable,
    Standing, SumsKey, Table, TableBuild, TableInput, TableRow, TableSweep,
};
pub use paired::attach_stats;
pub use planned::Planned;
pub use positions::PositionsView;
pub use promote::promote;
pub use search::walk;
pub use speed::{attach_speed, speed_of, speed_seed};
