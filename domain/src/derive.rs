//! Deriving a sub-suite from a finished sweep: the positions of one suite that one build
//! solved (or did not), within a node range, the first N or a seeded random N of them, written
//! as an EPD file whose header comments say where it came from and how to make it again.
//!
//! Everything here is pure and deterministic: the same results and rule give the same bytes
//! on every platform (the random pick uses its own splitmix64, and no date is written).

mod request;
mod rule;

use crate::limit::Limit;
use std::collections::{BTreeMap, HashMap};

use crate::epd::{parse_suite, Suite};
use crate::stats::SplitMix64;
use crate::table::ResultRow;
use crate::wire::SweepState;
use crate::FieldError;

pub use request::{DeriveRequest, QUERY_PARAMETERS, SUMMARY_HEADER};
pub use rule::{DeriveRule, Filter, Pick};

/// Where the results came from, for the file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// Sweep id.
    pub sweep_id: i64,
    /// Sweep name.
    pub sweep_name: String,
    /// The sweep's state when the suite was derived.
    pub sweep_state: SweepState,
    /// Engine name.
    pub engine: String,
    /// The build's defines (empty: the source's defaults).
    pub defines: BTreeMap<String, i64>,
    /// The search limit of the results that selected.
    pub limit: Limit,
}

/// A derived suite and the counts behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    /// The EPD file: header comments, then one record per selected position.
    pub text: String,
    /// Ids of the selected positions, in suite order.
    pub selected: Vec<String>,
    /// Positions in the source suite.
    pub total: usize,
    /// Positions that passed the filter and the node range (before the pick).
    pub matched: usize,
    /// Positions skipped because their result is an error.
    pub skipped_errors: usize,
    /// Positions skipped because they have no result (only in a partial derivation).
    pub skipped_missing: usize,
}

impl Derived {
    /// One line of counts, for the header and for the user.
    pub fn summary(&self) -> String {
        format!(
            "selected {} of {} positions ({} matched the rule; skipped: {} with an error, {} without a result)",
            self.selected.len(),
            self.total,
            self.matched,
            self.skipped_errors,
            self.skipped_missing
        )
    }
}

/// Why a suite could not be derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeriveError {
    /// The request cannot be met (bad rule, too few positions match); names the field.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// A stored position cannot be written back as EPD that reads as the same position.
    #[error("cannot write position `{id}` as EPD: {problem}")]
    Unwritable {
        /// Position id.
        id: String,
        /// What went wrong.
        problem: String,
    },
}

/// Selects positions of `suite` by `request.rule` from the results of `request.build` (other
/// rows of `results` are ignored) and writes them as EPD with a header naming the sweep, the
/// build, the limit, the suite and the rule. Positions with an error or without a result are
/// never selected. The text is checked to parse back to exactly the selected positions.
pub fn derive_suite(
    suite: &Suite,
    results: &[ResultRow],
    request: &DeriveRequest,
    provenance: &Provenance,
) -> Result<Derived, DeriveError> {
    request.rule.validate()?;
    let rule = &request.rule;
    let Matching {
        indices: matching,
        skipped_errors,
        skipped_missing,
    } = matching(suite, results, request);
    let matched = matching.len();
    let chosen = pick(matching, rule.pick).map_err(|wanted| {
        let field = match rule.pick {
            Pick::Random { .. } => "random",
            _ => "first",
        };
        FieldError::new(
            field,
            format!(
                "{wanted} positions asked for, but only {matched} match the rule ({})",
                rule.describe()
            ),
        )
    })?;
    if chosen.is_empty() {
        return Err(FieldError::new(
            "filter",
            format!(
                "no position of `{}` matches the rule ({}); {} have an error, {} no result",
                suite.name,
                rule.describe(),
                skipped_errors,
                skipped_missing
            ),
        )
        .into());
    }
    let mut derived = Derived {
        text: String::new(),
        selected: chosen
            .iter()
            .map(|&i| suite.positions[i].id.clone())
            .collect(),
        total: suite.positions.len(),
        matched,
        skipped_errors,
        skipped_missing,
    };
    let text = suite_text(
        suite,
        &chosen,
        header(suite, request, provenance, &derived.summary()),
    )?;
    check_reads_back(suite, &chosen, &text)?;
    derived.text = text;
    Ok(derived)
}

/// The positions of a suite a rule accepts, and why the others were passed over.
struct Matching {
    /// Suite indices, in order.
    indices: Vec<usize>,
    /// Positions whose result is an error.
    skipped_errors: usize,
    /// Positions without a result.
    skipped_missing: usize,
}

