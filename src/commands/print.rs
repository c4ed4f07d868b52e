//! What the client subcommands print on a terminal, the same for a sweep read from a
//! coordinator as for one read from a local database.

use sweep_domain::auth::AuditEntry;
use sweep_domain::wire::{Estimate, SweepDetail, SweepSummary};

/// Prints a sweep's state, progress, build failures, workers and errors.
pub fn print_detail(d: &SweepDetail) {
    println!(
        "sweep {} `{}` ({}) by {}: {}  {}/{} positions{}",
        d.summary.id,
        d.summary.name,
        d.summary.engine,
        // Sweeps stored before tokens existed have no submitter.
        d.summary.submitter.as_deref().unwrap_or("-"),
        d.summary.state.as_str(),
        d.summary.positions_done,
        d.summary.positions_total,
        d.summary.stage.map_or(String::new(), |s| format!(
            "  stage {} of {}",
            s.current, s.total
        ))
    );
    if let Some(note) = &d.summary.approval_note {
        println!("  approval: {note}");
    }
    if let Some(from) = &d.imported_from {
        println!(
            "  imported: sweep {} of {}, exported {} by Sweep {}",
            from.sweep_id,
            from.from,
            from.exported_at.format("%Y-%m-%d %H:%M UTC"),
            from.sweep_version
        );
    }
    for p in &d.progress {
        println!(
            "  {:<40} {:<24} {:<16} {:>6}/{:<6} errors {}",
            p.build,
            p.suite,
            p.limit.to_string(),
            p.done,
            p.total,
            p.errors
        );
    }
    for b in d.builds.iter().filter(|b| b.build_error.is_some()) {
        println!(
            "  build {} failed:\n{}",
            b.name,
            b.build_error.as_deref().unwrap_or("")
        );
    }
    for w in &d.active_workers {
        println!("  worker {} ({}) holds {} job(s)", w.name, w.host, w.jobs);
    }
    for e in &d.errors {
        println!(
            "  error {} {} {}: {}",
            e.build, e.suite, e.position, e.error
        );
    }
    for line in d.cross_checks.lines() {
        println!("  {line}");
    }
}

/// Prints a table's text on stdout, ending in a newline.
pub fn print_table(text: &str) {
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
}

/// Prints one line per audit log entry.
pub fn print_audit(entries: &[AuditEntry]) {
    for e in entries {
        println!(
            "{:>6}  {}  {:<20} {:<10} {:<13} {:<16} {}",
            e.id,
            e.at.format("%Y-%m-%d %H:%M:%S"),
            e.actor,
            e.role,
            e.action,
            e.target,
            e.detail
        );
    }
}

/// Prints what a sweep would make and cost (`sweep submit --dry-run`).
pub fn print_estimate(e: &Estimate) {
    use sweep_domain::table::render::thousands;
    println!(
        "dry run: `{}` ({}) would make {} jobs: {} builds, {} searches, {} cross-checks; nothing submitted",
        e.name, e.engine, e.jobs, e.builds, thousands(e.positions), e.cross_checks
    );
    if let Some(id) = e.existing {
        println!("an identical sweep is still running: submitting would give sweep {id}");
    }
    println!(
        "reuse: {} results of earlier sweeps of the same builds would be taken; {} searches to run",
        thousands(e.reused),
        thousands(e.to_search)
    );
    let line = |c: &sweep_domain::wire::EstimateCell, at_most: &str| match c.mean_ms {
        _ if c.to_search == 0 => println!("  {} at {}: nothing to search", c.suite, c.limit),
        Some(ms) => println!(
            "  {} at {}: {at_most}{} searches x {:.1} ms (mean of {} earlier) = {:.0} engine-s",
            c.suite,
            c.limit,
            thousands(c.to_search),
            ms,
            thousands(c.measured),
            c.to_search as f64 * ms / 1000.0
        ),
        None => println!(
            "  {} at {}: {at_most}{} searches, no earlier search of {} there",
            c.suite,
            c.limit,
            thousands(c.to_search),
            e.engine
        ),
    };
    for c in &e.cells {
        line(c, "");
    }
    if let Some(s) = &e.search_rest {
        println!(
            "search: the cells past its first step, at most {} searches (it measures what it needs of them)",
            thousands(s.positions)
        );
        for c in &s.cells {
            line(c, "at most ");
        }
    }
    if let Some(c) = &e.speed {
        println!("speed jobs: pairs of processes of the baseline and each variant");
        line(c, "");
    }
    for s in &e.later_stages {
        println!(
            "stage {}: at most {} searches",
            s.stage,
            thousands(s.positions)
        );
        for c in &s.cells {
            line(c, "at most ");
        }
    }
    match e.engine_seconds {
        Some(s) => println!("estimate: {s:.0} engine-seconds of searches (builds not counted)"),
        None => println!(
            "estimate: none: no earlier measurement of {} on {}",
            e.engine,
            e.unmeasured.join(", ")
        ),
    }
}

/// Prints one line per sweep.
pub fn print_list(sweeps: &[SweepSummary]) {
    for s in sweeps {
        println!(
            "{:>5}  {:<10} {:>8}/{:<8} {}  {:<16} {}",
            s.id,
            s.state.as_str(),
            s.positions_done,
            s.positions_total,
            s.created_at.format("%Y-%m-%d %H:%M"),
            s.submitter.as_deref().unwrap_or("-"),
            s.name
        );
    }
}
