//! A coordinate search over a sweep's grid (see [`crate::spec::SearchConfig`]), replayed
//! from the standings of the cells measured so far: the path is a pure function of them, so
//! nothing but the measured cells has to be kept between steps, and every coordinator (or a
//! restarted one) finds the same next step. Each replay either ends (the search has chosen)
//! or names the cells it needs measured next.

use std::collections::BTreeMap;

use super::model::{SearchReport, SearchStep, Standing};
use crate::spec::{Search, Variant};

/// Replays a coordinate search over the grid `knobs` x `variants` from `standings` (every
/// measured cell's, as [`super::promote`] ranks them), `planned` being the cells given
/// searches so far: the report of where it stands, whose `next` names the cells to measure
/// unless it has `finished`.
pub fn walk(
    search: &Search,
    knobs: &[String],
    variants: &[Variant],
    standings: &[Standing],
    planned: &[String],
) -> SearchReport {
    let by_name: BTreeMap<&str, &Standing> =
        standings.iter().map(|s| (s.build.as_str(), s)).collect();
    let (path, end) = replay(search, knobs, variants, &by_name);
    let mut report = SearchReport {
        strategy: search.strategy.clone(),
        max_rounds: search.max_rounds,
        max_solved_loss: search.max_solved_loss,
        start: search.start.clone(),
        path,
        planned: planned.to_vec(),
        next: Vec::new(),
        finished: false,
        chosen: None,
        runner_up: None,
        failed: None,
        grid_cells: variants.len() as u32,
        engine_seconds: None,
        grid_engine_seconds: None,
    };
    match end {
        End::Needs(missing) => {
            let new = missing.iter().filter(|m| !planned.contains(m)).cloned();
            report.planned.extend(new.collect::<Vec<_>>());
            report.next = missing;
        }
        End::Chose(chosen) => {
            report.finished = true;
            report.runner_up = standings
                .iter()
                .find(|s| s.eligible && s.build != chosen)
                .map(|s| s.build.clone());
            report.chosen = Some(chosen);
        }
        End::Failed(why) => {
            report.finished = true;
            report.failed = Some(why);
        }
    }
    report
}

/// How a replay ends.
enum End {
    /// It needs these cells measured to go on.
    Needs(Vec<String>),
    /// It has chosen this cell.
    Chose(String),
    /// It cannot go on, for this reason.
    Failed(String),
}

/// The search's steps as far as the measured cells (`by_name`) take it, and how it ends.
fn replay(
    search: &Search,
    knobs: &[String],
    variants: &[Variant],
    by_name: &BTreeMap<&str, &Standing>,
) -> (Vec<SearchStep>, End) {
    let mut path = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut current = search.start.as_str();
    for round in 1..=search.max_rounds {
        let mut changed = false;
        for knob in knobs {
            let line = line_through(variants, current, knob);
            let missing: Vec<String> = line
                .iter()
                .filter(|c| !by_name.contains_key(*c))
                .map(|c| c.to_string())
                .collect();
            if !missing.is_empty() {
                return (path, End::Needs(missing));
            }
            let best = best_of(&line, current, by_name);
            let Some(s) = by_name.get(best) else {
                // Only a spec not validated against its grid gets here.
                let why = format!("`{current}` is not a cell of the grid");
                return (path, End::Failed(why));
            };
            path.push(SearchStep {
                round,
                knob: knob.clone(),
                cells: line.iter().map(|c| c.to_string()).collect(),
                measured: line.iter().filter(|c| !seen.contains(c)).count() as u32,
                chosen: best.to_string(),
                ratio: s.geomean_ratio,
                solved_delta: s.solved_delta,
            });
            seen.extend(
                line.iter()
                    .filter(|c| !seen.contains(c))
                    .collect::<Vec<_>>(),
            );
            changed |= best != current;
            current = best;
        }
        if !changed {
            break;
        }
    }
    (path, End::Chose(current.to_string()))
}

/// The cells that differ from `current` in `knob` alone, `current` among them, in the
/// grid's order.
fn line_through<'a>(variants: &'a [Variant], current: &str, knob: &str) -> Vec<&'a str> {
    let Some(at) = variants.iter().find(|v| v.name == current) else {
        return Vec::new();
    };
    variants
        .iter()
        .filter(|v| {
            v.defines
                .iter()
                .all(|(k, value)| k == knob || at.defines.get(k) == Some(value))
        })
        .map(|v| v.name.as_str())
        .collect()
}

