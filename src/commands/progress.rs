//! Live progress of a sweep (`sweep run`, `submit --wait`, `status --wait`): indicatif bars
//! on a terminal, periodic log lines otherwise. Rates count only what happened while watching,
//! so a view that joins a sweep halfway does not credit it with the nodes searched before.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sweep_domain::wire::{Progress, SweepDetail};

/// Every bar: its label (cut to 36 columns), then the bar filling what is left of the line
/// (so nothing wraps however wide the terminal is), the count and a message.
const BAR_TEMPLATE: &str = "{prefix:36!} [{wide_bar}] {pos:>6}/{len:<6} {msg}";

/// One bar's identity: build, suite and search limit.
type BarKey = (String, String, sweep_domain::limit::Limit);

/// Shows progress per build and suite.
pub enum ProgressView {
    /// Bars, one per (build, suite, limit), plus an overall bar.
    Bars {
        /// The bar group.
        multi: MultiProgress,
        /// Overall bar.
        total: ProgressBar,
        /// Bars by (build, suite, limit).
        bars: HashMap<BarKey, ProgressBar>,
        /// When each bar was first seen with results, and its nodes then, for its nodes/s
        /// (frozen once the bar is full).
        started: HashMap<BarKey, (Instant, u64)>,
        /// First update and the positions done then, for the overall ETA.
        watched: Option<(Instant, u64)>,
    },
    /// Plain lines every `every`.
    Lines {
        /// Interval between lines.
        every: Duration,
        /// When the last line was written.
        last: Option<Instant>,
        /// First update and the nodes then, for nodes/s and the ETA.
        start: Option<(Instant, u64, u64)>,
    },
}

