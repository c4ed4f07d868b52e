//! Result reuse at submission, the part both stores share: which earlier results the new
//! sweep's jobs take (by build fingerprint, position key and limit, see
//! [`sweep_domain::reuse`]), and what each copy is. Each backend only reads the candidates,
//! copies the rows and closes the jobs they complete, in the submit transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use sqlx::{ColumnIndex, Decode, Row, Type};

use sweep_domain::epd::SuitePosition;
use sweep_domain::reuse::{matches, position_key, Found, Wanted};

use super::job::limit_of;
use super::{NewSweep, StoreError, StoreResult};

/// The fingerprint of each of the sweep's builds, in plan order (`None`: never reused, e.g.
/// a binary-only engine).
pub(crate) fn fingerprints(sweep: &NewSweep) -> Vec<Option<String>> {
    sweep
        .builds
        .iter()
        .map(|b| {
            sweep
                .engine_def
                .build_spec(
                    &b.name,
                    b.defines.clone(),
                    sweep.source_sha256.as_deref().unwrap_or_default(),
                )
                .fingerprint()
        })
        .collect()
}

/// An earlier, measured (not itself copied) and valid result of a build with one of the new
/// sweep's fingerprints.
#[derive(Debug, Clone)]
pub(crate) struct Prior {
    /// Fingerprint of its build.
    pub fingerprint: String,
    /// Its build (its row is found again by its primary key when copied).
    pub build_id: i64,
    /// Its suite version.
    pub suite_id: i64,
    /// Its position's index in that suite.
    pub index: i32,
    /// Its depth (0 for a node limit).
    pub depth: i32,
    /// Its node limit (0 for a depth limit).
    pub nodes_limit: i64,
    /// The sweep that measured it.
    pub sweep_id: i64,
    /// Its best move, judged again against the new suite's position.
    pub bestmove: String,
}

impl Prior {
    /// From a row of either backend's candidates query (columns `fingerprint`, `build_id`,
    /// `suite_id`, `position_index`, `depth`, `nodes_limit`, `sweep_id`, `bestmove`).
    pub(crate) fn of<'r, R>(r: &'r R) -> Self
    where
        R: Row,
        &'static str: ColumnIndex<R>,
        String: Decode<'r, R::Database> + Type<R::Database>,
        i64: Decode<'r, R::Database> + Type<R::Database>,
        i32: Decode<'r, R::Database> + Type<R::Database>,
    {
        Prior {
            fingerprint: r.get("fingerprint"),
            build_id: r.get("build_id"),
            suite_id: r.get("suite_id"),
            index: r.get("position_index"),
            depth: r.get("depth"),
            nodes_limit: r.get("nodes_limit"),
            sweep_id: r.get("sweep_id"),
            bestmove: r.get("bestmove"),
        }
    }
}

/// One of the new sweep's jobs as stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobSlot {
    /// Job id.
    pub id: i64,
    /// Build.
    pub build_id: i64,
    /// Suite version.
    pub suite_id: i64,
    /// First position.
    pub first: i32,
    /// Positions.
    pub count: i32,
    /// Depth (0 for a node limit).
    pub depth: i32,
    /// Node limit (0 for a depth limit).
    pub nodes_limit: i64,
}

impl JobSlot {
    /// The columns both backends select for a sweep's jobs of one kind (`work` or `check`).
    pub(crate) const SELECT: &'static str =
        "SELECT id, build_id, suite_id, first_index, count, depth, nodes_limit FROM jobs";

    /// From a row of [`JobSlot::SELECT`].
    pub(crate) fn of<'r, R>(r: &'r R) -> Self
    where
        R: Row,
        &'static str: ColumnIndex<R>,
        i64: Decode<'r, R::Database> + Type<R::Database>,
        i32: Decode<'r, R::Database> + Type<R::Database>,
    {
        JobSlot {
            id: r.get("id"),
            build_id: r.get("build_id"),
            suite_id: r.get("suite_id"),
            first: r.get("first_index"),
            count: r.get("count"),
            depth: r.get("depth"),
            nodes_limit: r.get("nodes_limit"),
        }
    }
}

/// A result to copy into the new sweep: the new row's key and verdict, and the prior row
/// it copies (by primary key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopyRow {
    /// The new sweep's job that covers the position.
    pub job_id: i64,
    /// The new sweep's build.
    pub build_id: i64,
    /// The new sweep's suite version.
    pub suite_id: i64,
    /// The position's index in that suite.
    pub index: i32,
    /// Its EPD id in that suite.
    pub position_id: String,
    /// The coordinator's verdict on the copied best move for this suite's position.
    pub solved: bool,
    /// Depth of both rows (0 for a node limit).
    pub depth: i32,
    /// The copied row's build.
    pub from_build: i64,
    /// The copied row's suite version.
    pub from_suite: i64,
    /// The copied row's position index.
    pub from_index: i32,
}

