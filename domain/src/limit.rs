//! Search limits: how far an engine searches each position (`go depth N` or `go nodes N`).
//!
//! A result is only comparable with another of the same limit, so the limit is part of a
//! result's key. The store keys results by `(depth, nodes)` columns: a depth limit is
//! `(N, 0)`, a node limit `(0, N)`, so one pair of integers names every limit.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Deepest search a sweep may ask for; deeper is surely a mistake at sweep scale.
pub const MAX_DEPTH: i64 = 40;
/// Largest node limit a sweep may ask for (10^10: hours per position on any engine).
pub const MAX_NODES: i64 = 10_000_000_000;

/// One search limit.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Limit {
    /// `go depth N`: deterministic for a deterministic engine.
    Depth(u32),
    /// `go nodes N`: engines check the node count only now and then, so the nodes searched
    /// overshoot N by an engine-specific amount (still repeatable for a deterministic engine).
    Nodes(u64),
}

impl Limit {
    /// The words after `go` in UCI (`depth 8`, `nodes 100000`).
    pub fn uci_go(self) -> String {
        match self {
            Limit::Depth(d) => format!("depth {d}"),
            Limit::Nodes(n) => format!("nodes {n}"),
        }
    }

    /// The stored key: `(depth, 0)` or `(0, nodes)`.
    pub fn key(self) -> (i32, i64) {
        match self {
            Limit::Depth(d) => (i32::try_from(d).unwrap_or(i32::MAX), 0),
            Limit::Nodes(n) => (0, i64::try_from(n).unwrap_or(i64::MAX)),
        }
    }

    /// The limit a stored key names, if it names one.
    pub fn from_key(depth: i32, nodes: i64) -> Option<Limit> {
        match (depth, nodes) {
            (d, 0) if d > 0 => Some(Limit::Depth(d as u32)),
            (0, n) if n > 0 => Some(Limit::Nodes(n as u64)),
            _ => None,
        }
    }

    /// The depth of a depth limit.
    pub fn depth(self) -> Option<u32> {
        match self {
            Limit::Depth(d) => Some(d),
            Limit::Nodes(_) => None,
        }
    }
}

impl std::fmt::Display for Limit {
    /// `depth 8` or `nodes 100000`, as in the tables' headings.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Depth(d) => write!(f, "depth {d}"),
            Limit::Nodes(n) => write!(f, "nodes {n}"),
        }
    }
}

impl std::str::FromStr for Limit {
    type Err = String;

    /// Parses `depth=8`, `depth 8`, `nodes=100000` or a bare depth `8`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (kind, value) = s
            .split_once(['=', ' '])
            .map_or(("depth", s), |(k, v)| (k.trim(), v.trim()));
        let bad = || format!("`{s}` is not a limit (use depth=N or nodes=N)");
        let n: u64 = value.parse().map_err(|_| bad())?;
        match kind {
            "depth" if (1..=MAX_DEPTH as u64).contains(&n) => Ok(Limit::Depth(n as u32)),
            "nodes" if (1..=MAX_NODES as u64).contains(&n) => Ok(Limit::Nodes(n)),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for l in [Limit::Depth(8), Limit::Nodes(100_000)] {
            let (d, n) = l.key();
            assert_eq!(Limit::from_key(d, n), Some(l));
        }
        assert_eq!(Limit::from_key(0, 0), None);
        assert_eq!(Limit::from_key(3, 5), None);
    }

    #[test]
    fn words_and_json() {
        assert_eq!(Limit::Depth(8).uci_go(), "depth 8");
        assert_eq!(Limit::Nodes(5000).uci_go(), "nodes 5000");
        assert_eq!(
            serde_json::to_string(&Limit::Depth(8)).unwrap(),
            r#"{"depth":8}"#
        );
        assert_eq!("depth=8".parse::<Limit>(), Ok(Limit::Depth(8)));
        assert_eq!("nodes=100".parse::<Limit>(), Ok(Limit::Nodes(100)));
        assert_eq!("7".parse::<Limit>(), Ok(Limit::Depth(7)));
        assert!("depth=0".parse::<Limit>().is_err());
        assert!("speed=3".parse::<Limit>().is_err());
    }
}
