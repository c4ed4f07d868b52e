//! `sweep positions ID --build NAME`: one build's positions beside the baseline's (gained,
//! lost, the largest node changes), from a coordinator or a database.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use sweep_coordinator::service::Caller;
use sweep_domain::table::render::thousands;
use sweep_domain::table::{Change, PositionComparison, PositionsReport, PositionsView};
use sweep_domain::wire::SweepSummary;

use super::api::{url_segment, Api};
use crate::cli::PositionsArgs;

/// Rows per request: the API's largest page.
const PAGE: usize = 5000;

/// Prints the comparison as a Markdown report or as the API's JSON (every row).
pub async fn run(args: PositionsArgs) -> anyhow::Result<ExitCode> {
    let (summary, report) = match super::local_database(&args.source) {
        Some(db) => {
            let service = super::local::open(db).await?;
            let detail = service.reads().detail(&Caller::Local, args.id).await?;
            let report = service
                .reads()
                .positions(
                    &Caller::Local,
                    args.id,
                    Some(&args.build),
                    args.limit,
                    PositionsView::All,
                    0,
                    usize::MAX,
                )
                .await?;
            (detail.summary, report)
        }
        None => fetch(&super::api(&args.source)?, &args).await?,
    };
    let text = match args.format.as_str() {
        "json" => serde_json::to_string_pretty(&report)? + "\n",
        _ => markdown(&summary, &report, args.top),
    };
    super::print_out(&text);
    Ok(ExitCode::SUCCESS)
}

/// The sweep's summary and every row of the comparison, page by page.
async fn fetch(api: &Api, args: &PositionsArgs) -> anyhow::Result<(SweepSummary, PositionsReport)> {
    let detail = api.poll_detail(args.id).await?;
    let mut query = format!("build={}", url_segment(&args.build));
    if let Some(limit) = &args.limit {
        query.push_str(&format!("&limit={}", url_segment(&limit.to_string())));
    }
    let mut report: Option<PositionsReport> = None;
    loop {
        let offset = report.as_ref().map_or(0, |r| r.rows.len());
        let path = format!(
            "/api/v1/sweeps/{}/positions?{query}&offset={offset}&page_size={PAGE}",
            args.id
        );
        let page: PositionsReport = api
            .get(&path)
            .await?
            .json()
            .await
            .context("decoding the positions")?;
        let got = page.rows.len();
        match &mut report {
            None => report = Some(page),
            Some(r) => r.rows.extend(page.rows),
        }
        let r = report.as_ref().expect("set above");
        if got == 0 || r.rows.len() >= r.total {
            break;
        }
    }
    Ok((detail.summary, report.expect("at least one page")))
}

/// The report: a heading naming the sweep, the positions gained and lost, and the `top`
/// largest node changes among the positions both builds finished without error.
pub fn markdown(sweep: &SweepSummary, report: &PositionsReport, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## sweep {} `{}` ({}): {} vs {}, {}\n",
        sweep.id, sweep.name, sweep.engine, report.build, report.baseline, report.limit
    );
    for (title, change) in [("gained", Change::Gained), ("lost", Change::Lost)] {
        let rows: Vec<&PositionComparison> =
            report.rows.iter().filter(|r| r.change == change).collect();
        let _ = writeln!(out, "### {title}: {}\n", rows.len());
        if !rows.is_empty() {
            table(&mut out, &rows);
        }
    }
    // Ranked as the API's `node_change` view ranks them (by the size of the node ratio), so
    // the CLI, the dashboard and `?view=node_change` agree.
    let compared = report
        .rows
        .iter()
        .filter(|r| {
            let ok = |x: &Option<sweep_domain::table::ResultRow>| {
                x.as_ref().is_some_and(|x| x.error.is_none() && x.nodes > 0)
            };
            ok(&r.build) && ok(&r.baseline)
        })
        .count();
    let mut changed = report.clone().view(PositionsView::NodeChange).rows;
    changed.truncate(top);
    let _ = writeln!(
        out,
        "### largest node changes: {} of {compared} compared\n",
        changed.len()
    );
    if !changed.is_empty() {
        let rows: Vec<&PositionComparison> = changed.iter().collect();
        table(&mut out, &rows);
    }
    let pending = report
        .rows
        .iter()
        .filter(|r| r.change == Change::Pending)
        .count();
    if pending > 0 {
        let _ = writeln!(
            out,
            "{pending} of {} positions have no result on one side yet (or an error).",
            report.total
        );
    }
    out
}

/// One Markdown row per position: both builds' moves, verdicts and nodes.
fn table(out: &mut String, rows: &[&PositionComparison]) {
    let _ = writeln!(
        out,
        "| suite | position | baseline move | move | baseline nodes | nodes | delta |\n|---|---|---|---|---:|---:|---:|"
    );
    for r in rows {
        let side = |x: Option<&sweep_domain::table::ResultRow>| match x {
            None => ("-".to_string(), "-".to_string()),
            Some(x) if x.error.is_some() => ("error".to_string(), "-".to_string()),
            Some(x) => (
                format!("{}{}", x.bestmove, if x.solved { " (solved)" } else { "" }),
                thousands(x.nodes),
            ),
        };
        let (base_move, base_nodes) = side(r.baseline.as_ref());
        let (build_move, build_nodes) = side(r.build.as_ref());
        let delta = match (&r.build, &r.baseline) {
            (Some(b), Some(base))
                if b.error.is_none() && base.error.is_none() && base.nodes > 0 =>
            {
                format!(
                    "{:+.1}%",
                    (b.nodes as f64 / base.nodes as f64 - 1.0) * 100.0
                )
            }
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {base_move} | {build_move} | {base_nodes} | {build_nodes} | {delta} |",
            r.suite, r.id
        );
    }
    out.push('\n');
}
