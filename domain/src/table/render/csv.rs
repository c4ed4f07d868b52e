//! The CSV rendering: one line per build, limit and cell group, the statistics' fields
//! after the cell's, then the columns only some tables have (stage, source, speed).

use std::fmt::Write;

use super::super::model::{LimitTable, RowSpeed, RowState, Table};
use super::knob_value;
use super::speed::any_speed;
use crate::stats::PairedStats;

/// The CSV columns of a row's speed (see [`crate::table::speed`]), last on every line once
/// any row has a speed.
const SPEED_HEADER: &str = ",speed_time_ratio,speed_ci95_low,speed_ci95_high,\
     speed_nps_ratio,speed_repeats,speed_flag,speed_error";

/// The trailing fields a table's lines carry beyond the common ones.
#[derive(Clone, Copy)]
struct Trailing {
    /// The line's stage, in a staged sweep.
    stage: Option<u32>,
    /// The row's source, when rows differ in source.
    sources: bool,
    /// The row's speed, when any row has one.
    speed: bool,
}

/// Quotes a CSV field when it needs it (build names may hold commas, e.g. `A=1,B=2`).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The statistics' CSV fields (empty ones when there are none).
fn csv_stats(stats: Option<&PairedStats>) -> String {
    let Some(s) = stats else {
        return ",,,,,,,,,".to_string();
    };
    let f = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.6}"));
    format!(
        "{},{},{},{},{},{},{},{},{},{:.6}",
        f(s.geomean_ratio),
        f(s.ci95.map(|c| c[0])),
        f(s.ci95.map(|c| c[1])),
        f(s.median_ratio),
        s.faster,
        s.slower,
        s.equal,
        s.gained,
        s.lost,
        s.mcnemar_p
    )
}

pub(super) fn csv(table: &Table) -> String {
    let mut out = String::from("build,state,limit,");
    for k in &table.knobs {
        out.push_str(&csv_field(k));
        out.push(',');
    }
    out.push_str(
        "suite,positions,done,errors,nodes,solved,compared,nodes_delta_pct,solved_delta,\
         geomean_ratio,ci95_lo,ci95_hi,median_ratio,faster,slower,equal,gained,lost,mcnemar_p,\
         checks,mismatches",
    );
    for k in &table.counters {
        out.push(',');
        out.push_str(k);
    }
    // Rows built from different code say which, rows with speed jobs their speed, and a
    // staged sweep's lines their stage (a later stage may run the same limit): last columns,
    // only in the tables that have them.
    let mut trailing = Trailing {
        stage: None,
        sources: super::rows_differ_in_source(table),
        speed: any_speed(table),
    };
    if !table.stages.is_empty() {
        out.push_str(",stage");
    }
    if trailing.sources {
        out.push_str(",source");
    }
    if trailing.speed {
        out.push_str(SPEED_HEADER);
    }
    out.push('\n');
    if table.stages.is_empty() {
        csv_lines(&mut out, table, &table.tables, &table.suite_order, trailing);
    }
    for stage in &table.stages {
        trailing.stage = Some(stage.stage);
        csv_lines(&mut out, table, &stage.tables, &stage.suites, trailing);
    }
    out
}

/// The speed's CSV fields of one line (after [`SPEED_HEADER`]): a row's speed is the row's
/// (build and limit), so only its `combined` line carries it, as with its cross-checks;
/// empty fields elsewhere and wherever a figure is missing.
fn csv_speed(speed: Option<&RowSpeed>, combined: bool) -> String {
    let Some(s) = speed.filter(|_| combined) else {
        return ",,,,,,,".to_string();
    };
    let f = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
    let flag = if s.fewer_nodes_but_slower {
        "fewer_nodes_but_slower"
    } else {
        ""
    };
    format!(
        ",{},{},{},{},{},{flag},{}",
        f(s.time_ratio),
        f(s.ci95.map(|c| c[0])),
        f(s.ci95.map(|c| c[1])),
        f(s.nps_ratio),
        s.repeats,
        csv_field(s.error.as_deref().unwrap_or(""))
    )
}

/// The CSV lines of `tables` over `suites`, with the `trailing` fields.
fn csv_lines(
    out: &mut String,
    table: &Table,
    tables: &[LimitTable],
    suites: &[String],
    trailing: Trailing,
) {
    for lt in tables {
        for row in &lt.rows {
            let cells = suites
                .iter()
                .map(|s| (s.as_str(), &row.suites[s]))
                .chain(std::iter::once(("combined", &row.combined)));
            for (suite, c) in cells {
                let state = match row.state {
                    RowState::Ok => "ok",
                    RowState::Pending => "pending",
                    RowState::BuildFailed => "build_failed",
                };
                let _ = write!(out, "{},{state},{},", csv_field(&row.build), lt.limit);
                for k in &table.knobs {
                    let _ = write!(out, "{},", knob_value(row, k));
                }
                let _ = write!(
                    out,
                    "{},{},{},{},{},{},{},{},{}",
                    csv_field(suite),
                    c.positions,
                    c.done,
                    c.errors,
                    c.nodes,
                    c.solved,
                    c.compared,
                    c.nodes_delta_pct
                        .map_or(String::new(), |d| format!("{d:.2}")),
                    c.solved_delta.map_or(String::new(), |d| d.to_string()),
                );
                let _ = write!(out, ",{}", csv_stats(c.stats.as_ref()));
                // Cross-checks are the row's (build and limit), so only its combined line
                // carries them: a sum over the lines counts each once.
                if suite == "combined" {
                    let _ = write!(out, ",{},{}", row.checks, row.mismatches);
                } else {
                    out.push_str(",,");
                }
                for k in &table.counters {
                    // Empty where there is no sum (see the Markdown's `counter`).
                    let v = c.counters.as_ref().and_then(|m| m.get(k));
                    let _ = write!(out, ",{}", v.map_or(String::new(), u64::to_string));
                }
                if let Some(k) = trailing.stage {
                    let _ = write!(out, ",{k}");
                }
                if trailing.sources {
                    let _ = write!(out, ",{}", csv_field(row.source.as_deref().unwrap_or("")));
                }
                if trailing.speed {
                    out.push_str(&csv_speed(row.speed.as_ref(), suite == "combined"));
                }
                out.push('\n');
            }
        }
    }
}
