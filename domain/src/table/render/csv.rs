//! The CSV rendering: one line per build, limit and cell group, the statistics' fields last.

use std::fmt::Write;

use super::super::model::{LimitTable, RowState, Table};
use super::knob_value;
use crate::stats::PairedStats;

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
    // Rows built from different code say which: a last column.
    let sources = super::rows_differ_in_source(table);
    // A staged sweep's lines say their stage: a later stage may run the same limit.
    if table.stages.is_empty() {
        out.push_str(if sources { ",source\n" } else { "\n" });
        csv_lines(
            &mut out,
            table,
            &table.tables,
            &table.suite_order,
            None,
            sources,
        );
    } else {
        out.push_str(if sources {
            ",stage,source\n"
        } else {
            ",stage\n"
        });
        for stage in &table.stages {
            csv_lines(
                &mut out,
                table,
                &stage.tables,
                &stage.suites,
                Some(stage.stage),
                sources,
            );
        }
    }
    out
}

/// The CSV lines of `tables` over `suites` (with a trailing stage field in a staged sweep,
/// and the row's source when `sources`).
fn csv_lines(
    out: &mut String,
    table: &Table,
    tables: &[LimitTable],
    suites: &[String],
    stage: Option<u32>,
    sources: bool,
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
                if let Some(k) = stage {
                    let _ = write!(out, ",{k}");
                }
                if sources {
                    let _ = write!(out, ",{}", csv_field(row.source.as_deref().unwrap_or("")));
                }
                out.push('\n');
            }
        }
    }
}
