//! Text renderings of a [`Table`]: Markdown (like the calibration plan's tables) and CSV.

use std::fmt::Write;

use super::model::{Cell, LimitTable, RowState, Table, TableRow};

mod csv;
mod speed;
mod stages;

use csv::csv;
use speed::markdown_speed;
use stages::{markdown_search, markdown_stage};

/// Output format of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown tables, one per suite and one combined.
    Markdown,
    /// One CSV line per build and suite (and `combined`).
    Csv,
    /// The JSON document.
    Json,
    /// Markdown for a pull request or a review (`sweep compare`): each limit's paired
    /// statistics and speed first, then its tables.
    Review,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "md" | "markdown" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "review" => Ok(Format::Review),
            other => Err(format!(
                "unknown format `{other}` (use md, csv, json or review)"
            )),
        }
    }
}

/// Renders `table` in `format`.
pub fn render(table: &Table, format: Format) -> String {
    match format {
        Format::Markdown => markdown(table, false),
        Format::Review => markdown(table, true),
        Format::Csv => csv(table),
        Format::Json => serde_json::to_string_pretty(table).expect("tables serialize") + "\n",
    }
}

/// `48588231` -> `48,588,231`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The value of `knob` in a row: the variant's setting, or `default` for the source's own.
fn knob_value(row: &TableRow, knob: &str) -> String {
    row.defines
        .get(knob)
        .map_or_else(|| "default".to_string(), |v| v.to_string())
}

/// The delta column: a percentage, `--` for the baseline, and words where there is no number.
fn delta(row: &TableRow, cell: &Cell, is_baseline: bool) -> String {
    if row.state == RowState::BuildFailed {
        return "build failed".to_string();
    }
    if is_baseline {
        return "--".to_string();
    }
    match cell.nodes_delta_pct {
        None if cell.compared == 0 => "pending".to_string(),
        None => "--".to_string(),
        Some(d) if cell.compared < cell.positions => {
            format!("{d:+.2}% (over {})", cell.compared)
        }
        Some(d) => format!("{d:+.2}%"),
    }
}

fn nodes(row: &TableRow, cell: &Cell) -> String {
    if row.state == RowState::BuildFailed || cell.done == cell.errors {
        "--".to_string()
    } else {
        thousands(cell.nodes)
    }
}

/// A counter's sum; `--` where there is none (a failed build, a counter the engine never
/// printed) and `pending` while the sweep runs (sums are made once it has finished).
fn counter(row: &TableRow, cell: &Cell, name: &str) -> String {
    if row.state == RowState::BuildFailed {
        return "--".to_string();
    }
    match &cell.counters {
        None if cell.done > cell.errors => "pending".to_string(),
        None => "--".to_string(),
        Some(sums) => sums.get(name).map_or("--".to_string(), |v| thousands(*v)),
    }
}

fn solved(row: &TableRow, cell: &Cell) -> String {
    if row.state == RowState::BuildFailed {
        return "--".to_string();
    }
    let mut s = format!("{}/{}", cell.solved, cell.positions);
    if let Some(d) = cell.solved_delta {
        let _ = write!(s, " ({d:+})");
    }
    s
}

fn done(cell: &Cell) -> String {
    let mut done = format!("{}/{}", cell.done, cell.positions);
    if cell.errors > 0 {
        let _ = write!(done, " ({} errors)", cell.errors);
    }
    done
}

/// Picks one column group's cell out of a row.
type CellOf = Box<dyn Fn(&TableRow) -> &Cell>;

