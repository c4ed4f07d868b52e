//! What an engine says about a search in its own words: `[report]` patterns for the lines
//! that carry its true node total (a summary after the move, an `info string` of its own)
//! and counters in a form of its own, and the `bench` whose node total identifies a build.
//!
//! Patterns are regular expressions of the `regex` crate, which matches in time linear in
//! the line whatever the pattern (no backtracking), so an engine's output cannot make a worker
//! spin; each pattern is bounded in length and in compiled size, and checked when the engine
//! is registered, so a worker never meets one that does not compile.

use std::collections::BTreeMap;
use std::time::Duration;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::bounds::{counter_name_ok, MAX_COUNTERS, MAX_COUNTER_NAME};
use crate::FieldError;

/// Longest pattern text, in bytes.
pub const MAX_PATTERN: usize = 1024;
/// Largest compiled pattern, in bytes (the `regex` crate's own size limit).
const MAX_COMPILED: usize = 1 << 20;
/// Default of [`ReportDef::wait_ms`].
pub const DEFAULT_REPORT_WAIT_MS: u64 = 500;
/// Most a search waits after its move for the engine's summary.
pub const MAX_REPORT_WAIT_MS: u64 = 10_000;
/// The group a `nodes` pattern must have.
pub const NODES_GROUP: &str = "nodes";
/// The group a counter pattern must have.
pub const VALUE_GROUP: &str = "value";
/// Longest bench command or argument, in bytes.
pub const MAX_BENCH_ARG: usize = 256;
/// Most bench arguments.
pub const MAX_BENCH_ARGS: usize = 16;
/// Default of [`BenchDef::timeout_secs`].
pub const DEFAULT_BENCH_TIMEOUT_SECS: u64 = 120;
/// Most a bench may take.
pub const MAX_BENCH_TIMEOUT_SECS: u64 = 3600;

/// `[report]` of an engine definition: patterns read from every line the engine prints for a
/// search, including lines after its move (`bestmove` / `move`), for an engine that tells its
/// real totals in words of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportDef {
    /// A regex with a named group `nodes` (e.g. `saw (?P<nodes>\d+) nodes`): the last line it
    /// matches gives the search's node count, in place of the count of thinking lines or
    /// `info ... nodes`. A search where it matches no line is an error, never 0 nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Counters in a form of the engine's own: counter name to a regex with a named group
    /// `value`; the last match of each wins over an `info string counters` pair of that name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, String>,
    /// Milliseconds to keep reading after the move for a line the patterns want (default
    /// 500, at most 10,000). The wait ends early once the engine has answered a `ping`
    /// (xboard, with `feature ping=1`) or `isready` (UCI) sent after the move and `nodes`
    /// has matched: whatever it printed right after its move came before that answer.
    #[serde(
        default = "default_report_wait_ms",
        skip_serializing_if = "is_default_wait"
    )]
    #[schema(minimum = 0, maximum = 10000)]
    pub wait_ms: u64,
}

fn default_report_wait_ms() -> u64 {
    DEFAULT_REPORT_WAIT_MS
}

fn is_default_wait(ms: &u64) -> bool {
    *ms == DEFAULT_REPORT_WAIT_MS
}

/// `bench` of an engine definition: how to make the engine search its own fixed benchmark and
/// where it prints the node total. Workers run it once per binary and report the total with
/// the build's record: equal totals of two variants mean no functional change is likely, and
/// two workers with different totals for one binary mean one of them cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BenchDef {
    /// A command sent to the engine on its standard input after it starts (e.g. `bench`, or
    /// `bench 16 1 10`), followed by `quit`. Exactly one of `command` and `argv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments the engine is started with to bench from the command line (e.g.
    /// `["bench"]`); it must exit when done. Exactly one of `command` and `argv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// A regex with a named group `nodes`, read from every line of the bench's standard
    /// output and standard error; the last match is the bench's node total (e.g.
    /// `Nodes searched\s*:\s*(?P<nodes>\d+)`).
    pub nodes: String,
    /// Seconds the bench may take (default 120).
    #[serde(default = "default_bench_timeout")]
    #[schema(minimum = 1, maximum = 3600)]
    pub timeout_secs: u64,
}

