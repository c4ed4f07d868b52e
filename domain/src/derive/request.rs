//! The request to derive a suite, and its two spellings: the HTTP query and the CLI flags.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::rule::{DeriveRule, Filter, Pick};
use crate::bounds::{check_text, Lines, MAX_QUERY_VALUE};
use crate::limit::Limit;
use crate::FieldError;

/// What to derive: the build and suite of the sweep, the rule, and whether an unfinished
/// sweep may be used. The HTTP query and the CLI flags are two spellings of this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeriveRequest {
    /// Build whose results select the positions.
    pub build: String,
    /// Suite of the sweep the positions come from.
    pub suite: String,
    /// Selection rule.
    pub rule: DeriveRule,
    /// Accept a sweep that has not finished (only positions with a result are considered).
    pub partial: bool,
    /// The search limit whose results select (default: the sweep's first).
    #[serde(default)]
    pub limit: Option<Limit>,
}

/// Response header of `GET /api/v1/sweeps/{id}/derive` carrying [`super::Derived::summary`]
/// (also the file's last header comment), so clients can report the counts without parsing
/// the EPD.
pub const SUMMARY_HEADER: &str = "x-sweep-derive-summary";

/// The query parameters of `GET /api/v1/sweeps/{id}/derive`.
pub const QUERY_PARAMETERS: [&str; 10] = [
    "build",
    "suite",
    "filter",
    "first",
    "random",
    "seed",
    "min_nodes",
    "max_nodes",
    "partial",
    "limit",
];

impl DeriveRequest {
    /// Parses query parameters (see [`QUERY_PARAMETERS`]); every error names the parameter.
    pub fn from_query(
        pairs: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, FieldError> {
        let q = Query::collect(pairs)?;
        let build = q.text("build", "the build whose results select the positions")?;
        let suite = q.text("suite", "the suite of the sweep to derive from")?;
        let filter = q
            .text("filter", "solved, unsolved or any")?
            .parse::<Filter>()
            .map_err(|e| FieldError::new("filter", e))?;
        let pick = q.pick()?;
        let partial = q.partial()?;
        let request = DeriveRequest {
            build,
            suite,
            rule: DeriveRule {
                filter,
                min_nodes: q.number("min_nodes")?,
                max_nodes: q.number("max_nodes")?,
                pick,
            },
            partial,
            limit: q
                .0
                .get("limit")
                .map(|v| v.parse::<Limit>())
                .transpose()
                .map_err(|e| FieldError::new("limit", e))?,
        };
        request.rule.validate()?;
        Ok(request)
    }

    /// The query parameters [`DeriveRequest::from_query`] reads back as this request.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("build", self.build.clone()),
            ("suite", self.suite.clone()),
            ("filter", self.rule.filter.as_str().to_string()),
        ];
        match self.rule.pick {
            Pick::All => {}
            Pick::First(n) => pairs.push(("first", n.to_string())),
            Pick::Random { count, seed } => {
                pairs.push(("random", count.to_string()));
                pairs.push(("seed", seed.to_string()));
            }
        }
        if let Some(a) = self.rule.min_nodes {
            pairs.push(("min_nodes", a.to_string()));
        }
        if let Some(b) = self.rule.max_nodes {
            pairs.push(("max_nodes", b.to_string()));
        }
        if self.partial {
            pairs.push(("partial", "true".into()));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit_word(limit)));
        }
        pairs
    }

    /// The `sweep suite derive` command line that makes this request of sweep `sweep_id`
    /// (without `--database`/`--coordinator` and `--out`, which say where, not what).
    pub fn command_line(&self, sweep_id: i64) -> String {
        let mut words = vec![
            "sweep suite derive".to_string(),
            sweep_id.to_string(),
            "--build".into(),
            shell_word(&self.build),
            "--suite".into(),
            shell_word(&self.suite),
            format!("--{}", self.rule.filter.as_str()),
        ];
        if let Some(a) = self.rule.min_nodes {
            words.push(format!("--min-nodes {a}"));
        }
        if let Some(b) = self.rule.max_nodes {
            words.push(format!("--max-nodes {b}"));
        }
        match self.rule.pick {
            Pick::All => {}
            Pick::First(n) => words.push(format!("--first {n}")),
            Pick::Random { count, seed } => words.push(format!("--random {count} --seed {seed}")),
        }
        if self.partial {
            words.push("--partial".into());
        }
        if let Some(limit) = self.limit {
            words.push(format!("--limit {}", limit_word(limit)));
        }
        words.join(" ")
    }
}

