//! Text renderings of a [`Table`]: Markdown (like the calibration plan's tables) and CSV.

use std::fmt::Write;

use super::{Cell, Table, TableRow};

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

fn knob_value(table: &Table, row: &TableRow) -> String {
    row.defines
        .get(&table.knob)
        .map_or_else(|| "default".to_string(), |v| v.to_string())
}

fn delta(cell: &Cell) -> String {
    cell.nodes_delta_pct
        .map_or_else(|| "--".to_string(), |d| format!("{d:+.2}%"))
}

fn solved(cell: &Cell) -> String {
    let mut s = format!("{}/{}", cell.solved, cell.positions);
    if let Some(d) = cell.solved_delta {
        let _ = write!(s, " ({d:+})");
    }
    s
}

/// Picks one column group's cell out of a row.
type CellOf = Box<dyn Fn(&TableRow) -> &Cell>;

fn markdown(table: &Table) -> String {
    let mut out = String::new();
    let mut groups: Vec<(String, CellOf)> = Vec::new();
    let total: u64 = table.rows.first().map_or(0, |r| r.combined.positions);
    groups.push((
        format!("combined ({total} positions, depth {})", table.depth),
        Box::new(|r: &TableRow| &r.combined),
    ));
    for s in &table.suite_order {
        let n = table
            .rows
            .first()
            .and_then(|r| r.suites.get(s))
            .map_or(0, |c| c.positions);
        let name = s.clone();
        groups.push((
            format!("{s} ({n} positions, depth {})", table.depth),
            Box::new(move |r: &TableRow| &r.suites[&name]),
        ));
    }
    for (title, cell_of) in groups {
        let _ = writeln!(out, "### {title}\n");
        let _ = writeln!(
            out,
            "| build | {} | nodes | delta | solved | done |",
            table.knob
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|");
        for row in &table.rows {
            let c = cell_of(row);
            let mut done = format!("{}/{}", c.done, c.positions);
            if c.errors > 0 {
                let _ = write!(done, " ({} errors)", c.errors);
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                row.build,
                knob_value(table, row),
                thousands(c.nodes),
                delta(c),
                solved(c),
                done
            );
        }
        out.push('\n');
    }
    out
}

fn csv(table: &Table) -> String {
    let mut out = String::from(
        "build,knob_value,suite,positions,done,errors,nodes,nodes_delta_pct,solved,solved_delta\n",
    );
    for row in &table.rows {
        let cells = table
            .suite_order
            .iter()
            .map(|s| (s.as_str(), &row.suites[s]))
            .chain(std::iter::once(("combined", &row.combined)));
        for (suite, c) in cells {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{}",
                row.build,
                knob_value(table, row),
                suite,
                c.positions,
                c.done,
                c.errors,
                c.nodes,
                c.nodes_delta_pct
                    .map_or(String::new(), |d| format!("{d:.2}")),
                c.solved,
                c.solved_delta.map_or(String::new(), |d| d.to_string()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::BuildPlan;
    use crate::table::{build_table, ResultRow};
    use std::collections::BTreeMap;

    #[test]
    fn renders_markdown_and_csv() {
        let builds = vec![
            BuildPlan {
                name: "head_reference".into(),
                defines: BTreeMap::new(),
                is_baseline: true,
            },
            BuildPlan {
                name: "K=300".into(),
                defines: BTreeMap::from([("K".into(), 300)]),
                is_baseline: false,
            },
        ];
        let row = |b: &str, n: u64, s: bool| ResultRow {
            build: b.into(),
            suite: "a".into(),
            index: 0,
            position_id: "a.0".into(),
            nodes: n,
            bestmove: "e2e4".into(),
            solved: s,
            error: None,
        };
        let t = build_table(
            "K",
            9,
            &builds,
            &["a".into()],
            &BTreeMap::from([("a".into(), 1)]),
            &[
                row("head_reference", 48_588_231, true),
                row("K=300", 47_468_723, false),
            ],
        );
        let md = render(&t, Format::Markdown);
        assert!(
            md.contains("| head_reference | default | 48,588,231 | -- | 1/1 | 1/1 |"),
            "{md}"
        );
        assert!(
            md.contains("| K=300 | 300 | 47,468,723 | -2.30% | 0/1 (-1) |"),
            "{md}"
        );
        let csv = render(&t, Format::Csv);
        assert!(
            csv.contains("\nK=300,300,a,1,1,0,47468723,-2.30,0,-1\n"),
            "{csv}"
        );
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(999), "999");
    }
}
