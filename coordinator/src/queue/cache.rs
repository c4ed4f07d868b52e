//! What the worker protocol reads about sweeps, suites and jobs that never changes after
//! their submission: the build each job names (engine definition x defines x source), the
//! suite names, a suite version's positions, and a job's build, suite, positions and limit.
//! Read once and kept, so a lease, a heartbeat or an upload costs no re-read of a sweep's
//! spec, its engine definition, a suite's positions or its jobs' rows.
//!
//! Loaded through the caller's transaction: on SQLite the one write connection may be the
//! only connection there is (an in-memory database), so reading beside it would wait for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sweep_domain::engine::EngineDef;
use sweep_domain::epd::SuitePosition;
use sweep_domain::spec::SweepSpec;
use sweep_domain::wire::BuildSpec;

use crate::store::job::JobRow;
use crate::store::sources::suite_positions;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// Sweeps (and suites) kept at most; past it a cache starts over (an entry is rebuilt by a
/// few indexed reads, so a crude bound is enough). A sweep's entry is its builds and its
/// checks' positions, 24 bytes a check: about 130 kB for the seed's 250,000-job sweep.
const MAX_ENTRIES: usize = 1024;

/// A sweep's immutable parts, as leases hand them out and uploads need them.
#[derive(Debug)]
pub(crate) struct SweepStatic {
    /// Build spec by build id.
    pub builds: HashMap<i64, BuildSpec>,
    /// Suite name by suite id.
    pub suites: HashMap<i64, String>,
    /// The positions the sweep's cross-checks re-measure, as (build, suite, depth, position
    /// index), sorted. A sweep's check jobs are inserted with it, in its submit's transaction,
    /// and never after, so this never changes once the sweep can be read.
    checks: Vec<(i64, i64, i32, i32)>,
    /// What its speed jobs time their builds against, when it has `[speed]`.
    pub speed: Option<SpeedStatic>,
}

/// What every speed job of a sweep shares (see [`sweep_domain::wire::SpeedLease`]).
#[derive(Debug, Clone)]
pub(crate) struct SpeedStatic {
    /// The sweep's baseline build.
    pub baseline: BuildSpec,
    /// Pairs of runs per job.
    pub repeats: u32,
}

impl SweepStatic {
    /// Whether a cross-check of the sweep re-measures a position of work job `job`: only then
    /// can storing its results make a check takeable.
    pub fn checks_any_of(&self, job: &JobRow) -> bool {
        let from = (job.build_id, job.suite_id, job.depth, job.first_index);
        let i = self.checks.partition_point(|key| *key < from);
        self.checks
            .get(i)
            .is_some_and(|&(build, suite, depth, index)| {
                (build, suite, depth) == (job.build_id, job.suite_id, job.depth)
                    && job.range().contains(&index)
            })
    }
}

/// Jobs kept at most: far more than are held at once by thousands of workers (a job is
/// about a hundred bytes here).
const MAX_JOBS: usize = 100_000;

/// The caches of [`SweepStatic`] by sweep id, of suite positions by suite id, and of what
/// never changes of a job by job id.
#[derive(Debug, Default, Clone)]
pub(crate) struct Statics {
    sweeps: Arc<Mutex<HashMap<i64, Arc<SweepStatic>>>>,
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
    jobs: Arc<Mutex<HashMap<i64, JobRow>>>,
}

/// Inserts into a bounded cache.
fn keep<V: Clone>(cache: &Mutex<HashMap<i64, V>>, id: i64, value: V) -> V {
    let mut cache = cache.lock().expect("cache lock");
    if cache.len() >= MAX_ENTRIES {
        cache.clear();
    }
    cache.insert(id, value.clone());
    value
}

impl Statics {
    /// Of `ids`, the jobs kept (their flags not read: both false), and the ids not kept.
    pub fn jobs(&self, ids: &[i64]) -> (HashMap<i64, JobRow>, Vec<i64>) {
        let kept = self.jobs.lock().expect("cache lock");
        let mut found = HashMap::new();
        let mut missing = Vec::new();
        for &id in ids {
            match kept.get(&id) {
                Some(job) => {
                    found.insert(id, job.clone());
                }
                None => missing.push(id),
            }
        }
        missing.sort_unstable();
        missing.dedup();
        (found, missing)
    }

    /// Keeps `jobs` (as read: what never changes of them).
    pub fn keep_jobs(&self, jobs: &[JobRow]) {
        let mut kept = self.jobs.lock().expect("cache lock");
        if kept.len() + jobs.len() > MAX_JOBS {
            kept.clear();
        }
        for job in jobs {
            kept.insert(job.id, job.clone());
        }
    }

    /// The sweep's immutable parts, from the cache or through `tx`.
    pub async fn sweep<T: Tx>(&self, tx: &mut T, sweep_id: i64) -> StoreResult<Arc<SweepStatic>> {
        if let Some(s) = self.sweeps.lock().expect("cache lock").get(&sweep_id) {
            return Ok(s.clone());
        }
        let loaded = Arc::new(load_sweep(tx, sweep_id).await?);
        Ok(keep(&self.sweeps, sweep_id, loaded))
    }

    /// The positions of a suite version, from the cache or through `tx`.
    pub async fn suite<T: Tx>(
        &self,
        tx: &mut T,
        suite_id: i64,
    ) -> StoreResult<Arc<Vec<SuitePosition>>> {
        if let Some(p) = self.suites.lock().expect("cache lock").get(&suite_id) {
            return Ok(p.clone());
        }
        let positions = suite_positions(tx, suite_id).await?;
        Ok(keep(&self.suites, suite_id, Arc::new(positions)))
    }
}

