//! Result reuse at submission, written once for both stores: which earlier results the new
//! sweep's jobs take (by build fingerprint, position key and limit, see
//! [`sweep_domain::reuse`]), what each copy is, and the steps of taking them in the submit
//! transaction. Each backend only reads the candidates and copies the rows, closing the jobs
//! they complete ([`Backend::reuse_candidates`], [`Backend::copy_earlier`]): Postgres in
//! set-based statements, SQLite a row at a time.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use sweep_domain::epd::SuitePosition;
use sweep_domain::limit::Limit;
use sweep_domain::reuse::{matches, position_key, Found, Wanted};

use super::backend::Backend;
use super::rows::{int32, CopyRow, JobKind, NewJob, Prior};
use super::sources::suite_positions;
use super::sql::limit_of;
use super::sql::{Columns, Tx, Value};
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
                    b.source_or(sweep.source_sha256.as_deref().unwrap_or_default()),
                )
                .fingerprint()
        })
        .collect()
}

/// One of the new sweep's jobs as stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobSlot {
    /// Job id.
    pub id: i64,
    /// What it measures.
    pub job: NewJob,
}

impl JobSlot {
    /// From a row of `jobs` (columns `id`, `build_id`, `suite_id`, `first_index`, `count`,
    /// `depth`, `nodes_limit`).
    fn of(r: &impl Columns) -> StoreResult<Self> {
        Ok(JobSlot {
            id: r.int("id")?,
            job: NewJob {
                build_id: r.int("build_id")?,
                suite_id: r.int("suite_id")?,
                first: int32(r, "first_index")?,
                count: int32(r, "count")?,
                depth: int32(r, "depth")?,
                nodes_limit: r.int("nodes_limit")?,
            },
        })
    }
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
        .map(|JobSlot { job: j, .. }| {
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
            let JobSlot { id: job_id, job } = &jobs[m.job];
            let prior = &priors[m.found];
            let position = suites
                .get(&job.suite_id)
                .and_then(|s| s.get(m.index as usize))
                .ok_or_else(|| missing(job.suite_id, m.index as i32))?;
            Ok(CopyRow {
                job_id: *job_id,
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
/// filter, `{SWEEP}` the new sweep's id, `{LIMITS}` its limits' `(depth, nodes_limit)`
/// pairs): measured (never copied) valid results, and valid cross-checks, of earlier builds
/// with the new sweep's fingerprints, at its limits (others could never be taken: a
/// resubmission at other depths reads none of the earlier results).
pub(crate) const RESULT_CANDIDATES: &str =
    "SELECT b.fingerprint, r.build_id, r.suite_id, r.position_index, r.depth, r.nodes_limit,
            r.sweep_id, r.bestmove
     FROM builds b JOIN results r ON r.build_id = b.id
     WHERE b.fingerprint {FP} AND b.sweep_id <> {SWEEP}
       AND (r.depth, r.nodes_limit) IN ({LIMITS})
       AND r.error IS NULL AND r.origin_sweep_id IS NULL";

/// See [`RESULT_CANDIDATES`]. A cross-check is a measurement like a result (the same build,
/// position and limit, in a fresh process): the new sweep's check of a position whose result
/// it copied takes an earlier check of it, so an identical rerun runs no engine at all.
pub(crate) const CHECK_CANDIDATES: &str =
    "SELECT b.fingerprint, c.build_id, c.suite_id, c.position_index, c.depth, c.nodes_limit,
            c.sweep_id, c.bestmove
     FROM builds b JOIN cross_checks c ON c.build_id = b.id
     WHERE b.fingerprint {FP} AND b.sweep_id <> {SWEEP}
       AND (c.depth, c.nodes_limit) IN ({LIMITS}) AND c.error IS NULL";

/// `query` with its fingerprint filter and sweep parameter in a backend's dialect.
pub(crate) fn candidates_sql(query: &str, fingerprint: &str, sweep: &str) -> String {
    query.replace("{FP}", fingerprint).replace("{SWEEP}", sweep)
}

/// Which jobs of a sweep take earlier results, and from which sweeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Takers {
    /// The sweep.
    pub sweep: i64,
    /// Its jobs from this id on (0: all).
    pub from_job: i64,
    /// Results of this sweep are not taken (the sweep itself when it is new; 0 for none).
    pub exclude_sweep: i64,
}

/// Copies into sweep `id`'s jobs from id `from_job` on (0: all; a later stage: its own)
/// every earlier measured result its builds (`fingerprints`, by build id) can take, from
/// any sweep but `exclude_sweep` (a new sweep excludes itself; a later stage takes its own
/// sweep's earlier stages too, e.g. the quick suites' positions again in the full suite), and the earlier cross-checks of those positions, and closes the jobs
/// that leaves with nothing to run; returns how many results were copied.
pub(crate) async fn take_earlier_results<B: Backend>(
    db: &B,
    tx: &mut B::Tx,
    takers: Takers,
    fingerprints: &HashMap<i64, String>,
    limits: &[Limit],
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let wanted: Vec<&str> = fingerprints
        .values()
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if wanted.is_empty() {
        return Ok(0);
    }
    // Integers of the spec: written into the statement as they are.
    let pairs: Vec<String> = limits
        .iter()
        .map(|l| {
            let (depth, nodes) = l.key();
            format!("({depth}, {nodes})")
        })
        .collect();
    if pairs.is_empty() {
        return Ok(0);
    }
    let at_limits = |query: &str| query.replace("{LIMITS}", &pairs.join(", "));
    let priors = db
        .reuse_candidates(
            tx,
            &at_limits(RESULT_CANDIDATES),
            &wanted,
            takers.exclude_sweep,
        )
        .await?;
    if priors.is_empty() {
        return Ok(0);
    }
    let check_priors = db
        .reuse_candidates(
            tx,
            &at_limits(CHECK_CANDIDATES),
            &wanted,
            takers.exclude_sweep,
        )
        .await?;
    let (id, from_job) = (takers.sweep, takers.from_job);
    let jobs = slots(tx, id, JobKind::Work, from_job).await?;
    let checks = slots(tx, id, JobKind::Check, from_job).await?;
    let suites = suites(tx, &suite_ids(&jobs, &[&priors, &check_priors])).await?;
    let rows = copies(&jobs, fingerprints, &suites, &priors)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let check_rows = copies(
        &checks_of_copied(&checks, &rows),
        fingerprints,
        &suites,
        &check_priors,
    )?;
    db.copy_earlier(tx, id, &rows, &check_rows, now).await
}

/// The new sweep's jobs of one kind, from job id `from` on (a later stage's).
async fn slots<T: Tx>(tx: &mut T, id: i64, kind: JobKind, from: i64) -> StoreResult<Vec<JobSlot>> {
    // Work through its builds' ranges of ids, cross-checks by sweep (`jobs_checks`).
    let sql = match kind {
        JobKind::Work => {
            "SELECT j.id, j.build_id, j.suite_id, j.first_index, j.count, j.depth, j.nodes_limit
             FROM builds b JOIN jobs j ON j.id >= b.first_job AND j.id <= b.last_job
                                      AND j.build_id = b.id
             WHERE b.sweep_id = $1 AND j.kind = 'work' AND j.id >= $2"
        }
        JobKind::Check => {
            "SELECT id, build_id, suite_id, first_index, count, depth, nodes_limit FROM jobs
             WHERE sweep_id = $1 AND kind = 'check' AND id >= $2"
        }
        // A time is of the worker that measured it, next to the baseline it ran beside:
        // never taken from another sweep.
        JobKind::Speed => return Ok(Vec::new()),
    };
    tx.rows(sql, &[Value::Int(id), Value::Int(from)])
        .await?
        .iter()
        .map(JobSlot::of)
        .collect()
}

/// The positions of the suite versions `ids`.
async fn suites<T: Tx>(tx: &mut T, ids: &[i64]) -> StoreResult<HashMap<i64, Vec<SuitePosition>>> {
    let mut out = HashMap::new();
    for &suite_id in ids {
        out.insert(suite_id, suite_positions(tx, suite_id).await?);
    }
    Ok(out)
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
        .filter(|s| {
            let j = &s.job;
            covered.contains(&(j.build_id, j.suite_id, j.first, j.depth))
        })
        .copied()
        .collect()
}

/// The suite versions the jobs and candidates name.
pub(crate) fn suite_ids(jobs: &[JobSlot], priors: &[&[Prior]]) -> Vec<i64> {
    jobs.iter()
        .map(|j| j.job.suite_id)
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
