//! The Markdown sections of a sweep that goes in steps: a search over its grid (its path and
//! choice) and a staged sweep's stages (each with its tables and what it promoted).

use std::fmt::Write;

use super::super::model::{SearchReport, StageState, StageTable, Table};
use super::markdown_tables;

/// A search over the grid: its path step by step, what it chose and what it cost against
/// measuring the whole grid.
pub(super) fn markdown_search(out: &mut String, search: &SearchReport) {
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
pub(super) fn markdown_stage(
    out: &mut String,
    table: &Table,
    stage: &StageTable,
    stats_first: bool,
) {
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
    markdown_tables(out, &view, stats_first);
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