/// The copies the new sweep's `jobs` take from `priors`, given the positions of every suite
/// version involved (`suites`, by id: the new sweep's and the priors').
pub(crate) fn copies(
    jobs: &[JobSlot],
    fingerprint_of: &HashMap<i64, String>,
    suites: &HashMap<i64, Vec<SuitePosition>>,
    priors: &[Prior],
) -> StoreResult<Vec<CopyRow>> {
    let keys: HashMap<i64, Vec<String>> = suites
        .iter()
        .map(|(id, positions)| (*id, positions.iter().map(position_key).collect()))
        .collect();
    let no_keys = Vec::new();
    let mut found = Vec::with_capacity(priors.len());
    for p in priors {
        let key = keys
            .get(&p.suite_id)
            .and_then(|k| k.get(p.index as usize))
            .ok_or_else(|| missing(p.suite_id, p.index))?;
        found.push(Found {
            fingerprint: p.fingerprint.clone(),
            key: key.clone(),
            limit: limit_of(p.depth, p.nodes_limit)?,
            newer: p.sweep_id,
        });
    }
    let wanted = jobs
        .iter()
        .map(|j| {
            Ok(Wanted {
                fingerprint: fingerprint_of.get(&j.build_id).map(String::as_str),
                keys: keys.get(&j.suite_id).unwrap_or(&no_keys),
                first: u32::try_from(j.first).unwrap_or(0),
                count: u32::try_from(j.count).unwrap_or(0),
                limit: limit_of(j.depth, j.nodes_limit)?,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    matches(&wanted, &found)
        .into_iter()
        .map(|m| {
            let job = &jobs[m.job];
            let prior = &priors[m.found];
            let position = suites
                .get(&job.suite_id)
                .and_then(|s| s.get(m.index as usize))
                .ok_or_else(|| missing(job.suite_id, m.index as i32))?;
            Ok(CopyRow {
                job_id: job.id,
                build_id: job.build_id,
                suite_id: job.suite_id,
                index: m.index as i32,
                position_id: position.id.clone(),
                solved: position.is_solved(&prior.bestmove),
                depth: job.depth,
                from_build: prior.build_id,
                from_suite: prior.suite_id,
                from_index: prior.index,
            })
        })
        .collect()
}

/// The candidates' queries, both backends' dialects alike (`{FP}` is the fingerprint
/// filter, `{SWEEP}` the new sweep's id): measured (never copied) valid results, and valid
/// cross-checks, of earlier builds with the new sweep's fingerprints.
pub(crate) const RESULT_CANDIDATES: &str =
    "SELECT b.fingerprint, r.build_id, r.suite_id, r.position_index, r.depth, r.nodes_limit,
            r.sweep_id, r.bestmove
     FROM builds b JOIN results r ON r.build_id = b.id
     WHERE b.fingerprint {FP} AND b.sweep_id <> {SWEEP}
       AND r.error IS NULL AND r.origin_sweep_id IS NULL";

/// See [`RESULT_CANDIDATES`]. A cross-check is a measurement like a result (the same build,
/// position and limit, in a fresh process): the new sweep's check of a position whose result
/// it copied takes an earlier check of it, so an identical rerun runs no engine at all.
pub(crate) const CHECK_CANDIDATES: &str =
    "SELECT b.fingerprint, c.build_id, c.suite_id, c.position_index, c.depth, c.nodes_limit,
            c.sweep_id, c.bestmove
     FROM builds b JOIN cross_checks c ON c.build_id = b.id
     WHERE b.fingerprint {FP} AND b.sweep_id <> {SWEEP} AND c.error IS NULL";

/// `query` with its fingerprint filter and sweep parameter in a backend's dialect.
pub(crate) fn candidates_sql(query: &str, fingerprint: &str, sweep: &str) -> String {
    query.replace("{FP}", fingerprint).replace("{SWEEP}", sweep)
}

/// The check jobs (one position each) whose position got a copied result: only those may
/// take an earlier cross-check (a check of a position measured anew must check that
/// measurement).
pub(crate) fn checks_of_copied(checks: &[JobSlot], copied: &[CopyRow]) -> Vec<JobSlot> {
    let covered: HashSet<(i64, i64, i32, i32)> = copied
        .iter()
        .map(|c| (c.build_id, c.suite_id, c.index, c.depth))
        .collect();
    checks
        .iter()
        .filter(|j| covered.contains(&(j.build_id, j.suite_id, j.first, j.depth)))
        .copied()
        .collect()
}

/// The suite versions the jobs and candidates name.
pub(crate) fn suite_ids(jobs: &[JobSlot], priors: &[&[Prior]]) -> Vec<i64> {
    jobs.iter()
        .map(|j| j.suite_id)
        .chain(priors.iter().flat_map(|p| p.iter().map(|p| p.suite_id)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// How many copies each job received, by job id.
pub(crate) fn per_job(copies: &[CopyRow]) -> BTreeMap<i64, i32> {
    let mut out = BTreeMap::new();
    for c in copies {
        *out.entry(c.job_id).or_insert(0) += 1;
    }
    out
}

fn missing(suite_id: i64, index: i32) -> StoreError {
    StoreError::Internal(anyhow::anyhow!(
        "position {index} of suite version {suite_id} is not stored"
    ))
}