/// The heading above a table: the sweep, its source and the suite versions it ran.
fn markdown_heading(out: &mut String, table: &Table) {
    if let Some(sweep) = &table.sweep {
        let _ = writeln!(
            out,
            "## sweep {}: {} ({}), submitted {} UTC, Sweep {}\n",
            sweep.id,
            sweep.name,
            sweep.engine,
            sweep.submitted_at.format("%Y-%m-%d %H:%M"),
            sweep.sweep_version
        );
    }
    // A staged sweep's later stages may run suites its first does not.
    let mut names: Vec<&String> = table.suite_order.iter().collect();
    for s in table.stages.iter().flat_map(|s| &s.suites) {
        if !names.contains(&s) {
            names.push(s);
        }
    }
    let suites: Vec<String> = names
        .into_iter()
        .filter_map(|s| {
            let sha = table.suite_sha256.get(s)?;
            Some(format!("{s} {}", crate::source::short(sha)))
        })
        .collect();
    let source = table.source.as_ref().map(|s| s.describe());
    match (source, suites.is_empty()) {
        (Some(source), false) => {
            let _ = writeln!(out, "{source}; suites {}\n", suites.join(", "));
        }
        (Some(source), true) => {
            let _ = writeln!(out, "{source}\n");
        }
        (None, false) => {
            let _ = writeln!(out, "suites {}\n", suites.join(", "));
        }
        (None, true) => {}
    }
    markdown_row_sources(out, table);
}

/// Whether the rows of `table` were built from different code (variants with `rev` or
/// `sha256`): a node delta then measures a patch, not (only) a knob.
fn rows_differ_in_source(table: &Table) -> bool {
    let mut sources = table
        .tables
        .iter()
        .flat_map(|t| &t.rows)
        .filter_map(|r| r.source.as_deref());
    let first = sources.next();
    sources.any(|s| Some(s) != first)
}

/// When the rows differ in source, which row ran on which.
fn markdown_row_sources(out: &mut String, table: &Table) {
    let Some(lt) = table.tables.first() else {
        return;
    };
    if !rows_differ_in_source(table) {
        return;
    }
    let rows: Vec<String> = lt
        .rows
        .iter()
        .map(|r| format!("{} on {}", r.build, r.source.as_deref().unwrap_or("?")))
        .collect();
    let _ = writeln!(out, "Rows differ in source: {}.\n", rows.join(", "));
}

/// The Markdown document; with `stats_first`, each limit's paired statistics before its
/// tables (the order of a review, where the verdict comes first).
fn markdown(table: &Table, stats_first: bool) -> String {
    let mut out = String::new();
    markdown_heading(&mut out, table);
    if let Some(search) = &table.search {
        markdown_search(&mut out, search);
    }
    if table.stages.is_empty() {
        markdown_tables(&mut out, table, stats_first);
    } else {
        for stage in &table.stages {
            markdown_stage(&mut out, table, stage, stats_first);
        }
    }
    for flag in &table.curve_flags {
        let _ = writeln!(out, "Note: {}.\n", flag.describe());
    }
    markdown_mismatches(&mut out, table);
    markdown_bench(&mut out, table);
    if table
        .tables
        .iter()
        .flat_map(|t| &t.rows)
        .any(|r| r.combined.compared < r.combined.positions && r.combined.compared > 0)
    {
        out.push_str(
            "Deltas marked \"over N\" compare only the N positions both the build and the baseline finished without error.\n",
        );
    }
    out
}

/// The limit tables of `table`, each with its statistics and its variants' speed (before it
/// with `stats_first`, after it otherwise), and the by-limit summary.
fn markdown_tables(out: &mut String, table: &Table, stats_first: bool) {
    for lt in &table.tables {
        if stats_first {
            markdown_stats(out, table, lt);
            markdown_speed(out, table, lt);
            markdown_limit(out, table, lt);
        } else {
            markdown_limit(out, table, lt);
            markdown_stats(out, table, lt);
            markdown_speed(out, table, lt);
        }
    }
    if table.tables.len() > 1 {
        markdown_by_limit(out, table);
    }
}

/// A warning line per row whose cross-checks disagreed (see [`crate::crosscheck`]): its
/// numbers did not reproduce on a second measurement. Nothing when all agree, so a table of
/// a deterministic engine reads as before.
fn markdown_mismatches(out: &mut String, table: &Table) {
    for lt in &table.tables {
        for row in lt.rows.iter().filter(|r| r.mismatches > 0) {
            let _ = writeln!(
                out,
                "Warning: cross-checks of {} at {}: {} of {} disagree (nodes or best move differ when measured again in a fresh engine process); its numbers are not reproducible.\n",
                row.build, lt.limit, row.mismatches, row.checks
            );
        }
    }
}

