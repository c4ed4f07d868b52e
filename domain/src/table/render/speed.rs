//! The variants' speed against the baseline (see [`crate::table::speed`]) in Markdown: a
//! section beside each limit's table that has any (the CSV's speed fields are in `csv`). A
//! node count alone can make a variant look faster than it is; this says what its nodes cost.

use std::fmt::Write;

use super::super::model::{LimitTable, RowSpeed, Table, TableRow};

/// Whether any row of `table` (or of its stages) has a speed: only then does the CSV get the
/// speed columns, so tables of sweeps without speed jobs read as before.
pub(super) fn any_speed(table: &Table) -> bool {
    let stages = table.stages.iter().flat_map(|s| &s.tables);
    table
        .tables
        .iter()
        .chain(stages)
        .flat_map(|t| &t.rows)
        .any(|r| r.speed.is_some())
}

/// The speed section of one limit: a line per variant that has a speed (pairs, the time
/// ratio with its interval, nodes per second, nodes and wall time against the baseline's),
/// the flag on variants that search fewer nodes yet are slower, and the error of a speed job
/// that failed; nothing when no row of `lt` has a speed.
pub(super) fn markdown_speed(out: &mut String, table: &Table, lt: &LimitTable) {
    let rows: Vec<(&TableRow, &RowSpeed)> = lt
        .rows
        .iter()
        .filter(|r| r.build != table.baseline)
        .filter_map(|r| Some((r, r.speed.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### speed vs {} ({})\n\n\
         Time is the CPU time (user + system) of the engine processes: pairs of fresh \
         processes of {} and the variant (in turn: one first, then the other first), over \
         {} on one worker; each ratio \
         is the geometric mean over the pairs of the variant's figure over the baseline's \
         (time above 1: slower).\n",
        table.baseline,
        lt.limit,
        table.baseline,
        rows[0]
            .1
            .positions
            .as_deref()
            .unwrap_or("the same positions")
    );
    out.push_str("| build | pairs | time × [95% CI] | nps × | nodes × | wall × | |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---|\n");
    for (row, s) in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.build,
            s.repeats,
            time(s),
            ratio(s.nps_ratio),
            ratio(s.node_ratio),
            ratio(s.wall_ratio),
            note(s)
        );
    }
    out.push('\n');
    if rows.iter().any(|(_, s)| s.fewer_nodes_but_slower) {
        out.push_str(
            "**fewer nodes but slower**: the variant searched fewer nodes than the baseline, \
             yet its CPU time's 95% interval lies wholly above 1: each node costs more than \
             the nodes it saves.\n\n",
        );
    }
}

/// The time ratio with its interval; `--` without a ratio, and the reason when there is no
/// interval (one pair).
fn time(s: &RowSpeed) -> String {
    match (s.time_ratio, s.ci95) {
        (Some(t), Some([lo, hi])) => format!("{t:.3} [{lo:.3}, {hi:.3}]"),
        (Some(t), None) => format!("{t:.3} (one pair: no interval)"),
        (None, _) => "--".to_string(),
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("--".to_string(), |r| format!("{r:.3}"))
}

/// The last column: the flag, and why a speed job ended short.
fn note(s: &RowSpeed) -> String {
    let mut parts = Vec::new();
    if s.fewer_nodes_but_slower {
        parts.push("**fewer nodes but slower**".to_string());
    }
    if let Some(why) = &s.error {
        let why = one_line(why);
        parts.push(match s.repeats {
            0 => format!("speed job failed: {why}"),
            n => format!("speed job failed after {n} pairs: {why}"),
        });
    }
    parts.join("; ")
}

/// A worker's words fit for one table cell: no line breaks, pipes escaped.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ").replace('|', "\\|")
}
