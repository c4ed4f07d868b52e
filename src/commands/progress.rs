//! Live progress of a sweep (`sweep run`, `submit --wait`, `status --wait`): indicatif bars
//! on a terminal, periodic log lines otherwise. Rates count only what happened while watching,
//! so a view that joins a sweep halfway does not credit it with the nodes searched before.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sweep_domain::wire::{Progress, SweepDetail};

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
            total.set_style(
                ProgressStyle::with_template(
                    "[{bar:30}] {pos:>6}/{len:<6} {msg:<26} ETA {eta:<4} all builds and suites",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            ProgressView::Bars {
                multi,
                total,
                bars: HashMap::new(),
                started: HashMap::new(),
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
        let done: u64 = detail.progress.iter().map(|p| p.done).sum();
        let total: u64 = detail.progress.iter().map(|p| p.total).sum();
        let nodes: u64 = detail.progress.iter().map(|p| p.nodes).sum();
        match self {
            ProgressView::Bars {
                multi,
                total: bar,
                bars,
                started,
            } => {
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(format!(
                    "{} nodes",
                    sweep_domain::table::render::thousands(nodes)
                ));
                let several_limits = detail.spec.limits.len() > 1;
                for p in &detail.progress {
                    let key = (p.build.clone(), p.suite.clone(), p.limit);
                    let pb = bars
                        .entry(key.clone())
                        .or_insert_with(|| new_bar(multi, p, several_limits));
                    if pb.is_finished() {
                        continue;
                    }
                    pb.set_position(p.done);
                    if p.done > 0 {
                        let (since, nodes0) = *started
                            .entry(key)
                            .or_insert_with(|| (Instant::now(), p.nodes));
                        let secs = since.elapsed().as_secs_f64();
                        // Results arrive in batches, so a bar's first batch has no measurable
                        // interval yet; show a rate once there is one.
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
            }
            ProgressView::Lines { every, last, start } => {
                let (since, done0, nodes0) =
                    *start.get_or_insert_with(|| (Instant::now(), done, nodes));
                if last.is_some_and(|l| l.elapsed() < *every) {
                    return;
                }
                *last = Some(Instant::now());
                let secs = since.elapsed().as_secs_f64().max(0.001);
                let seen = done.saturating_sub(done0);
                let eta = if seen > 0 && done < total {
                    format!(", ETA {:.0}s", secs * (total - done) as f64 / seen as f64)
                } else {
                    String::new()
                };
                tracing::info!(
                    sweep_id = detail.summary.id,
                    "{done}/{total} positions, {} nodes, {:.0} knodes/s{eta}",
                    sweep_domain::table::render::thousands(nodes),
                    nodes.saturating_sub(nodes0) as f64 / secs / 1000.0
                );
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

fn new_bar(multi: &MultiProgress, p: &Progress, with_limit: bool) -> ProgressBar {
    let pb = multi.add(ProgressBar::new(p.total));
    pb.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos:>6}/{len:<6} {msg:<26}          {prefix}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    if with_limit {
        pb.set_prefix(format!("{} / {} / {}", p.build, p.suite, p.limit));
    } else {
        pb.set_prefix(format!("{} / {}", p.build, p.suite));
    }
    pb
}