/// The builds' benches (the engine's own `bench`, run by each worker on each binary), when
/// its definition names one: equal to the baseline's means the variant probably searches as
/// the baseline does; a worker whose bench disagreed with another's is named.
fn markdown_bench(out: &mut String, table: &Table) {
    let Some(lt) = table.tables.first() else {
        return;
    };
    if lt.rows.iter().all(|r| r.bench.is_none()) {
        return;
    }
    out.push_str("Bench (the engine's own `bench`, nodes searched on each build's binary):\n\n| build | bench | |\n|---|---:|---|\n");
    for row in &lt.rows {
        let (nodes, note) = match &row.bench {
            None => ("not reported".to_string(), ""),
            Some(b) => (
                b.nodes.map_or("--".to_string(), thousands),
                if b.same_as_baseline {
                    "same bench as the baseline: probably no functional change"
                } else {
                    ""
                },
            ),
        };
        let _ = writeln!(out, "| {} | {nodes} | {note} |", row.build);
    }
    out.push('\n');
    for row in &lt.rows {
        for why in row.bench.iter().flat_map(|b| &b.mismatches) {
            let _ = writeln!(out, "Warning: bench mismatch on {}: {why}.\n", row.build);
        }
    }
}

fn markdown_limit(out: &mut String, table: &Table, lt: &LimitTable) {
    let build_col = needs_build_column(table, lt);
    let knob_cols: String = table.knobs.iter().map(|k| format!(" {k} |")).collect();
    let knob_rule: String = table.knobs.iter().map(|_| "---|").collect();
    let counter_cols: String = table.counters.iter().map(|k| format!(" {k} |")).collect();
    let counter_rule: String = table.counters.iter().map(|_| "---:|").collect();
    let (build_head, build_rule) = if build_col {
        ("| build |", "|---|")
    } else {
        ("|", "|")
    };
    for (title, cell_of) in cell_groups(table, lt) {
        let _ = writeln!(out, "### {title}\n");
        let _ = writeln!(
            out,
            "{build_head}{knob_cols} nodes | delta | solved | done |{counter_cols}"
        );
        let _ = writeln!(
            out,
            "{build_rule}{knob_rule}---:|---:|---:|---:|{counter_rule}"
        );
        for row in &lt.rows {
            markdown_row(out, table, row, cell_of(row), build_col);
        }
        out.push('\n');
    }
}

/// The sections of one limit's table: the combined cells, then each suite's, with titles.
fn cell_groups(table: &Table, lt: &LimitTable) -> Vec<(String, CellOf)> {
    let mut groups: Vec<(String, CellOf)> = Vec::new();
    let total: u64 = lt.rows.first().map_or(0, |r| r.combined.positions);
    groups.push((
        format!("combined ({total} positions, {})", lt.limit),
        Box::new(|r: &TableRow| &r.combined),
    ));
    for s in &table.suite_order {
        let n = lt
            .rows
            .first()
            .and_then(|r| r.suites.get(s))
            .map_or(0, |c| c.positions);
        let name = s.clone();
        groups.push((
            format!("{s} ({n} positions, {})", lt.limit),
            Box::new(move |r: &TableRow| &r.suites[&name]),
        ));
    }
    groups
}

/// A variant named after its knob values (`K=300`, `A=1,B=2`) would only repeat the knob
/// columns in a build column: then the knob columns alone name the rows, and the baseline's
/// first knob cell carries its name (`head_reference (default)`).
fn needs_build_column(table: &Table, lt: &LimitTable) -> bool {
    table.knobs.is_empty()
        || lt
            .rows
            .iter()
            .any(|r| r.build != table.baseline && r.build != knob_name(r, &table.knobs))
}