/// Reads a sweep's immutable parts through `tx`: its builds' specs, its suites' names and
/// its cross-checks' positions.
async fn load_sweep<T: Tx>(tx: &mut T, sweep_id: i64) -> StoreResult<SweepStatic> {
    let id = [Value::Int(sweep_id)];
    let row = tx
        .row(
            "SELECT engine_def, source_sha256, spec FROM sweeps WHERE id = $1",
            &id,
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {sweep_id}")))?;
    let def: EngineDef = row.json("engine_def")?;
    let source = row.opt_text("source_sha256")?;
    let spec: SweepSpec = row.json("spec")?;
    let builds = build_specs(tx, &id, &def, source.as_deref().unwrap_or_default()).await?;
    let speed = match &spec.speed {
        Some(speed) => {
            let baseline = builds
                .values()
                .find(|b| b.name == spec.baseline.name)
                .cloned()
                .ok_or_else(|| {
                    StoreError::Internal(anyhow::anyhow!("sweep {sweep_id}: no baseline build"))
                })?;
            Some(SpeedStatic {
                baseline,
                repeats: speed.repeats,
            })
        }
        None => None,
    };
    Ok(SweepStatic {
        builds,
        suites: suite_names(tx, &id).await?,
        checks: check_positions(tx, &id).await?,
        speed,
    })
}

/// The build spec of each build of the sweep `id` names, by build id.
async fn build_specs<T: Tx>(
    tx: &mut T,
    id: &[Value<'_>],
    def: &EngineDef,
    source: &str,
) -> StoreResult<HashMap<i64, BuildSpec>> {
    let mut builds = HashMap::new();
    for b in tx
        .rows(
            "SELECT id, name, defines, source_sha256 FROM builds WHERE sweep_id = $1",
            id,
        )
        .await?
    {
        // A variant with code of its own builds its snapshot, every other the sweep's.
        let own = b.opt_text("source_sha256")?;
        let source = own.as_deref().unwrap_or(source);
        let spec = def.build_spec(&b.text("name")?, b.json("defines")?, source);
        builds.insert(b.int("id")?, spec);
    }
    Ok(builds)
}

/// The name of each suite of the sweep `id` names, by suite id.
async fn suite_names<T: Tx>(tx: &mut T, id: &[Value<'_>]) -> StoreResult<HashMap<i64, String>> {
    let mut suites = HashMap::new();
    for s in tx
        .rows(
            "SELECT su.id, su.name FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = $1",
            id,
        )
        .await?
    {
        suites.insert(s.int("id")?, s.text("name")?);
    }
    Ok(suites)
}

/// The positions the cross-checks of the sweep `id` names re-measure, sorted (see
/// [`SweepStatic`]).
async fn check_positions<T: Tx>(
    tx: &mut T,
    id: &[Value<'_>],
) -> StoreResult<Vec<(i64, i64, i32, i32)>> {
    let int32 = |row: &T::Row, col: &str| -> StoreResult<i32> {
        let v = row.int(col)?;
        i32::try_from(v)
            .map_err(|_| StoreError::Internal(anyhow::anyhow!("stored {col} {v} is out of range")))
    };
    let mut checks = Vec::new();
    // Index `jobs_checks`.
    for c in tx
        .rows(
            "SELECT build_id, suite_id, depth, first_index FROM jobs
             WHERE sweep_id = $1 AND kind = 'check'",
            id,
        )
        .await?
    {
        checks.push((
            c.int("build_id")?,
            c.int("suite_id")?,
            int32(&c, "depth")?,
            int32(&c, "first_index")?,
        ));
    }
    checks.sort_unstable();
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work job of build 7, suite 3, depth 8, positions `first..first + count`.
    fn job(first: i32, count: i32) -> JobRow {
        JobRow {
            id: 1,
            sweep_id: 1,
            build_id: 7,
            suite_id: 3,
            first_index: first,
            count,
            depth: 8,
            nodes_limit: 0,
            check: false,
            speed: false,
            results_done: 0,
            cancelled: false,
            build_failed: false,
        }
    }

    #[test]
    fn a_job_covers_the_checks_of_its_own_build_suite_depth_and_range_only() {
        let mut checks = vec![
            (7, 3, 8, 10),
            (7, 3, 8, 19),
            // The same position of another build, suite and depth.
            (6, 3, 8, 25),
            (7, 2, 8, 25),
            (7, 3, 9, 25),
            (8, 3, 8, 25),
        ];
        checks.sort_unstable();
        let sweep = SweepStatic {
            builds: HashMap::new(),
            suites: HashMap::new(),
            checks,
            speed: None,
        };
        assert!(sweep.checks_any_of(&job(10, 1)));
        assert!(sweep.checks_any_of(&job(0, 11)));
        assert!(sweep.checks_any_of(&job(15, 5)));
        assert!(!sweep.checks_any_of(&job(0, 10)));
        assert!(!sweep.checks_any_of(&job(11, 8)));
        assert!(!sweep.checks_any_of(&job(20, 10)));
        assert!(!sweep.checks_any_of(&job(25, 1)));
        let none = SweepStatic {
            builds: HashMap::new(),
            suites: HashMap::new(),
            checks: Vec::new(),
            speed: None,
        };
        assert!(!none.checks_any_of(&job(0, 100)));
    }
}
