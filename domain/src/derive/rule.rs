//! The selection rule of a derived suite: which positions qualify and how many are kept.

use serde::{Deserialize, Serialize};

use crate::table::render::thousands;
use crate::FieldError;

/// Which positions qualify, by the build's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// The build's best move solved the position.
    Solved,
    /// The build's best move did not solve it.
    Unsolved,
    /// Every position with a result.
    Any,
}

impl Filter {
    /// The name used in queries and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Filter::Solved => "solved",
            Filter::Unsolved => "unsolved",
            Filter::Any => "any",
        }
    }

    pub(crate) fn accepts(self, solved: bool) -> bool {
        match self {
            Filter::Solved => solved,
            Filter::Unsolved => !solved,
            Filter::Any => true,
        }
    }
}

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "solved" => Ok(Filter::Solved),
            "unsolved" => Ok(Filter::Unsolved),
            "any" => Ok(Filter::Any),
            other => Err(format!(
                "`{other}` is not a filter: use solved, unsolved or any"
            )),
        }
    }
}

/// How many of the qualifying positions are kept. The output is in suite order either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pick {
    /// All of them.
    All,
    /// The first N in suite order.
    First(u32),
    /// N chosen at random, reproducibly from `seed`.
    Random {
        /// How many.
        count: u32,
        /// Seed of the splitmix64 generator.
        seed: u64,
    },
}

/// The selection rule: filter, then node range, then pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeriveRule {
    /// Verdict filter.
    pub filter: Filter,
    /// Keep positions the build searched with at least this many nodes.
    pub min_nodes: Option<u64>,
    /// Keep positions the build searched with at most this many nodes.
    pub max_nodes: Option<u64>,
    /// How many to keep.
    pub pick: Pick,
}

impl DeriveRule {
    /// Rejects a rule that can select nothing by construction: N = 0, or min > max.
    pub fn validate(&self) -> Result<(), FieldError> {
        match self.pick {
            Pick::First(0) => return Err(FieldError::new("first", "must be at least 1")),
            Pick::Random { count: 0, .. } => {
                return Err(FieldError::new("random", "must be at least 1"))
            }
            _ => {}
        }
        if let (Some(min), Some(max)) = (self.min_nodes, self.max_nodes) {
            if min > max {
                return Err(FieldError::new(
                    "min_nodes",
                    format!("{min} is greater than max_nodes ({max}): no position can match"),
                ));
            }
        }
        Ok(())
    }

    /// The rule in words, for the file header.
    pub fn describe(&self) -> String {
        let mut words = match self.filter {
            Filter::Solved => "positions the build solved".to_string(),
            Filter::Unsolved => "positions the build did not solve".to_string(),
            Filter::Any => "positions the build has a result for".to_string(),
        };
        match (self.min_nodes, self.max_nodes) {
            (Some(a), Some(b)) => {
                words.push_str(&format!(" with {} to {} nodes", thousands(a), thousands(b)))
            }
            (Some(a), None) => words.push_str(&format!(" with at least {} nodes", thousands(a))),
            (None, Some(b)) => words.push_str(&format!(" with at most {} nodes", thousands(b))),
            (None, None) => {}
        }
        match self.pick {
            Pick::All => words.push_str("; all of them, in suite order"),
            Pick::First(n) => words.push_str(&format!("; the first {n} in suite order")),
            Pick::Random { count, seed } => words.push_str(&format!(
                "; {count} picked at random (splitmix64, seed {seed}), in suite order"
            )),
        }
        words
    }
}