/// One row of a Markdown section: `row`'s cell `c`.
fn markdown_row(out: &mut String, table: &Table, row: &TableRow, c: &Cell, build_col: bool) {
    let is_baseline = row.build == table.baseline;
    let knobs: String = table
        .knobs
        .iter()
        .enumerate()
        .map(|(i, k)| match (build_col, is_baseline, i) {
            (false, true, 0) => format!(" {} ({}) |", row.build, knob_value(row, k)),
            _ => format!(" {} |", knob_value(row, k)),
        })
        .collect();
    let build = if build_col {
        format!("| {} |", row.build)
    } else {
        "|".to_string()
    };
    let counters: String = table
        .counters
        .iter()
        .map(|k| format!(" {} |", counter(row, c, k)))
        .collect();
    let _ = writeln!(
        out,
        "{build}{knobs} {} | {} | {} | {} |{counters}",
        nodes(row, c),
        delta(row, c, is_baseline),
        solved(row, c),
        done(c)
    );
}

/// The name a variant gets from its knob values alone (`K=300`, `A=1,B=2`, knobs in the
/// table's order), as the planner names `knob`/`values` and `[grid]` variants.
fn knob_name(row: &TableRow, knobs: &[String]) -> String {
    knobs
        .iter()
        .filter_map(|k| row.defines.get(k).map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A p-value, compactly.
fn p_value(p: f64) -> String {
    if p < 0.001 {
        "<0.001".to_string()
    } else {
        format!("{p:.3}")
    }
}

/// The paired statistics of one limit, one line per variant and suite (combined first);
/// nothing when no cell has any.
fn markdown_stats(out: &mut String, table: &Table, lt: &LimitTable) {
    let mut lines = String::new();
    for row in lt.rows.iter().filter(|r| r.build != table.baseline) {
        let cells = std::iter::once(("combined", &row.combined)).chain(
            table
                .suite_order
                .iter()
                .filter_map(|s| row.suites.get(s).map(|c| (s.as_str(), c))),
        );
        for (suite, c) in cells {
            let Some(st) = &c.stats else { continue };
            let ratio = match (st.geomean_ratio, st.ci95) {
                (Some(g), Some([lo, hi])) => format!("{g:.3} [{lo:.3}, {hi:.3}]"),
                _ => "--".to_string(),
            };
            let median = st
                .median_ratio
                .map_or("--".to_string(), |m| format!("{m:.3}"));
            let _ = writeln!(
                lines,
                "| {} | {suite} | {} | {ratio} | {median} | {}/{}/{} | +{}/-{} | {} |",
                row.build,
                st.pairs,
                st.faster,
                st.slower,
                st.equal,
                st.gained,
                st.lost,
                p_value(st.mcnemar_p)
            );
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### paired statistics vs {} ({})
",
        table.baseline, lt.limit
    );
    let _ = writeln!(
        out,
        "| build | suite | pairs | node ratio [95% CI] | median | faster/slower/equal | solved +/- | p |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    out.push_str(&lines);
    out.push('\n');
}

/// With several limits: each variant's combined delta at every limit, side by side.
fn markdown_by_limit(out: &mut String, table: &Table) {
    let _ = writeln!(out, "### nodes delta by limit (combined)\n");
    let heads: String = table
        .tables
        .iter()
        .map(|t| format!(" {} |", t.limit))
        .collect();
    let rule: String = table.tables.iter().map(|_| "---:|").collect();
    let _ = writeln!(out, "| build |{heads}");
    let _ = writeln!(out, "|---|{rule}");
    let Some(first) = table.tables.first() else {
        return;
    };
    for (i, row) in first.rows.iter().enumerate() {
        if row.build == table.baseline {
            continue;
        }
        let cells: String = table
            .tables
            .iter()
            .filter_map(|t| t.rows.get(i))
            .map(|r| format!(" {} |", delta(r, &r.combined, false)))
            .collect();
        let _ = writeln!(out, "| {} |{cells}", row.build);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests;