impl ProgressView {
    /// Bars when stderr is a terminal, plain lines otherwise.
    pub fn new() -> Self {
        if std::io::stderr().is_terminal() {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let total = multi.add(ProgressBar::new(0));
            // Label first and the bar filling what is left of the line, so nothing wraps
            // however wide the terminal is; the ETA is ours (see `eta`), indicatif's would
            // say 0s before there is anything to go by.
            total.set_style(
                ProgressStyle::with_template(BAR_TEMPLATE)
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            total.set_prefix("all builds and suites");
            ProgressView::Bars {
                multi,
                total,
                bars: HashMap::new(),
                started: HashMap::new(),
                watched: None,
            }
        } else {
            Self::lines()
        }
    }

    /// Plain log lines every 5 s, terminal or not (e.g. when logs are JSON).
    pub fn lines() -> Self {
        ProgressView::Lines {
            every: Duration::from_secs(5),
            last: None,
            start: None,
        }
    }

    /// Shows the latest state.
    pub fn update(&mut self, detail: &SweepDetail) {
        let t = Totals::of(detail);
        match self {
            ProgressView::Bars {
                multi,
                total: bar,
                bars,
                started,
                watched,
            } => {
                bar.set_length(t.total);
                bar.set_position(t.done);
                let (since, done0) = *watched.get_or_insert_with(|| (Instant::now(), t.done));
                bar.set_message(format!(
                    "ETA {:<6} {} nodes{}{}",
                    eta(since, done0, t.done, t.total).unwrap_or_else(|| "-".to_string()),
                    sweep_domain::table::render::thousands(t.nodes),
                    t.checks,
                    t.stage
                ));
                let several_limits = detail.spec.all_limits().len() > 1;
                let building = building(detail);
                for p in &detail.progress {
                    let key = (p.build.clone(), p.suite.clone(), p.limit);
                    let pb = bars
                        .entry(key.clone())
                        .or_insert_with(|| new_bar(multi, p, several_limits));
                    update_bar(pb, started, key, p, building.contains(&p.build.as_str()));
                }
            }
            ProgressView::Lines { every, last, start } => {
                log_line(*every, last, start, detail, &t);
            }
        }
    }

    /// Removes the bars before the table is printed.
    pub fn finish(self) {
        if let ProgressView::Bars {
            multi, total, bars, ..
        } = self
        {
            total.finish_and_clear();
            for bar in bars.values() {
                bar.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}

/// What every view shows of the whole sweep.
struct Totals {
    /// Positions done.
    done: u64,
    /// Positions in all.
    total: u64,
    /// Nodes searched.
    nodes: u64,
    /// The cross-checks' progress (`, cross-checks 3/10`), once any are planned: they run
    /// after the work, and without it the bar would sit full while they do.
    checks: String,
    /// A staged sweep's stage (`, stage 1 of 2`): the total grows as stages are added.
    stage: String,
}

impl Totals {
    fn of(detail: &SweepDetail) -> Self {
        let c = &detail.cross_checks;
        Totals {
            done: detail.progress.iter().map(|p| p.done).sum(),
            total: detail.progress.iter().map(|p| p.total).sum(),
            nodes: detail.progress.iter().map(|p| p.nodes).sum(),
            checks: if c.planned > 0 {
                format!(", cross-checks {}/{}", c.done, c.planned)
            } else {
                String::new()
            },
            stage: detail.summary.stage.map_or(String::new(), |s| {
                format!(", stage {} of {}", s.current, s.total)
            }),
        }
    }
}

/// Moves the bar of `p` (whose identity is `key`): its position, `building…` while its build
/// compiles, its nodes/s once measurable and its errors; finished once full.
fn update_bar(
    pb: &ProgressBar,
    started: &mut HashMap<BarKey, (Instant, u64)>,
    key: BarKey,
    p: &Progress,
    building: bool,
) {
    if pb.is_finished() {
        return;
    }
    pb.set_position(p.done);
    if p.done == 0 && building {
        pb.set_message("building…");
    }
    if p.done > 0 {
        let (since, nodes0) = *started
            .entry(key)
            .or_insert_with(|| (Instant::now(), p.nodes));
        let secs = since.elapsed().as_secs_f64();
        // Results arrive in batches, so a bar's first batch has no measurable interval yet;
        // show a rate once there is one.
        let mut msg = if secs >= 0.5 {
            let nodes = p.nodes.saturating_sub(nodes0);
            format!("{:>6.0} knodes/s", nodes as f64 / secs / 1000.0)
        } else {
            String::new()
        };
        if p.errors > 0 {
            msg.push_str(&format!("  {} errors", p.errors));
        }
        pb.set_message(msg);
    }
    if p.done >= p.total {
        pb.finish();
    }
}

/// A log line of the sweep's progress, at most one per `every` (`last` is when the previous
/// one was written; `start` the first update with the positions and nodes done then).
fn log_line(
    every: Duration,
    last: &mut Option<Instant>,
    start: &mut Option<(Instant, u64, u64)>,
    detail: &SweepDetail,
    t: &Totals,
) {
    let (since, done0, nodes0) = *start.get_or_insert_with(|| (Instant::now(), t.done, t.nodes));
    if last.is_some_and(|l| l.elapsed() < every) {
        return;
    }
    *last = Some(Instant::now());
    let secs = since.elapsed().as_secs_f64().max(0.001);
    let eta = match eta(since, done0, t.done, t.total) {
        Some(eta) if t.done < t.total => format!(", ETA {eta}"),
        _ => String::new(),
    };
    let building = building(detail);
    let building = if building.is_empty() {
        String::new()
    } else {
        format!("; building {}", building.join(", "))
    };
    tracing::info!(
        sweep_id = detail.summary.id,
        "{}/{} positions, {} nodes, {:.0} knodes/s{eta}{}{}{building}",
        t.done,
        t.total,
        sweep_domain::table::render::thousands(t.nodes),
        t.nodes.saturating_sub(nodes0) as f64 / secs / 1000.0,
        t.checks,
        t.stage
    );
}

/// The builds a worker holds a job of but that have no result yet anywhere: being compiled
/// (or their first positions are running).
fn building(detail: &SweepDetail) -> Vec<&str> {
    detail
        .active_builds
        .iter()
        .map(String::as_str)
        .filter(|b| {
            detail
                .progress
                .iter()
                .filter(|p| p.build == *b)
                .all(|p| p.done == 0)
        })
        .collect()
}

/// The time left at the pace watched since `since` (when `done0` positions were done), as
/// `1m05s`; `None` until some position finished while watching, so a view never guesses
/// from nothing (nor credits a resumed sweep with the work done before it).
fn eta(since: Instant, done0: u64, done: u64, total: u64) -> Option<String> {
    let seen = done.saturating_sub(done0);
    let secs = since.elapsed().as_secs_f64();
    if seen == 0 || secs < 0.5 {
        return None;
    }
    let left = (secs * total.saturating_sub(done) as f64 / seen as f64).round() as u64;
    Some(match left {
        0..=59 => format!("{left}s"),
        60..=3599 => format!("{}m{:02}s", left / 60, left % 60),
        _ => format!("{}h{:02}m", left / 3600, left % 3600 / 60),
    })
}

/// A bar's label, short enough to leave the bar room: a long knob name in a `KNOB=VALUE`
/// build name is cut (`NULLMOVE_SKI…=300`), since the value is what tells builds apart.
fn label(p: &Progress, with_limit: bool) -> String {
    let build = match p.build.split_once('=') {
        Some((knob, value)) if !value.contains('=') && knob.chars().count() > 12 => {
            format!("{}…={value}", knob.chars().take(11).collect::<String>())
        }
        _ => p.build.clone(),
    };
    if with_limit {
        format!("{build} / {} / {}", p.suite, p.limit)
    } else {
        format!("{build} / {}", p.suite)
    }
}

fn new_bar(multi: &MultiProgress, p: &Progress, with_limit: bool) -> ProgressBar {
    let pb = multi.add(ProgressBar::new(p.total));
    pb.set_style(
        ProgressStyle::with_template(BAR_TEMPLATE)
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(label(p, with_limit));
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_eta_before_anything_was_watched() {
        let now = Instant::now();
        assert_eq!(eta(now, 40, 40, 100), None, "nothing done while watching");
        let earlier = now - Duration::from_secs(10);
        assert_eq!(eta(earlier, 40, 40, 100), None);
        assert_eq!(eta(earlier, 40, 50, 100).as_deref(), Some("50s"));
        assert_eq!(eta(earlier, 0, 1, 100).as_deref(), Some("16m30s"));
    }

    #[test]
    fn builds_held_without_results_are_building() {
        let progress = |build: &str, done| Progress {
            build: build.into(),
            suite: "s".into(),
            limit: sweep_domain::limit::Limit::Depth(1),
            done,
            total: 10,
            errors: 0,
            nodes: 0,
        };
        let detail = SweepDetail {
            summary: serde_json::from_value(serde_json::json!({
                "id": 1, "name": "x", "engine": "e", "state": "running",
                "positions_done": 3, "positions_total": 30,
                "created_at": "2026-01-01T00:00:00Z"
            }))
            .unwrap(),
            spec: serde_json::from_value(serde_json::json!({
                "name": "x", "engine": "e", "knobs": [], "variants": [],
                "baseline": {"name": "head_reference", "defines": {}},
                "suites": ["s"], "limits": [{"depth": 1}], "chunk_size": 10, "description": ""
            }))
            .unwrap(),
            source_sha256: String::new(),
            builds: vec![],
            progress: vec![
                progress("head_reference", 3),
                progress("A=1", 0),
                progress("A=2", 0),
            ],
            active_workers: vec![],
            active_builds: vec!["head_reference".into(), "A=1".into()],
            errors: vec![],
            cross_checks: Default::default(),
            imported_from: None,
        };
        // Held and without results: building. Held with results, or not held: not.
        assert_eq!(building(&detail), vec!["A=1"]);
    }

    #[test]
    fn the_bar_template_parses() {
        let style = ProgressStyle::with_template(BAR_TEMPLATE);
        assert!(style.is_ok(), "{:?}", style.err());
        let bar = ProgressBar::with_draw_target(Some(100), ProgressDrawTarget::hidden());
        bar.set_style(style.unwrap());
        bar.set_prefix("NULLMOVE_SK…=3000 / ecm_confident_quick / depth 10");
        bar.set_position(40);
        bar.set_message("ETA -      12,345 nodes");
        bar.finish();
    }

    #[test]
    fn labels_keep_the_value() {
        let p = Progress {
            build: "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS=3000".into(),
            suite: "ecm_hard_quick".into(),
            limit: sweep_domain::limit::Limit::Depth(6),
            done: 0,
            total: 90,
            errors: 0,
            nodes: 0,
        };
        assert_eq!(label(&p, false), "NULLMOVE_SK…=3000 / ecm_hard_quick");
        assert_eq!(
            label(&p, true),
            "NULLMOVE_SK…=3000 / ecm_hard_quick / depth 6"
        );
    }
}
