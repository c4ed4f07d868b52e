//! Result reuse: which stored results a new sweep may take instead of running them again.
//!
//! A result is interchangeable with another when the same binary searched the same position
//! to the same limit with the same options: its key is (build fingerprint, position key,
//! limit). [`BuildSpec::fingerprint`] names the build, [`position_key`] the position. The
//! store finds the earlier results of the new sweep's fingerprints and [`matches`] pairs them
//! with the positions the new sweep's jobs cover.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::build::BuildSpec;
use crate::epd::SuitePosition;
use crate::limit::Limit;

/// Bump when a change to how workers drive engines or read their output could change a
/// result: results measured under another version are then never reused. 2: a search whose
/// node count the engine never reported is an error, not 0 nodes; UCI output before the
/// search's `readyok` is not read as the search's; `[report]` patterns.
pub const MEASURE_VERSION: u32 = 2;

impl BuildSpec {
    /// What makes two builds' results interchangeable: sha256 (hex) of the source snapshot,
    /// the defines, the build command, the binary's name, the protocol, the engine options
    /// in the order they are set, `fresh_process_per_position`, the `[report]` patterns the
    /// counts are read with and [`MEASURE_VERSION`]. The row name, the timeouts and the
    /// bench are left out (they do not change a finished search).
    ///
    /// `None` for a binary-only engine: its binary is a path on each worker, not content the
    /// coordinator can name, so nothing proves two runs used the same program.
    pub fn fingerprint(&self) -> Option<String> {
        if self.binary_path.is_some() || self.source_sha256.is_empty() {
            return None;
        }
        // serde_json keeps object keys sorted and `defines` is a BTreeMap: the text is
        // canonical.
        let canonical = serde_json::json!({
            "measure_version": MEASURE_VERSION,
            "engine": self.engine,
            "source_sha256": self.source_sha256,
            "defines": self.defines,
            "build_command": self.build_command,
            "binary": self.binary,
            "protocol": self.protocol,
            "options": self.options,
            "fresh_process_per_position": self.fresh_process_per_position,
            "report": self.report,
        });
        Some(hex::encode(Sha256::digest(
            canonical.to_string().as_bytes(),
        )))
    }
}

/// A position as far as a result is concerned: the FEN exactly as the engine receives it
/// (suites are parsed into one form: four fields and `0 1`), and the best and avoid moves
/// the verdict is judged by, sorted. The `id` and other operations are left out, so the same
/// position in another suite, or in an edited version of the suite at another line, is the
/// same key. The en-passant square is not normalised further: engines hash what they are
/// sent, and a FEN with a different en-passant field may search differently.
pub fn position_key(position: &SuitePosition) -> String {
    let sorted = |moves: &[String]| {
        let mut m = moves.to_vec();
        m.sort();
        m.join(" ")
    };
    format!(
        "{}|bm {}|am {}",
        position.fen,
        sorted(&position.bm),
        sorted(&position.am)
    )
}

/// The positions one planned job covers, as reuse sees them.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The job's build fingerprint (`None`: nothing is reused for it).
    pub fingerprint: Option<&'a str>,
    /// Position keys of the job's suite, by index.
    pub keys: &'a [String],
    /// Index of the job's first position.
    pub first: u32,
    /// Number of positions.
    pub count: u32,
    /// Search limit.
    pub limit: Limit,
}

/// A stored result another sweep may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Fingerprint of the build that measured it.
    pub fingerprint: String,
    /// Its position's key.
    pub key: String,
    /// Its limit.
    pub limit: Limit,
    /// Larger is newer: of several results of one key, the newest is taken (a sweep run
    /// with `recompute` refreshes what later sweeps reuse).
    pub newer: i64,
}

/// One position of a planned job that a stored result covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    /// Index of the job in the slice given to [`matches`].
    pub job: usize,
    /// Index of the position in the job's suite.
    pub index: u32,
    /// Index of the result in the slice given to [`matches`].
    pub found: usize,
}