/// The best of `line`'s cells: `standings` are ranked best first, so the first eligible
/// one, unless `current` is as good (same ratio and solved count), which keeps it: a
/// search moves only for a real gain.
fn best_of<'a>(line: &[&'a str], current: &'a str, by_name: &BTreeMap<&str, &Standing>) -> &'a str {
    let mut ranked: Vec<(&str, &Standing)> = line
        .iter()
        .filter_map(|c| by_name.get(c).map(|s| (*c, *s)))
        .filter(|(_, s)| s.eligible)
        .collect();
    ranked.sort_by(|a, b| super::promote::rank(a.1, b.1));
    let Some((best, s)) = ranked.first().copied() else {
        return current;
    };
    match by_name.get(current) {
        Some(c)
            if c.eligible
                && c.geomean_ratio == s.geomean_ratio
                && c.solved_delta == s.solved_delta =>
        {
            current
        }
        _ => best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3x3 grid over knobs A and B, cells named `A=a,B=b`.
    fn grid() -> (Vec<String>, Vec<Variant>) {
        let mut variants = Vec::new();
        for a in 0..3 {
            for b in 0..3 {
                variants.push(Variant {
                    name: format!("A={a},B={b}"),
                    defines: BTreeMap::from([("A".to_string(), a), ("B".to_string(), b)]),
                    source: None,
                });
            }
        }
        (vec!["A".into(), "B".into()], variants)
    }

    fn search(rounds: u32) -> Search {
        Search {
            strategy: "coordinate".into(),
            max_rounds: rounds,
            max_solved_loss: 0,
            start: "A=0,B=0".into(),
        }
    }

    /// Standings of `cells` from a ratio function of (a, b), ranked as promote ranks them.
    fn standings(cells: &[String], ratio: impl Fn(i64, i64) -> f64) -> Vec<Standing> {
        let mut out: Vec<Standing> = cells
            .iter()
            .map(|c| {
                let a = c.as_bytes()[2] as i64 - 48;
                let b = c.as_bytes()[6] as i64 - 48;
                Standing {
                    build: c.clone(),
                    geomean_ratio: Some(ratio(a, b)),
                    solved_delta: 0,
                    eligible: true,
                    why_not: None,
                }
            })
            .collect();
        out.sort_by(super::super::promote::rank);
        out
    }

    /// Runs the search to its end, measuring what it asks for; returns the report and how
    /// many replays it took.
    fn run(s: &Search, ratio: impl Fn(i64, i64) -> f64 + Copy) -> (SearchReport, usize) {
        let (knobs, variants) = grid();
        let mut planned: Vec<String> = Vec::new();
        for replays in 1..100 {
            let r = walk(s, &knobs, &variants, &standings(&planned, ratio), &planned);
            if r.finished {
                return (r, replays);
            }
            assert!(!r.next.is_empty(), "an unfinished search names cells");
            assert!(
                r.next.iter().all(|c| !planned.contains(c)),
                "a cell is never measured twice"
            );
            planned = r.planned.clone();
        }
        panic!("the search did not end");
    }

    #[test]
    fn a_separable_bowl_is_found_in_two_rounds() {
        // Best at A=2, B=1; the knobs do not interact.
        let ratio = |a: i64, b: i64| 1.0 + ((a - 2) * (a - 2) + (b - 1) * (b - 1)) as f64 / 10.0;
        let (r, _) = run(&search(3), ratio);
        assert_eq!(r.chosen.as_deref(), Some("A=2,B=1"));
        // Round 1 moves A then B; round 2 changes nothing and ends it.
        assert_eq!(r.path.len(), 4);
        assert_eq!(r.path.iter().map(|s| s.round).max(), Some(2));
        // Round 1: 3 + 2 new cells; round 2: A's line through B=1 is new but its A=2 cell.
        assert_eq!(r.planned.len(), 7);
        assert_eq!(r.path[0].measured, 3);
        assert_eq!(r.path[1].measured, 2);
        assert_eq!(r.runner_up.as_deref(), Some("A=1,B=1"));
    }

    #[test]
    fn a_flat_landscape_keeps_the_start() {
        let (r, _) = run(&search(3), |_, _| 1.0);
        assert_eq!(r.chosen.as_deref(), Some("A=0,B=0"));
        assert_eq!(r.path.len(), 2, "one round that changes nothing");
    }

    #[test]
    fn max_rounds_stops_a_search_that_keeps_moving() {
        // A diagonal valley: each knob's best depends on the other's setting.
        let ratio = |a: i64, b: i64| 1.0 - 0.1 * (a.min(b + 1) + b.min(a)) as f64;
        let (r, _) = run(&search(1), ratio);
        assert!(r.finished);
        assert_eq!(r.path.len(), 2);
        assert!(r.path.iter().all(|s| s.round == 1));
    }

    #[test]
    fn an_ineligible_cell_is_not_chosen() {
        let (knobs, variants) = grid();
        let planned: Vec<String> = ["A=0,B=0", "A=1,B=0", "A=2,B=0"].map(String::from).to_vec();
        let mut st = standings(&planned, |a, _| 1.0 - 0.1 * a as f64);
        for s in &mut st {
            if s.build == "A=2,B=0" {
                s.eligible = false;
                s.solved_delta = -3;
            }
        }
        st.sort_by(super::super::promote::rank);
        let r = walk(&search(3), &knobs, &variants, &st, &planned);
        assert_eq!(r.path[0].chosen, "A=1,B=0");
        // Next: B's line through A=1.
        assert_eq!(r.next, vec!["A=1,B=1".to_string(), "A=1,B=2".to_string()]);
    }
}