/// The positions of `suite` whose result for the requested build passes the rule's filter
/// and node range.
fn matching(suite: &Suite, results: &[ResultRow], request: &DeriveRequest) -> Matching {
    let rule = &request.rule;
    let by_index: HashMap<u32, &ResultRow> = results
        .iter()
        .filter(|r| r.build == request.build && r.suite == suite.name)
        .map(|r| (r.index, r))
        .collect();
    let mut out = Matching {
        indices: Vec::new(),
        skipped_errors: 0,
        skipped_missing: 0,
    };
    for index in 0..suite.positions.len() {
        let Some(r) = u32::try_from(index).ok().and_then(|i| by_index.get(&i)) else {
            out.skipped_missing += 1;
            continue;
        };
        if r.error.is_some() {
            out.skipped_errors += 1;
            continue;
        }
        let in_range = !matches!(rule.min_nodes, Some(a) if r.nodes < a)
            && !matches!(rule.max_nodes, Some(b) if r.nodes > b);
        if rule.filter.accepts(r.solved) && in_range {
            out.indices.push(index);
        }
    }
    out
}

/// `header` followed by the EPD records of the `chosen` positions, one a line.
fn suite_text(suite: &Suite, chosen: &[usize], header: String) -> Result<String, DeriveError> {
    let mut text = header;
    for &i in chosen {
        let p = &suite.positions[i];
        let record = p.epd_record().map_err(|problem| DeriveError::Unwritable {
            id: p.id.clone(),
            problem,
        })?;
        text.push_str(&record);
        text.push('\n');
    }
    Ok(text)
}

/// The header: `#` comment lines, which [`parse_suite`] skips.
fn header(suite: &Suite, request: &DeriveRequest, p: &Provenance, summary: &str) -> String {
    let defines = if p.defines.is_empty() {
        "no defines (the source's defaults)".to_string()
    } else {
        let list: Vec<String> = p.defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("defines {}", list.join(" "))
    };
    let mut lines = vec![
        "Derived by `sweep suite derive` from a sweep's results.".to_string(),
        format!("sweep: {} \"{}\"", p.sweep_id, p.sweep_name),
        format!("engine: {}", p.engine),
        format!("build: {}, {defines}", request.build),
        format!("limit: {}", p.limit),
        format!("suite: {} (sha256 {})", suite.name, suite.sha256),
        format!("rule: {}", request.rule.describe()),
        format!("command: {}", request.command_line(p.sweep_id)),
    ];
    if request.partial {
        lines.push(format!(
            "partial: the sweep was {} when this was derived; only positions with a result were considered",
            p.sweep_state.as_str()
        ));
    }
    lines.push(summary.to_string());
    lines
        .iter()
        // A name with a line break would otherwise end the comment and corrupt the file.
        .map(|l| format!("# {}\n", l.replace(['\r', '\n'], " ")))
        .collect()
}

fn check_reads_back(suite: &Suite, chosen: &[usize], text: &str) -> Result<(), DeriveError> {
    let parsed = parse_suite(&suite.name, text).map_err(|e| DeriveError::Unwritable {
        id: format!("line {}", e.line),
        problem: e.problem,
    })?;
    if parsed.positions.len() != chosen.len() {
        return Err(DeriveError::Unwritable {
            id: suite.name.clone(),
            problem: format!(
                "{} records written, {} read back",
                chosen.len(),
                parsed.positions.len()
            ),
        });
    }
    for (&i, back) in chosen.iter().zip(&parsed.positions) {
        let p = &suite.positions[i];
        if (&p.id, &p.fen, &p.bm, &p.am) != (&back.id, &back.fen, &back.bm, &back.am) {
            return Err(DeriveError::Unwritable {
                id: p.id.clone(),
                problem: "the record reads back as a different position".into(),
            });
        }
    }
    Ok(())
}

/// Applies the pick to `candidates` (suite indices in order); `Err(n)` when fewer than the
/// `n` asked for are there.
fn pick(mut candidates: Vec<usize>, rule: Pick) -> Result<Vec<usize>, u32> {
    let (n, seed) = match rule {
        Pick::All => return Ok(candidates),
        Pick::First(n) => (n, None),
        Pick::Random { count, seed } => (count, Some(seed)),
    };
    let wanted = n as usize;
    if candidates.len() < wanted {
        return Err(n);
    }
    if let Some(seed) = seed {
        // Partial Fisher-Yates: the first `wanted` slots become a uniform random sample.
        let mut rng = SplitMix64(seed);
        for i in 0..wanted {
            let j = i + rng.below_unbiased((candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        candidates.truncate(wanted);
        candidates.sort_unstable();
    } else {
        candidates.truncate(wanted);
    }
    Ok(candidates)
}

#[cfg(test)]
mod tests;