fn default_bench_timeout() -> u64 {
    DEFAULT_BENCH_TIMEOUT_SECS
}

/// Compiles `pattern` (the field `field`), requiring the named group `group`.
fn compile(field: &str, pattern: &str, group: &str) -> Result<Regex, FieldError> {
    if pattern.len() > MAX_PATTERN {
        return Err(FieldError::new(
            field,
            format!("{} bytes; at most {MAX_PATTERN}", pattern.len()),
        ));
    }
    let regex = RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED)
        .dfa_size_limit(MAX_COMPILED)
        .build()
        .map_err(|e| FieldError::new(field, format!("is not a valid regex: {e}")))?;
    if !regex.capture_names().flatten().any(|n| n == group) {
        return Err(FieldError::new(
            field,
            format!("has no named group `{group}` (write `(?P<{group}>\\d+)` where the number is)"),
        ));
    }
    Ok(regex)
}

/// A number as engines print them: digits, perhaps with `,`, `_` or `'` between groups.
fn count_of(text: &str) -> Option<u64> {
    let digits: String = text
        .trim()
        .chars()
        .filter(|c| !matches!(c, ',' | '_' | '\''))
        .collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A match of a pattern's group, as a count, or what is wrong with it.
fn group_count(regex: &Regex, group: &str, line: &str) -> Option<Result<u64, String>> {
    let caps = regex.captures_iter(line).last()?;
    let text = caps.name(group)?.as_str();
    Some(count_of(text).ok_or_else(|| {
        let shown: String = text.chars().take(40).collect();
        format!("the report pattern's `{group}` group matched `{shown}`, which is not a count")
    }))
}

/// The `[report]` patterns, compiled: what a worker reads an engine's lines with.
#[derive(Debug, Clone)]
pub struct ReportPatterns {
    def: ReportDef,
    nodes: Option<Regex>,
    counters: Vec<(String, Regex)>,
}

impl PartialEq for ReportPatterns {
    fn eq(&self, other: &Self) -> bool {
        self.def == other.def
    }
}

impl Eq for ReportPatterns {}

impl ReportPatterns {
    /// Compiles and checks `def`, naming the field at fault (`report.nodes`,
    /// `report.counters.NAME`, `report.wait_ms`).
    pub fn compile(def: &ReportDef) -> Result<Self, FieldError> {
        let nodes = def
            .nodes
            .as_deref()
            .map(|p| compile("report.nodes", p, NODES_GROUP))
            .transpose()?;
        if def.counters.len() > MAX_COUNTERS {
            return Err(FieldError::new(
                "report.counters",
                format!("{} patterns; at most {MAX_COUNTERS}", def.counters.len()),
            ));
        }
        let mut counters = Vec::with_capacity(def.counters.len());
        for (name, pattern) in &def.counters {
            let field = format!("report.counters.{name}");
            if !counter_name_ok(name) {
                return Err(FieldError::new(
                    field,
                    format!("a counter name is 1 to {MAX_COUNTER_NAME} letters, digits, `_`, `.` or `-`"),
                ));
            }
            counters.push((name.clone(), compile(&field, pattern, VALUE_GROUP)?));
        }
        if nodes.is_none() && counters.is_empty() {
            return Err(FieldError::new(
                "report",
                "names no pattern: give `nodes` or `counters`, or leave [report] out",
            ));
        }
        if def.wait_ms > MAX_REPORT_WAIT_MS {
            return Err(FieldError::new(
                "report.wait_ms",
                format!("{} ms; at most {MAX_REPORT_WAIT_MS}", def.wait_ms),
            ));
        }
        Ok(ReportPatterns {
            def: def.clone(),
            nodes,
            counters,
        })
    }

    /// The definition these were compiled from.
    pub fn def(&self) -> &ReportDef {
        &self.def
    }

    /// Does a `nodes` pattern decide the node count?
    pub fn has_nodes(&self) -> bool {
        self.nodes.is_some()
    }

    /// How long to keep reading after the move.
    pub fn wait(&self) -> Duration {
        Duration::from_millis(self.def.wait_ms)
    }

    /// The node count `line` gives, if the `nodes` pattern matches it (the last match in the
    /// line); `Err` when the group matched something that is not a count.
    pub fn nodes_in(&self, line: &str) -> Option<Result<u64, String>> {
        group_count(self.nodes.as_ref()?, NODES_GROUP, line)
    }

    /// Folds the counters `line` gives into `counters` (a later match replaces an earlier
    /// one); a match that is not a count, or is too large to store, is skipped.
    pub fn counters_in(&self, line: &str, counters: &mut BTreeMap<String, u64>) -> bool {
        let mut any = false;
        for (name, regex) in &self.counters {
            if let Some(Ok(v)) = group_count(regex, VALUE_GROUP, line) {
                if i64::try_from(v).is_ok() {
                    counters.insert(name.clone(), v);
                    any = true;
                }
            }
        }
        any
    }
}

/// A `bench` definition, checked, with its pattern compiled.
#[derive(Debug, Clone)]
pub struct BenchPattern {
    def: BenchDef,
    nodes: Regex,
}

impl BenchPattern {
    /// Checks `def`, naming the field at fault (`bench.command`, `bench.argv[1]`, ...).
    pub fn compile(def: &BenchDef) -> Result<Self, FieldError> {
        let arg_ok = |field: String, a: &str| {
            if a.is_empty() || a.len() > MAX_BENCH_ARG || a.chars().any(char::is_control) {
                Err(FieldError::new(
                    field,
                    format!("must be 1 to {MAX_BENCH_ARG} bytes on one line, without control characters"),
                ))
            } else {
                Ok(())
            }
        };
        match (&def.command, &def.argv) {
            (Some(c), None) => arg_ok("bench.command".into(), c)?,
            (None, Some(argv)) => {
                if argv.is_empty() || argv.len() > MAX_BENCH_ARGS {
                    return Err(FieldError::new(
                        "bench.argv",
                        format!("must hold 1 to {MAX_BENCH_ARGS} arguments"),
                    ));
                }
                for (i, a) in argv.iter().enumerate() {
                    arg_ok(format!("bench.argv[{i}]"), a)?;
                }
            }
            _ => {
                return Err(FieldError::new(
                    "bench",
                    "give exactly one of `command` (sent to the running engine) and `argv` (arguments it starts with)",
                ))
            }
        }
        if def.timeout_secs == 0 || def.timeout_secs > MAX_BENCH_TIMEOUT_SECS {
            return Err(FieldError::new(
                "bench.timeout_secs",
                format!("must be 1 to {MAX_BENCH_TIMEOUT_SECS}"),
            ));
        }
        Ok(BenchPattern {
            def: def.clone(),
            nodes: compile("bench.nodes", &def.nodes, NODES_GROUP)?,
        })
    }

    /// The definition this was compiled from.
    pub fn def(&self) -> &BenchDef {
        &self.def
    }

    /// The node total `line` gives, if the pattern matches it.
    pub fn nodes_in(&self, line: &str) -> Option<Result<u64, String>> {
        group_count(&self.nodes, NODES_GROUP, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(nodes: Option<&str>, counters: &[(&str, &str)]) -> ReportDef {
        ReportDef {
            nodes: nodes.map(str::to_string),
            counters: counters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            wait_ms: DEFAULT_REPORT_WAIT_MS,
        }
    }

    #[test]
    fn nodes_are_read_from_the_last_match() {
        let p =
            ReportPatterns::compile(&report(Some(r"saw (?P<nodes>[\d,]+) nodes"), &[])).unwrap();
        assert_eq!(
            p.nodes_in("Searched for 0.1 seconds, saw 63339 nodes, 633390 nps"),
            Some(Ok(63339))
        );
        assert_eq!(
            p.nodes_in("saw 1 nodes, then saw 1,234 nodes"),
            Some(Ok(1234))
        );
        assert_eq!(p.nodes_in(" 9 -35 120 99000 e2e4"), None);
        let loose = ReportPatterns::compile(&report(Some(r"total (?P<nodes>\S+)"), &[])).unwrap();
        let err = loose.nodes_in("total many").unwrap().unwrap_err();
        assert!(err.contains("`many`"), "{err}");
        assert!(loose
            .nodes_in("total 99999999999999999999999")
            .unwrap()
            .is_err());
    }

    #[test]
    fn counters_patterns_fold_by_name() {
        let p = ReportPatterns::compile(&report(
            None,
            &[
                ("null_tried", r"null tries: (?P<value>\d+)"),
                ("cuts", r"cuts=(?P<value>\d+)"),
            ],
        ))
        .unwrap();
        let mut c = BTreeMap::new();
        assert!(p.counters_in("null tries: 12 cuts=3", &mut c));
        assert!(!p.counters_in("nothing", &mut c));
        assert!(p.counters_in("cuts=4", &mut c));
        assert_eq!(
            c,
            BTreeMap::from([("cuts".into(), 4), ("null_tried".into(), 12)])
        );
        assert!(!p.has_nodes());
    }

    #[test]
    fn bad_patterns_name_the_field() {
        let e = |d: ReportDef| ReportPatterns::compile(&d).unwrap_err();
        assert_eq!(e(report(Some("(unclosed"), &[])).field, "report.nodes");
        let no_group = e(report(Some(r"saw (\d+) nodes"), &[]));
        assert_eq!(no_group.field, "report.nodes");
        assert!(no_group.problem.contains("`nodes`"), "{no_group}");
        let long = "a".repeat(MAX_PATTERN + 1);
        assert!(e(report(Some(&long), &[])).problem.contains("at most"));
        // A pattern whose compiled form is huge is refused, not built.
        let huge = e(report(Some(r"(?P<nodes>\w{1000}){1000}"), &[]));
        assert_eq!(huge.field, "report.nodes", "{huge}");
        let c = e(report(None, &[("x", r"(?P<nodes>\d+)")]));
        assert_eq!(c.field, "report.counters.x");
        assert!(c.problem.contains("`value`"), "{c}");
        assert_eq!(
            e(report(None, &[("bad name", r"(?P<value>\d)")])).field,
            "report.counters.bad name"
        );
        assert_eq!(e(report(None, &[])).field, "report");
        let mut slow = report(Some(r"(?P<nodes>\d+)"), &[]);
        slow.wait_ms = MAX_REPORT_WAIT_MS + 1;
        assert_eq!(e(slow).field, "report.wait_ms");
    }

    #[test]
    fn bench_definitions_are_checked() {
        let def = |command: Option<&str>, argv: Option<Vec<&str>>| BenchDef {
            command: command.map(str::to_string),
            argv: argv.map(|a| a.into_iter().map(str::to_string).collect()),
            nodes: r"Nodes searched\s*:\s*(?P<nodes>\d+)".into(),
            timeout_secs: DEFAULT_BENCH_TIMEOUT_SECS,
        };
        let b = BenchPattern::compile(&def(Some("bench"), None)).unwrap();
        assert_eq!(b.nodes_in("Nodes searched  : 259759"), Some(Ok(259759)));
        assert!(BenchPattern::compile(&def(None, Some(vec!["bench"]))).is_ok());
        let e = |d: BenchDef| BenchPattern::compile(&d).unwrap_err().field;
        assert_eq!(e(def(None, None)), "bench");
        assert_eq!(e(def(Some("bench"), Some(vec!["bench"]))), "bench");
        assert_eq!(e(def(Some("bench\nquit"), None)), "bench.command");
        assert_eq!(e(def(None, Some(vec![]))), "bench.argv");
        assert_eq!(e(def(None, Some(vec!["bench", ""]))), "bench.argv[1]");
        let mut slow = def(Some("bench"), None);
        slow.timeout_secs = 0;
        assert_eq!(e(slow), "bench.timeout_secs");
        let mut no_group = def(Some("bench"), None);
        no_group.nodes = r"Nodes: \d+".into();
        assert_eq!(e(no_group), "bench.nodes");
    }
}