/// A limit as `depth=N` / `nodes=N`, the spelling [`Limit`]'s parser reads back.
fn limit_word(limit: Limit) -> String {
    match limit {
        Limit::Depth(d) => format!("depth={d}"),
        Limit::Nodes(n) => format!("nodes={n}"),
    }
}

/// A word the shell reads back unchanged.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-=.,/:+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
/// Query parameters, each known, clean and given once.
struct Query(HashMap<String, String>);

impl Query {
    /// The pairs as a map; refuses unknown, overlong or repeated parameters.
    fn collect(pairs: impl IntoIterator<Item = (String, String)>) -> Result<Self, FieldError> {
        let mut q: HashMap<String, String> = HashMap::new();
        for (key, value) in pairs {
            if !QUERY_PARAMETERS.contains(&key.as_str()) {
                // The unknown key is echoed as the field: only a short, clean one.
                let key = if check_text("query", &key, MAX_QUERY_VALUE, Lines::One).is_ok() {
                    key
                } else {
                    "query".to_string()
                };
                return Err(FieldError::new(
                    key,
                    format!(
                        "unknown parameter (expected {})",
                        QUERY_PARAMETERS.join(", ")
                    ),
                ));
            }
            check_text(&key, &value, MAX_QUERY_VALUE, Lines::One)?;
            if q.insert(key.clone(), value).is_some() {
                return Err(FieldError::new(key, "given more than once"));
            }
        }
        Ok(Query(q))
    }

    /// The required parameter `key` (trimmed, not empty); `what` says what it is.
    fn text(&self, key: &str, what: &str) -> Result<String, FieldError> {
        self.0
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| FieldError::new(key, format!("required: {what}")))
    }

    /// The optional non-negative integer `key`.
    fn number(&self, key: &str) -> Result<Option<u64>, FieldError> {
        self.0
            .get(key)
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    FieldError::new(key, format!("`{v}` is not a non-negative integer"))
                })
            })
            .transpose()
    }

    /// The optional count `key` (fits 32 bits).
    fn count(&self, key: &str) -> Result<Option<u32>, FieldError> {
        self.number(key)?
            .map(|n| {
                u32::try_from(n).map_err(|_| FieldError::new(key, format!("{n} is too large")))
            })
            .transpose()
    }

    /// The pick, from `first`, or `random` with its `seed`, or neither (all).
    fn pick(&self) -> Result<Pick, FieldError> {
        match (
            self.count("first")?,
            self.count("random")?,
            self.number("seed")?,
        ) {
            (Some(_), Some(_), _) => {
                Err(FieldError::new("random", "give first or random, not both"))
            }
            (Some(n), None, None) => Ok(Pick::First(n)),
            (None, Some(count), Some(seed)) => Ok(Pick::Random { count, seed }),
            (None, Some(_), None) => Err(FieldError::new(
                "seed",
                "required with random, so that the pick can be made again",
            )),
            (_, None, Some(_)) => Err(FieldError::new("seed", "only applies together with random")),
            (None, None, None) => Ok(Pick::All),
        }
    }

    /// `partial`: absent is false; empty (a bare `?partial`) is true.
    fn partial(&self) -> Result<bool, FieldError> {
        match self.0.get("partial").map(|v| v.trim()) {
            None | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") | Some("") => Ok(true),
            Some(other) => Err(FieldError::new(
                "partial",
                format!("`{other}` is not true or false"),
            )),
        }
    }
}
