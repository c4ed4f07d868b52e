//! Text renderings of a [`Table`]: Markdown (like the calibration plan's tables) and CSV.

use std::fmt::Write;

use super::model::{
    Cell, LimitTable, RowState, SearchReport, StageState, StageTable, Table, TableRow,
};
use crate::stats::PairedStats;

/// Output format of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown tables, one per suite and one combined.
    Markdown,
    /// One CSV line per build and suite (and `combined`).
    Csv,
    /// The JSON document.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "md" | "markdown" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(format!("unknown format `{other}` (use md, csv or json)")),
        }
    }
}

/// Renders `table` in `format`.
pub fn render(table: &Table, format: Format) -> String {
    match format {
        Format::Markdown => markdown(table),
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
}

fn markdown(table: &Table) -> String {
    let mut out = String::new();
    markdown_heading(&mut out, table);
    if let Some(search) = &table.search {
        markdown_search(&mut out, search);
    }
    if table.stages.is_empty() {
        markdown_tables(&mut out, table);
    } else {
        for stage in &table.stages {
            markdown_stage(&mut out, table, stage);
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

/// The limit tables of `table`, each with its statistics, and the by-limit summary.
fn markdown_tables(out: &mut String, table: &Table) {
    for lt in &table.tables {
        markdown_limit(out, table, lt);
        markdown_stats(out, table, lt);
    }
    if table.tables.len() > 1 {
        markdown_by_limit(out, table);
    }
}

/// A search over the grid: its path step by step, what it chose and what it cost against
/// measuring the whole grid.
fn markdown_search(out: &mut String, search: &SearchReport) {
    let _ = writeln!(
        out,
        "### {} search over {} cells (at most {} rounds, solved loss at most {})
",
        capitalized(&search.strategy),
        search.grid_cells,
        search.max_rounds,
        search.max_solved_loss
    );
    let _ = writeln!(
        out,
        "Started at {}.
",
        search.start
    );
    if !search.path.is_empty() {
        out.push_str(
            "| round | knob | cells | new | kept | node ratio | solved |
",
        );
        out.push_str(
            "|---:|---|---:|---:|---|---:|---:|
",
        );
    }
    for step in &search.path {
        let ratio = step.ratio.map_or("--".to_string(), |g| format!("{g:.4}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {ratio} | {:+} |",
            step.round,
            step.knob,
            step.cells.len(),
            step.measured,
            step.chosen,
            step.solved_delta
        );
    }
    if !search.path.is_empty() {
        out.push('\n');
    }
    markdown_search_end(out, search);
}

/// What a search chose (or is measuring, or why it failed), and what it cost.
fn markdown_search_end(out: &mut String, search: &SearchReport) {
    let measured = format!(
        "{} of {} cells measured",
        search.planned.len(),
        search.grid_cells
    );
    let cost = match (search.engine_seconds, search.grid_engine_seconds) {
        (Some(spent), Some(grid)) if grid > 0.0 => format!(
            "; {spent:.1} engine-seconds against an estimated {grid:.1} for the whole grid ({:.0} %)",
            100.0 * spent / grid
        ),
        _ => String::new(),
    };
    let _ = match (&search.failed, &search.chosen) {
        (Some(why), _) => writeln!(out, "The search failed: {why} ({measured}).\n"),
        (None, Some(chosen)) => writeln!(
            out,
            "Chosen: **{chosen}**{} ({measured}{cost}).\n",
            search
                .runner_up
                .as_ref()
                .map_or(String::new(), |r| format!("; runner-up {r}"))
        ),
        (None, None) => writeln!(
            out,
            "Searching: measuring {} ({measured}{cost}).\n",
            search.next.join(", ")
        ),
    };
}

/// `s` with its first letter in capitals.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

/// One stage of a staged sweep: a heading saying what it runs, its tables, and what it
/// promoted (or why it promoted nothing).
fn markdown_stage(out: &mut String, table: &Table, stage: &StageTable) {
    let of = table.stages.len();
    let limits: Vec<String> = stage.limits.iter().map(|l| l.to_string()).collect();
    let who = match stage.promote {
        None if table.search.is_some() => "the cells the search measured".to_string(),
        None => "every variant".to_string(),
        Some(n) => format!(
            "the baseline and the best {n} of stage {} (solved loss at most {})",
            stage.stage - 1,
            stage.max_solved_loss.unwrap_or(0)
        ),
    };
    let _ = writeln!(
        out,
        "### Stage {} of {of}: {} at {}; {who}\n",
        stage.stage,
        stage.suites.join(", "),
        limits.join(", ")
    );
    if stage.state == StageState::Waiting {
        let _ = writeln!(out, "Waiting for stage {} to finish.\n", stage.stage - 1);
        return;
    }
    let view = Table {
        suite_order: stage.suites.clone(),
        tables: stage.tables.clone(),
        stages: Vec::new(),
        search: None,
        curve_flags: Vec::new(),
        ..table.clone()
    };
    markdown_tables(out, &view);
    markdown_promotion(out, table, stage);
}

/// What a finished stage promoted into the next, and why (or why it promoted nobody).
fn markdown_promotion(out: &mut String, table: &Table, stage: &StageTable) {
    if let Some(why) = &stage.failed {
        let _ = writeln!(out, "Promoted nobody: {why}; the sweep ended here.\n");
    } else if !stage.promoted.is_empty() {
        let ranked: Vec<String> = stage
            .standings
            .iter()
            .filter(|s| s.eligible)
            .map(|s| {
                let ratio = s
                    .geomean_ratio
                    .map_or("--".to_string(), |g| format!("{g:.4}"));
                format!("{} {ratio} ({:+} solved)", s.build, s.solved_delta)
            })
            .collect();
        let _ = writeln!(
            out,
            "Promoted to stage {}: **{}** (of {} eligible, by geometric-mean node ratio against {}: {}).\n",
            stage.stage + 1,
            stage.promoted.join(", "),
            stage.eligible.len(),
            table.baseline,
            ranked.join("; ")
        );
        for s in stage.standings.iter().filter(|s| !s.eligible) {
            if let Some(why) = &s.why_not {
                let _ = writeln!(out, "Not eligible: {}: {why}.\n", s.build);
            }
        }
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

fn csv(table: &Table) -> String {
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
    // A staged sweep's lines say their stage: a later stage may run the same limit.
    if table.stages.is_empty() {
        out.push('\n');
        csv_lines(&mut out, table, &table.tables, &table.suite_order, None);
    } else {
        out.push_str(",stage\n");
        for stage in &table.stages {
            csv_lines(
                &mut out,
                table,
                &stage.tables,
                &stage.suites,
                Some(stage.stage),
            );
        }
    }
    out
}

/// The CSV lines of `tables` over `suites` (with a trailing stage field in a staged sweep).
fn csv_lines(
    out: &mut String,
    table: &Table,
    tables: &[LimitTable],
    suites: &[String],
    stage: Option<u32>,
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
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use crate::table::compute::{build_table, sums_of};
    use crate::table::fixtures::{result_row, table_build as build};
    use crate::table::model::{ResultRow, TableBuild, TableInput, TableSweep};
    use std::collections::BTreeMap;

    /// Asserts that `text` contains each of `parts`, showing `text` when one is missing.
    fn assert_contains(text: &str, parts: &[&str]) {
        for part in parts {
            assert!(text.contains(part), "{part:?} missing from\n{text}");
        }
    }

    fn row(b: &str, limit: Limit, n: u64, s: bool) -> ResultRow {
        result_row(b, "a", 0, limit, n, s)
    }

    /// The table of `builds` on suite `a` (one position) at `limits`, with knob columns
    /// `knobs` and counter columns `counters`, summed from `results` against
    /// `head_reference`.
    fn table_of(
        builds: &[TableBuild],
        knobs: &[&str],
        counters: &[String],
        limits: &[Limit],
        results: &[ResultRow],
    ) -> Table {
        let knobs: Vec<String> = knobs.iter().map(|k| k.to_string()).collect();
        build_table(TableInput {
            counters,
            knobs: &knobs,
            builds,
            limits,
            suites: &["a".to_string()],
            suite_sizes: &BTreeMap::from([("a".into(), 1)]),
            sums: &sums_of(results, "head_reference"),
        })
    }

    #[test]
    fn renders_markdown_and_csv() {
        let builds = vec![
            build("head_reference", &[], true, false),
            build("K=300,R=2", &[("K", 300), ("R", 2)], false, false),
            build("K=9", &[("K", 9)], false, true),
        ];
        let d9 = Limit::Depth(9);
        let results = [
            row("head_reference", d9, 48_588_231, true),
            row("K=300,R=2", d9, 47_468_723, false),
        ];
        let t = table_of(&builds, &["K", "R"], &[], &[d9], &results);
        let md = render(&t, Format::Markdown);
        assert!(md.contains("### combined (1 positions, depth 9)"), "{md}");
        // Builds named after their knob values: no build column repeating the knob columns.
        assert!(
            md.contains("| K | R | nodes | delta | solved | done |"),
            "{md}"
        );
        assert!(!md.contains("| build |"), "{md}");
        assert_contains(
            &md,
            &[
                "| head_reference (default) | default | 48,588,231 | -- | 1/1 | 1/1 |",
                "| 300 | 2 | 47,468,723 | -2.30% | 0/1 (-1) | 1/1 |",
                "| 9 | default | -- | build failed | -- | 0/1 |",
            ],
        );
        let csv = render(&t, Format::Csv);
        assert!(
            csv.starts_with("build,state,limit,K,R,suite,positions,done,errors,nodes,solved,compared,nodes_delta_pct,solved_delta,geomean_ratio,ci95_lo,ci95_hi,median_ratio,faster,slower,equal,gained,lost,mcnemar_p,checks,mismatches\n"),
            "{csv}"
        );
        assert_contains(
            &csv,
            &[
                "\n\"K=300,R=2\",ok,depth 9,300,2,a,1,1,0,47468723,0,1,-2.30,-1,,,,,,,,,,,,\n",
                "\nK=9,build_failed,depth 9,9,default,a,1,0,0,0,0,0,,,,,,,,,,,,,,\n",
            ],
        );
        // Cross-checks: a warning under the table only for rows whose checks disagreed, and
        // the row's counts on its combined CSV line.
        assert!(!md.contains("cross-checks"), "{md}");
        let mut flagged = t.clone();
        flagged.tables[0].rows[1].checks = 4;
        flagged.tables[0].rows[1].mismatches = 3;
        let md = render(&flagged, Format::Markdown);
        assert!(
            md.contains("Warning: cross-checks of K=300,R=2 at depth 9: 3 of 4 disagree"),
            "{md}"
        );
        let csv = render(&flagged, Format::Csv);
        assert!(csv.contains(",-2.30,-1,,,,,,,,,,,4,3\n"), "{csv}");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn the_heading_names_the_sweep_its_date_version_source_and_suites() {
        let builds = vec![build("head_reference", &[], true, false)];
        let mut t = build_table(TableInput {
            counters: &[],
            knobs: &[],
            builds: &builds,
            limits: &[Limit::Depth(9)],
            suites: &["b".to_string(), "a".to_string()],
            suite_sizes: &BTreeMap::from([("a".into(), 1), ("b".into(), 1)]),
            sums: &BTreeMap::new(),
        });
        let plain = render(&t, Format::Markdown);
        assert!(
            plain.starts_with("### "),
            "no heading without a sweep: {plain}"
        );
        t.sweep = Some(TableSweep {
            id: 7,
            name: "ceiling".into(),
            engine: "minnow".into(),
            submitted_at: "2026-12-01T09:05:59Z".parse().unwrap(),
            sweep_version: "1.2.3".into(),
        });
        t.suite_sha256 = BTreeMap::from([
            ("a".into(), "a".repeat(64)),
            ("b".into(), "0123456789abcdef".repeat(4)),
        ]);
        let md = render(&t, Format::Markdown);
        assert!(
            md.starts_with(
                "## sweep 7: ceiling (minnow), submitted 2026-12-01 09:05 UTC, Sweep 1.2.3\n\n\
                 suites b 0123456789ab, a aaaaaaaaaaaa\n\n"
            ),
            "{md}"
        );
        t.source = Some(crate::source::SourceProvenance {
            sha256: "f".repeat(64),
            origin: Default::default(),
        });
        let md = render(&t, Format::Markdown);
        assert!(
            md.contains("\n\nsource ffffffffffff (registered); suites b 0123456789ab, a "),
            "{md}"
        );
        // The JSON carries the same, whole.
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["sweep"]["sweep_version"], "1.2.3");
        assert_eq!(json["sweep"]["submitted_at"], "2026-12-01T09:05:59Z");
        assert_eq!(json["suite_sha256"]["a"], "a".repeat(64));
    }

    #[test]
    fn counter_columns_show_sums_once_finished() {
        let builds = vec![
            build("head_reference", &[], true, false),
            build("K=3", &[("K", 3)], false, false),
            build("K=9", &[("K", 9)], false, true),
        ];
        let d9 = Limit::Depth(9);
        let mut results = [
            row("head_reference", d9, 100, true),
            row("K=3", d9, 90, false),
        ];
        results[0].counters = BTreeMap::from([("null_skipped".into(), 1234)]);
        results[1].counters = BTreeMap::from([("null_skipped".into(), 56), ("x".into(), 1)]);
        let counters = ["null_skipped".to_string(), "never".to_string()];
        let mut t = table_of(&builds, &["K"], &counters, &[d9], &results);
        // Before the sums are attached (a running sweep), the columns say so.
        let md = render(&t, Format::Markdown);
        assert_contains(
            &md,
            &[
                "| done | null_skipped | never |",
                "| 1/1 | pending | pending |",
            ],
        );
        crate::table::counters::attach_counters(&mut t, d9, &results);
        let md = render(&t, Format::Markdown);
        assert_contains(
            &md,
            &[
                "| head_reference (default) | 100 | -- | 1/1 | 1/1 | 1,234 | -- |",
                "| 3 | 90 | -10.00% | 0/1 (-1) | 1/1 | 56 | -- |",
                "| 9 | -- | build failed | -- | 0/1 | -- | -- |",
            ],
        );
        let csv = render(&t, Format::Csv);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",mcnemar_p,checks,mismatches,null_skipped,never"),
            "{csv}"
        );
        assert!(
            csv.contains(
                "\nhead_reference,ok,depth 9,default,a,1,1,0,100,1,1,,,,,,,,,,,,,,,1234,\n"
            ),
            "{csv}"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&t, Format::Json)).unwrap();
        assert_eq!(
            json["counters"],
            serde_json::json!(["null_skipped", "never"])
        );
        // JSON carries every counter, not only the columns.
        assert_eq!(
            json["tables"][0]["rows"][1]["combined"]["counters"],
            serde_json::json!({"null_skipped": 56, "x": 1})
        );
    }

    #[test]
    fn benches_are_listed_with_the_same_bench_note_and_mismatches() {
        let mut t = crate::table::bench::table_of_two();
        let plain = render(&t, Format::Markdown);
        assert!(!plain.contains("Bench"), "no bench, no section: {plain}");
        let bench = |nodes, same, mismatches: Vec<String>| {
            Some(crate::table::RowBench {
                nodes,
                same_as_baseline: same,
                mismatches,
            })
        };
        t.tables[0].rows[0].bench = bench(Some(1_265_358), false, vec![]);
        t.tables[0].rows[1].bench =
            bench(Some(1_265_358), true, vec!["worker w2 benched 5".into()]);
        let md = render(&t, Format::Markdown);
        assert_contains(
            &md,
            &[
                "| base | 1,265,358 |  |",
                "| v1 | 1,265,358 | same bench as the baseline: probably no functional change |",
                "Warning: bench mismatch on v1: worker w2 benched 5.",
            ],
        );
        t.tables[0].rows[1].bench = None;
        assert!(render(&t, Format::Markdown).contains("| v1 | not reported |"));
    }

    #[test]
    fn renders_paired_statistics() {
        let builds = vec![
            build("head_reference", &[], true, false),
            build("K=3", &[("K", 3)], false, false),
        ];
        let d9 = Limit::Depth(9);
        let results = [
            row("head_reference", d9, 48_588_231, true),
            row("K=3", d9, 47_468_723, false),
        ];
        let mut t = table_of(&builds, &["K"], &[], &[d9], &results);
        crate::table::paired::attach_stats(&mut t, d9, &results, "1");
        // One pair: every resample is that pair, so the interval is the ratio itself
        // (python3: 47468723/48588231 = 0.9769592...).
        let md = render(&t, Format::Markdown);
        assert_contains(
            &md,
            &[
                "### paired statistics vs head_reference (depth 9)",
                "| K=3 | combined | 1 | 0.977 [0.977, 0.977] | 0.977 | 1/0/0 | +0/-1 | 1.000 |",
            ],
        );
        let csv = render(&t, Format::Csv);
        assert!(
            csv.contains(",-2.30,-1,0.976959,0.976959,0.976959,0.976959,1,0,0,0,1,1.000000,0,0\n"),
            "{csv}"
        );
    }

    #[test]
    fn several_limits_get_a_summary_and_pending_rows_say_so() {
        let builds = vec![
            build("head_reference", &[], true, false),
            build("K=1", &[("K", 1)], false, false),
        ];
        let (d4, d6) = (Limit::Depth(4), Limit::Depth(6));
        let results = [
            row("head_reference", d4, 100, true),
            row("K=1", d4, 90, true),
            row("head_reference", d6, 400, true),
        ];
        let t = table_of(&builds, &["K"], &[], &[d4, d6], &results);
        let md = render(&t, Format::Markdown);
        assert_contains(
            &md,
            &[
                "### combined (1 positions, depth 6)",
                "| build | depth 4 | depth 6 |",
                "| K=1 | -10.00% | pending |",
                "| 1 | -- | pending | 0/1 | 0/1 |",
            ],
        );
    }
}