/// Every position of `wanted` that a result of `found` covers, in job and position order.
pub fn matches(wanted: &[Wanted<'_>], found: &[Found]) -> Vec<Match> {
    let mut best: HashMap<(&str, &str, Limit), usize> = HashMap::new();
    for (i, f) in found.iter().enumerate() {
        best.entry((f.fingerprint.as_str(), f.key.as_str(), f.limit))
            .and_modify(|b| {
                if f.newer > found[*b].newer {
                    *b = i;
                }
            })
            .or_insert(i);
    }
    let mut out = Vec::new();
    if best.is_empty() {
        return out;
    }
    for (job, w) in wanted.iter().enumerate() {
        let Some(fingerprint) = w.fingerprint else {
            continue;
        };
        for index in w.first..w.first.saturating_add(w.count) {
            let Some(key) = w.keys.get(index as usize) else {
                break;
            };
            if let Some(&found) = best.get(&(fingerprint, key.as_str(), w.limit)) {
                out.push(Match { job, index, found });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::fixtures::{BINARY, MINNOW};
    use crate::engine::EngineDef;
    use crate::epd::parse_suite;

    fn spec(defines: &[(&str, i64)], source: &str) -> BuildSpec {
        let knobs = defines.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        EngineDef::from_toml(MINNOW)
            .unwrap()
            .build_spec("row", knobs, source)
    }

    #[test]
    fn fingerprint_names_what_changes_a_search() {
        let base = spec(&[], "abc").fingerprint().unwrap();
        assert_eq!(base.len(), 64);
        // The row name and the timeouts do not matter.
        let mut renamed = spec(&[], "abc");
        renamed.name = "other".into();
        renamed.position_timeout_secs += 1;
        renamed.build_timeout_secs += 1;
        assert_eq!(renamed.fingerprint().unwrap(), base);
        // Everything else does.
        assert_ne!(spec(&[], "abd").fingerprint().unwrap(), base);
        assert_ne!(
            spec(&[("NULLMOVE_R_BASE", 2)], "abc").fingerprint(),
            Some(base.clone())
        );
        let changes: [fn(&mut BuildSpec); 5] = [
            |s| s.build_command.push("-O3".into()),
            |s| s.options.push(("Hash".into(), "32".into())),
            |s| s.fresh_process_per_position = !s.fresh_process_per_position,
            |s| s.binary = "minnow2".into(),
            |s| s.engine = "other".into(),
        ];
        for change in changes {
            let mut s = spec(&[], "abc");
            change(&mut s);
            assert_ne!(s.fingerprint().unwrap(), base, "{s:?}");
        }
    }

    #[test]
    fn binary_only_engines_have_no_fingerprint() {
        let fish = EngineDef::from_toml(BINARY).unwrap();
        assert_eq!(
            fish.build_spec("b", BTreeMap::new(), "abc").fingerprint(),
            None
        );
    }

    #[test]
    fn position_keys_ignore_ids_but_not_moves() {
        let a = parse_suite(
            "a",
            "4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; id \"x\";\n4k3/8/8/8/8/8/4P3/4K3 w - - bm e3 e4; id \"y\";\n",
        )
        .unwrap();
        let b = parse_suite(
            "b",
            "# moved and renamed\n4k3/8/8/8/8/8/4P3/4K3 w - - id \"z\"; bm e4;\n4k3/8/8/8/8/8/4P3/4K3 w - - bm e4 e3; id \"w\";\n",
        )
        .unwrap();
        assert_eq!(position_key(&a.positions[0]), position_key(&b.positions[0]));
        // Best moves in any order are the same verdict.
        assert_eq!(position_key(&a.positions[1]), position_key(&b.positions[1]));
        // Another best move is another verdict.
        assert_ne!(position_key(&a.positions[0]), position_key(&a.positions[1]));
    }

    fn found(fp: &str, key: &str, limit: Limit, newer: i64) -> Found {
        Found {
            fingerprint: fp.into(),
            key: key.into(),
            limit,
            newer,
        }
    }

    #[test]
    fn matches_cover_only_same_build_position_and_limit_newest_first() {
        let keys: Vec<String> = ["p0", "p1", "p2", "p3"].map(String::from).to_vec();
        let d5 = Limit::Depth(5);
        let wanted = [
            Wanted {
                fingerprint: Some("base"),
                keys: &keys,
                first: 0,
                count: 2,
                limit: d5,
            },
            Wanted {
                fingerprint: Some("base"),
                keys: &keys,
                first: 2,
                count: 2,
                limit: d5,
            },
            Wanted {
                fingerprint: None,
                keys: &keys,
                first: 0,
                count: 4,
                limit: d5,
            },
        ];
        let found = [
            found("base", "p1", d5, 1),
            found("base", "p1", d5, 7),
            found("base", "p3", Limit::Depth(6), 1),
            found("other", "p0", d5, 1),
            found("base", "p2", d5, 3),
            found("base", "zz", d5, 3),
        ];
        let m = matches(&wanted, &found);
        assert_eq!(
            m,
            [
                Match {
                    job: 0,
                    index: 1,
                    found: 1
                },
                Match {
                    job: 1,
                    index: 2,
                    found: 4
                },
            ]
        );
        assert!(matches(&wanted, &[]).is_empty());
    }
}
