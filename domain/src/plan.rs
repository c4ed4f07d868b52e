//! Planning: a validated spec becomes builds x suites x chunks of positions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::limit::Limit;
use crate::spec::SweepSpec;

/// One variant of the engine to build and run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildPlan {
    /// Row name in tables: the baseline's name, or `KNOB=VALUE`.
    pub name: String,
    /// Defines passed to the build.
    pub defines: BTreeMap<String, i64>,
    /// Is this the baseline every other build is compared with?
    pub is_baseline: bool,
    /// sha256 of the snapshot this build is built from when it is not the sweep's source (a
    /// variant with code of its own, `rev` or `sha256`); `None` for the sweep's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl BuildPlan {
    /// The snapshot this build is built from: its own, or `sweep_source`.
    pub fn source_or<'a>(&'a self, sweep_source: &'a str) -> &'a str {
        self.source.as_deref().unwrap_or(sweep_source)
    }
}

/// A contiguous run of positions of one suite, the unit of work of a job (per build).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkPlan {
    /// Suite name.
    pub suite: String,
    /// Index of the first position in the suite.
    pub first: u32,
    /// Number of positions.
    pub count: u32,
}

/// One job of the plan: a build (index into [`builds`]), a chunk (index into [`chunks`]) and
/// a search limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobPlan {
    /// Index of the build.
    pub build: usize,
    /// Index of the chunk.
    pub chunk: usize,
    /// Search limit.
    pub limit: Limit,
}

/// The builds of a sweep: the baseline first, then the variants in the spec's order. A
/// variant starts from the baseline's defines and sets its own knobs on top.
pub fn builds(spec: &SweepSpec) -> Vec<BuildPlan> {
    let mut out = vec![BuildPlan {
        name: spec.baseline.name.clone(),
        defines: spec.baseline.defines.clone(),
        is_baseline: true,
        source: None,
    }];
    for v in &spec.variants {
        let mut defines = spec.baseline.defines.clone();
        defines.extend(v.defines.iter().map(|(k, v)| (k.clone(), *v)));
        out.push(BuildPlan {
            name: v.name.clone(),
            defines,
            is_baseline: false,
            source: v.source.as_ref().map(|s| s.sha256.clone()),
        });
    }
    out
}

/// Every job of a sweep in the order they should run: chunk by chunk, and within a chunk
/// every limit and every build in turn. Leasing in this order (job ids follow it) keeps the
/// builds level, so a table read while the sweep runs compares the same positions across
/// builds instead of a finished baseline with a variant that has barely started. (With
/// several workers on Postgres, build affinity lets each keep to the builds it has compiled,
/// so builds may run unevenly there; tables compare only positions every build has.)
pub fn jobs(builds: usize, chunks: usize, limits: &[Limit]) -> Vec<JobPlan> {
    let mut out = Vec::with_capacity(builds * chunks * limits.len());
    for chunk in 0..chunks {
        for &limit in limits {
            for build in 0..builds {
                out.push(JobPlan {
                    build,
                    chunk,
                    limit,
                });
            }
        }
    }
    out
}

/// Chunks of every suite of the sweep (of its first stage), given each suite's number of
/// positions.
pub fn chunks(spec: &SweepSpec, suite_sizes: &BTreeMap<String, usize>) -> Vec<ChunkPlan> {
    suite_chunks(&spec.suites, spec.chunk_size, suite_sizes)
}

/// Chunks of `suites` of at most `chunk_size` positions, given each suite's number of
/// positions.
pub fn suite_chunks(
    suites: &[String],
    chunk_size: u32,
    suite_sizes: &BTreeMap<String, usize>,
) -> Vec<ChunkPlan> {
    let mut out = Vec::new();
    for suite in suites {
        let size = suite_sizes.get(suite).copied().unwrap_or(0) as u32;
        let mut first = 0;
        while first < size {
            let count = chunk_size.min(size - first);
            out.push(ChunkPlan {
                suite: suite.clone(),
                first,
                count,
            });
            first += count;
        }
    }
    out
}

/// Key of a built binary in a worker's cache: same source, defines and recipe => same binary.
pub fn build_key(
    source_sha256: &str,
    defines: &BTreeMap<String, i64>,
    command: &[String],
) -> String {
    let mut h = Sha256::new();
    h.update(source_sha256.as_bytes());
    for (k, v) in defines {
        h.update(format!("\0{k}={v}").as_bytes());
    }
    for arg in command {
        h.update(b"\x01");
        h.update(arg.as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::BaselineConfig;

    fn spec() -> SweepSpec {
        SweepSpec {
            search: None,
            priority: Default::default(),
            speed: None,
            counters: Vec::new(),
            recompute: false,
            cross_check: crate::crosscheck::share::Share(0.0),
            cross_check_min: 0,
            stages: Vec::new(),
            name: "s".into(),
            engine: "e".into(),
            knobs: vec!["K".into()],
            variants: [0, 300]
                .iter()
                .map(|v| crate::spec::Variant {
                    name: format!("K={v}"),
                    defines: BTreeMap::from([("K".into(), *v)]),
                    source: None,
                })
                .collect(),
            suites: vec!["a".into(), "b".into()],
            limits: vec![Limit::Depth(5)],
            chunk_size: 4,
            baseline: BaselineConfig {
                name: "head_reference".into(),
                defines: BTreeMap::from([("R".into(), 2)]),
            },
            description: String::new(),
        }
    }

    #[test]
    fn baseline_first_then_values() {
        let b = builds(&spec());
        assert_eq!(b.len(), 3);
        assert!(b[0].is_baseline);
        assert_eq!(b[0].defines, BTreeMap::from([("R".into(), 2)]));
        assert_eq!(b[2].name, "K=300");
        assert_eq!(
            b[2].defines,
            BTreeMap::from([("K".into(), 300), ("R".into(), 2)])
        );
    }

    #[test]
    fn jobs_go_round_robin_over_builds() {
        let j = jobs(3, 2, &[Limit::Depth(4), Limit::Depth(6)]);
        assert_eq!(j.len(), 12);
        let first: Vec<(usize, usize, Limit)> = j
            .iter()
            .take(4)
            .map(|j| (j.chunk, j.build, j.limit))
            .collect();
        assert_eq!(
            first,
            [
                (0, 0, Limit::Depth(4)),
                (0, 1, Limit::Depth(4)),
                (0, 2, Limit::Depth(4)),
                (0, 0, Limit::Depth(6))
            ]
        );
        assert_eq!(j[6].chunk, 1);
    }

    #[test]
    fn chunks_cover_every_position_once() {
        let sizes = BTreeMap::from([("a".into(), 10), ("b".into(), 4)]);
        let c = chunks(&spec(), &sizes);
        let a: Vec<(u32, u32)> = c
            .iter()
            .filter(|c| c.suite == "a")
            .map(|c| (c.first, c.count))
            .collect();
        assert_eq!(a, vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(c.iter().filter(|c| c.suite == "b").count(), 1);
    }

    #[test]
    fn build_key_depends_on_everything() {
        let d = BTreeMap::from([("K".into(), 1)]);
        let cmd = vec!["make".to_string()];
        let k = build_key("abc", &d, &cmd);
        assert_ne!(k, build_key("abd", &d, &cmd));
        assert_ne!(
            k,
            build_key("abc", &BTreeMap::from([("K".into(), 2)]), &cmd)
        );
        assert_ne!(k, build_key("abc", &d, &["gmake".to_string()]));
        assert_eq!(k, build_key("abc", &d, &cmd));
    }
}
