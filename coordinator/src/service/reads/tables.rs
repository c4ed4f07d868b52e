//! A sweep's results read back: its delta tables (summed in the database while it runs; with
//! paired statistics and counter sums, made once and cached, when it has finished) and its
//! per-position comparison of one build with the baseline.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::engine::KnobKind;
use sweep_domain::limit::Limit;
use sweep_domain::plan::BuildPlan;
use sweep_domain::source::SourceProvenance;
use sweep_domain::table::{
    self, CellSums, LimitTable, Planned, PositionsReport, PositionsView, RowState, SearchReport,
    StageState, StageTable, SumsKey, Table, TableBuild, TableInput,
};
use sweep_domain::wire::SweepState;
use sweep_domain::FieldError;

use super::{ReadError, Reads};
use crate::service::auth::{Caller, Need};
use crate::store::{BuildCost, SweepRecord};

/// Finished sweeps whose tables are kept; past it the cache starts over.
const MAX_CACHED_TABLES: usize = 256;

/// How often the coordinator looks for sweeps that have finished, to make their tables
/// before anyone asks (see [`Reads::keep_tables_warm`]).
const WARM_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The newest sweeps it looks at: a sweep finishes some time after it was submitted, but
/// older ones than these are old news.
const WARM_LOOKS_AT: u32 = 20;

/// Builds whose results a finished table reads at once, beside the baseline's. A build's
/// paired statistics and counter sums need only its own results and the baseline's, so a few
/// builds at a time bound what a big sweep's table holds in memory (all 250,000 results of a
/// 257-build sweep at once took hundreds of MB) at no cost to the figures. Measured on that
/// sweep (`bench/table.sh`): with 16 the coordinator's RSS grew by 3-12 MB even with
/// [`give_back_freed_memory`], with 8 by none; the table took as long (1.8-2.0 s).
const BUILDS_PER_READ: usize = 8;

/// The tables of finished sweeps, which can no longer change, by sweep id (at most
/// [`MAX_CACHED_TABLES`]; past it the cache starts over).
#[derive(Default)]
pub(crate) struct TableCache(Mutex<HashMap<i64, Arc<Table>>>);

impl TableCache {
    /// Sweep `id`'s table, if kept.
    fn get(&self, id: i64) -> Option<Arc<Table>> {
        self.0.lock().expect("table cache lock").get(&id).cloned()
    }

    /// Whether sweep `id`'s table is kept.
    fn contains(&self, id: i64) -> bool {
        self.0.lock().expect("table cache lock").contains_key(&id)
    }

    /// Keeps sweep `id`'s finished table.
    fn keep(&self, id: i64, table: Arc<Table>) {
        let mut cache = self.0.lock().expect("table cache lock");
        if cache.len() >= MAX_CACHED_TABLES {
            cache.clear();
        }
        cache.insert(id, table);
    }

    /// Drops sweep `id`'s table: the sweep runs again (a build of it was retried).
    pub(crate) fn forget(&self, id: i64) {
        self.0.lock().expect("table cache lock").remove(&id);
    }
}

impl Reads {
    /// The delta table of a sweep.
    pub async fn table(&self, caller: &Caller, id: i64) -> Result<Arc<Table>, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        if let Some(t) = self.tables.get(id) {
            // Another coordinator on the database may have deleted it since.
            if self.shared.store.sweep_exists(id).await? {
                return Ok(t);
            }
            self.tables.forget(id);
            return Err(ReadError::NotFound(format!("sweep {id}")));
        }
        let _turn = self.turn().await?;
        let store = &self.shared.store;
        let rec = store.sweep(id).await?;
        let extras = Extras {
            sums: store.table_sums(id).await?,
            // Cross-checks per row: a handful of counts (the checks are a small share).
            checks: Some(store.cross_checks(id, 0).await?),
            // Bench signatures: a few build records.
            benches: store.build_benches(id).await?,
        };
        // A finished sweep's table can no longer change (a cancelled one can: results of
        // leases held at the cancel still arrive).
        let finished = is_finished(rec.summary.state);
        let mut table = self
            .stage_table(&rec, 0, &extras, finished)
            .await?
            .ok_or_else(|| ReadError::Internal(anyhow::anyhow!("sweep {id} has no first stage")))?;
        describe(&mut table, &rec);
        if let Some(report) = &rec.search {
            // The cost walks every result of the sweep: once, for the table kept when the
            // sweep has finished, never on each poll of a running one.
            table.search = Some(if finished {
                costed(report, &rec, &store.build_costs(id).await?)
            } else {
                report.clone()
            });
        }
        if rec.spec.stage_count() > 1 {
            table.stages = self.stages(&rec, &table, &extras, finished).await?;
        }
        if let Some(speed) = &rec.spec.speed {
            for (build, s) in store.speed_runs(id).await? {
                let seed = table::speed_seed("", &build);
                let mut row = table::speed_of(&s.runs, s.error, seed);
                row.positions = Some(format!("the first {} of {}", speed.count, speed.suite));
                table::attach_speed(&mut table, speed.limit, &build, &row);
            }
        }
        name_row_sources(&mut table, &rec);
        if !finished {
            return Ok(Arc::new(table));
        }
        table.curve_flags = table::non_monotonic(&table);
        give_back_freed_memory();
        let table = Arc::new(table);
        self.tables.keep(id, table.clone());
        Ok(table)
    }

    /// Stage `k` of the sweep (0: the first, or the whole of a sweep without stages) as a
    /// table of its builds at its limits over its suites, from `extras`; with `results`,
    /// also its paired statistics and counter sums, from the builds' results. `None` while
    /// its builds are not chosen (the stage before has not finished) or when the stage before
    /// promoted none.
    pub(crate) async fn stage_table(
        &self,
        rec: &SweepRecord,
        k: usize,
        extras: &Extras,
        results: bool,
    ) -> Result<Option<Table>, ReadError> {
        let (Some(view), Some(names)) = (rec.spec.stage(k), stage_builds(rec, k)) else {
            return Ok(None);
        };
        let (builds, _, sizes) = plan_of(rec);
        let builds: Vec<TableBuild> = builds
            .into_iter()
            .filter(|b| names.contains(&b.plan.name))
            .collect();
        let mut table = table::build_table(TableInput {
            knobs: &rec.spec.knobs,
            builds: &builds,
            limits: view.limits,
            suites: view.suites,
            suite_sizes: &sizes,
            sums: &extras.sums,
            counters: &rec.spec.counters,
        });
        if let Some(checks) = &extras.checks {
            attach_cross_checks(&mut table, checks);
        }
        table::attach_benches(&mut table, &extras.benches, &options_differ(rec));
        if results {
            table = self
                .with_results(rec.summary.id, table, &names, view.limits)
                .await?;
        }
        Ok(Some(table))
    }

    /// The stages of a staged sweep, the first being `first` (the top of its table).
    async fn stages(
        &self,
        rec: &SweepRecord,
        first: &Table,
        extras: &Extras,
        results: bool,
    ) -> Result<Vec<StageTable>, ReadError> {
        let mut out = vec![stage_entry(rec, 0, Some(first.tables.clone()))];
        for k in 1..rec.spec.stage_count() {
            let table = self.stage_table(rec, k, extras, results).await?;
            out.push(stage_entry(rec, k, table.map(|t| t.tables)));
        }
        Ok(out)
    }

    /// Makes and keeps the tables of the newest sweeps that have finished and are not kept
    /// yet, at most `max` of them; returns how many it made. A finished table reads every
    /// result and computes its paired statistics (seconds for a 250,000-result sweep); made
    /// here, as soon as the sweep has finished, the first reader finds it kept.
    pub async fn warm_finished_tables(&self, max: usize) -> Result<usize, ReadError> {
        let recent = {
            let _turn = self.turn().await?;
            self.shared.store.list_sweeps(WARM_LOOKS_AT).await?
        };
        let mut made = 0;
        for sweep in recent {
            if made >= max {
                break;
            }
            if is_finished(sweep.state) && !self.tables.contains(sweep.id) {
                self.table(&Caller::Local, sweep.id).await?;
                made += 1;
            }
        }
        Ok(made)
    }

    /// Keeps making the tables of sweeps as they finish (see [`Reads::warm_finished_tables`]),
    /// one every [`WARM_EVERY`] at most, until `stop` fires.
    pub async fn keep_tables_warm(&self, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(WARM_EVERY) => {}
            }
            if let Err(e) = self.warm_finished_tables(1).await {
                tracing::warn!(error = %e, "making a finished sweep's table failed");
            }
        }
    }

    /// `table` (of builds `names` at `limits`) with its paired statistics and counter sums.
    ///
    /// Paired statistics need per-position results: per limit, a few builds at a time with
    /// the baseline (see [`BUILDS_PER_READ`]), each group's bootstrap off the async workers.
    /// Only once the sweep has finished, when the table is made once and cached (or when a
    /// stage has finished, to decide its promotion): a running sweep's table stays summed in
    /// the database, so polling it never loads its results. Counter sums come from the same
    /// results, at the same moment (a baseline-only sweep has counters too, and no
    /// statistics).
    async fn with_results(
        &self,
        id: i64,
        mut table: Table,
        names: &[String],
        limits: &[Limit],
    ) -> Result<Table, ReadError> {
        let groups = read_groups(&table.baseline, names, BUILDS_PER_READ);
        for &limit in limits {
            for group in &groups {
                table = self.attach_finished(id, table, group, limit).await?;
            }
        }
        Ok(table)
    }

    /// `table` with the counter sums and paired statistics of the builds `names` (the
    /// baseline among them) at `limit`, from their results.
    async fn attach_finished(
        &self,
        id: i64,
        mut table: Table,
        names: &[String],
        limit: Limit,
    ) -> Result<Table, ReadError> {
        let mut results = self.shared.store.build_results(id, names, limit).await?;
        // A later stage may run other suites at the same limit: only this table's count.
        results.retain(|r| table.suite_order.contains(&r.suite));
        tokio::task::spawn_blocking(move || {
            table::attach_counters(&mut table, limit, &results);
            // Seeded by build, limit and suite only (no sweep id): the same results give
            // the same interval in every sweep, e.g. a rerun or a local run.
            table::attach_stats(&mut table, limit, &results, "");
            table
        })
        .await
        .map_err(|e| ReadError::Internal(anyhow::Error::new(e).context("table statistics")))
    }

    /// Per-position results of `build` beside the baseline's, at `limit` (default: the
    /// sweep's first), the rows of `view`: `page_size` rows from `offset`, each with its FEN,
    /// `bm` and `am` from the suite version the sweep ran.
    #[allow(clippy::too_many_arguments)]
    pub async fn positions(
        &self,
        caller: &Caller,
        id: i64,
        build: Option<&str>,
        limit: Option<Limit>,
        view: PositionsView,
        offset: usize,
        page_size: usize,
    ) -> Result<PositionsReport, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        let rec = self.shared.store.sweep(id).await?;
        let (builds, suites, _) = plan_of(&rec);
        let baseline = rec.spec.baseline.name.clone();
        let limit = limit_of(&rec, limit)?;
        let build = build_of(&rec, &builds, build)?;
        let names = [build.clone(), baseline.clone()];
        let results = self.shared.store.build_results(id, &names, limit).await?;
        let mut report = table::compare_positions(&build, &baseline, limit, &suites, &results)
            .view(view)
            .page(offset, page_size);
        self.attach_positions(id, &mut report).await?;
        Ok(report)
    }

    /// Fills each row of `report` with its position's FEN, `bm` and `am`. Only the suites on
    /// this page are read (their positions are cached by the store).
    async fn attach_positions(
        &self,
        id: i64,
        report: &mut PositionsReport,
    ) -> Result<(), ReadError> {
        let mut read: HashMap<String, sweep_domain::epd::Suite> = HashMap::new();
        for row in &mut report.rows {
            if !read.contains_key(&row.suite) {
                let suite = self.shared.store.sweep_suite(id, &row.suite).await?;
                read.insert(row.suite.clone(), suite);
            }
            if let Some(p) = read[&row.suite].positions.get(row.index as usize) {
                row.fen.clone_from(&p.fen);
                row.bm.clone_from(&p.bm);
                row.am.clone_from(&p.am);
            }
        }
        Ok(())
    }
}

/// The builds `names` in groups of at most `per_read` besides the baseline, each group with
/// the baseline first; the baseline alone when it is the only build.
fn read_groups(baseline: &str, names: &[String], per_read: usize) -> Vec<Vec<String>> {
    let others: Vec<&String> = names.iter().filter(|n| *n != baseline).collect();
    if others.is_empty() {
        return vec![vec![baseline.to_string()]];
    }
    others
        .chunks(per_read.max(1))
        .map(|group| {
            std::iter::once(baseline.to_string())
                .chain(group.iter().map(|n| n.to_string()))
                .collect()
        })
        .collect()
}

/// Has the sweep finished, so its results can no longer change? (Failed means every job is
/// closed too: the baseline did not build.)
pub(super) fn is_finished(state: SweepState) -> bool {
    matches!(
        state,
        SweepState::Done | SweepState::DoneWithErrors | SweepState::Failed
    )
}

/// What a table is made from besides the sweep: its sums, cross-checks (none when the
/// table is made to decide a promotion) and benches.
pub(crate) struct Extras {
    /// The sums of every (build, limit, suite) with results.
    pub sums: BTreeMap<SumsKey, CellSums>,
    /// The sweep's cross-checks.
    pub checks: Option<CrossChecks>,
    /// Each build's bench.
    pub benches: BTreeMap<String, table::BuildBench>,
}

/// `report` with what its cells cost: engine seconds measured in this sweep by the
/// baseline and the cells it planned, over the first stage's suites and limits, and the
/// whole grid's at their mean cost per build.
fn costed(report: &SearchReport, rec: &SweepRecord, costs: &[BuildCost]) -> SearchReport {
    let first = rec.spec.stage(0).expect("a sweep has a first stage");
    let baseline = &rec.spec.baseline.name;
    let mut per_build: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for c in costs.iter().filter(|c| {
        first.suites.contains(&c.suite)
            && first.limits.contains(&c.limit)
            && (&c.build == baseline || report.planned.contains(&c.build))
    }) {
        let e = per_build.entry(c.build.as_str()).or_default();
        e.0 += c.ms;
        e.1 += c.measured_ms;
    }
    let mut out = report.clone();
    if per_build.is_empty() {
        return out;
    }
    let all: u64 = per_build.values().map(|c| c.0).sum();
    let mean = all as f64 / per_build.len() as f64;
    out.engine_seconds = Some(per_build.values().map(|c| c.1).sum::<u64>() as f64 / 1000.0);
    out.grid_engine_seconds = Some(mean * f64::from(report.grid_cells + 1) / 1000.0);
    out
}

/// The sweep's heading on its table: its source, suites and identity.
fn describe(table: &mut Table, rec: &SweepRecord) {
    table.source = provenance(rec);
    table.suite_sha256 = rec.suite_sha256.clone();
    table.sweep = Some(table::TableSweep {
        id: rec.summary.id,
        name: rec.summary.name.clone(),
        engine: rec.summary.engine.clone(),
        submitted_at: rec.summary.created_at,
        sweep_version: env!("CARGO_PKG_VERSION").to_string(),
    });
}

/// Names on every row (of every stage) the code its build was built from: a variant's own,
/// or the sweep's source.
fn name_row_sources(table: &mut Table, rec: &SweepRecord) {
    let sweep_label = table.source.as_ref().map(|s| s.label());
    let stages = table.stages.iter_mut().flat_map(|s| &mut s.tables);
    for row in table
        .tables
        .iter_mut()
        .chain(stages)
        .flat_map(|t| &mut t.rows)
    {
        let own = rec.spec.variants.iter().find(|v| v.name == row.build);
        row.source = match own.and_then(|v| v.source.as_ref()) {
            Some(source) => Some(source.label()),
            None => sweep_label.clone(),
        };
    }
}

/// The builds that run stage `k`, by name (see [`Planned`]); `None` while they are not
/// chosen (the stage before has not decided, or promoted none).
fn stage_builds(rec: &SweepRecord, k: usize) -> Option<Vec<String>> {
    let planned = Planned::new(&rec.spec, &rec.stages, rec.search.as_ref());
    planned.chosen(k).then(|| {
        rec.builds
            .iter()
            .filter(|b| planned.runs(k, &b.name))
            .map(|b| b.name.clone())
            .collect()
    })
}

/// Stage `k` as its table shows it, with `tables` when its builds are chosen.
fn stage_entry(rec: &SweepRecord, k: usize, tables: Option<Vec<LimitTable>>) -> StageTable {
    let view = rec.spec.stage(k).expect("a stage of the sweep");
    let decision = rec
        .stages
        .iter()
        .find(|(s, _)| *s as usize == k)
        .map(|(_, d)| d);
    let tables = tables.unwrap_or_default();
    let state = if tables.is_empty() {
        StageState::Waiting
    } else if tables
        .iter()
        .all(|lt| lt.rows.iter().all(|r| r.state != RowState::Pending))
    {
        StageState::Finished
    } else {
        StageState::Running
    };
    StageTable {
        stage: k as u32 + 1,
        suites: view.suites.to_vec(),
        limits: view.limits.to_vec(),
        promote: view.promotion.map(|p| p.promote),
        // After a search, its own rule decided the promotion.
        max_solved_loss: view.promotion.map(|p| match &rec.spec.search {
            Some(search) if k == 1 => search.max_solved_loss,
            _ => p.max_solved_loss,
        }),
        state,
        tables,
        promoted: decision.map(|d| d.promoted.clone()).unwrap_or_default(),
        eligible: decision.map(|d| d.eligible.clone()).unwrap_or_default(),
        standings: decision.map(|d| d.standings.clone()).unwrap_or_default(),
        failed: decision.and_then(|d| d.failed.clone()),
    }
}

/// Each row's cross-check counts: checks done and mismatches of its build at its limit.
fn attach_cross_checks(table: &mut Table, checks: &CrossChecks) {
    for lt in &mut table.tables {
        for row in &mut lt.rows {
            if let Some(c) = checks
                .builds
                .iter()
                .find(|c| c.build == row.build && c.limit == lt.limit)
            {
                row.checks = c.done;
                row.mismatches = c.mismatches;
            }
        }
    }
}

/// `asked` if the sweep has that limit, else its first limit when nothing was asked.
pub(super) fn limit_of(rec: &SweepRecord, asked: Option<Limit>) -> Result<Limit, ReadError> {
    let id = rec.summary.id;
    match asked {
        Some(l) if rec.spec.all_limits().contains(&l) => Ok(l),
        Some(l) => {
            let known: Vec<String> = rec
                .spec
                .all_limits()
                .iter()
                .map(|l| l.to_string())
                .collect();
            Err(FieldError::new(
                "limit",
                format!(
                    "sweep {id} has no limit `{l}` (limits: {})",
                    known.join(", ")
                ),
            )
            .into())
        }
        None => {
            rec.spec.limits.first().copied().ok_or_else(|| {
                ReadError::Internal(anyhow::anyhow!("sweep {id} has no search limit"))
            })
        }
    }
}

/// `asked` if the sweep has that build; without one, its first variant (or the baseline if it
/// is alone).
fn build_of(
    rec: &SweepRecord,
    builds: &[TableBuild],
    asked: Option<&str>,
) -> Result<String, ReadError> {
    match asked {
        Some(b) if builds.iter().any(|x| x.plan.name == b) => Ok(b.to_string()),
        Some(b) => {
            let names: Vec<&str> = builds.iter().map(|x| x.plan.name.as_str()).collect();
            Err(FieldError::new(
                "build",
                format!(
                    "no build `{b}` in sweep {} (builds: {})",
                    rec.summary.id,
                    names.join(", ")
                ),
            )
            .into())
        }
        None => Ok(builds.get(1).unwrap_or(&builds[0]).plan.name.clone()),
    }
}

/// A stored sweep's builds, suites and suite sizes, as the tables take them.
type SweepPlan = (Vec<TableBuild>, Vec<String>, BTreeMap<String, usize>);

fn plan_of(rec: &SweepRecord) -> SweepPlan {
    let builds = rec
        .builds
        .iter()
        .map(|b| TableBuild {
            plan: BuildPlan {
                name: b.name.clone(),
                defines: b.defines.clone(),
                is_baseline: b.is_baseline,
                source: None,
            },
            failed: b.build_error.is_some(),
        })
        .collect();
    let suites = rec.suites.iter().map(|(n, _)| n.clone()).collect();
    let sizes = rec.suites.iter().cloned().collect();
    (builds, suites, sizes)
}

/// The builds whose UCI options (option knobs) differ from the baseline's: a bench runs the
/// binary without them, so an equal bench says nothing of such a variant.
fn options_differ(rec: &SweepRecord) -> BTreeSet<String> {
    let def = &rec.engine_def;
    let options = |defines: &BTreeMap<String, i64>| -> BTreeMap<String, i64> {
        defines
            .iter()
            .filter(|(k, _)| def.knob(k).is_some_and(|k| k.kind == KnobKind::Option))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let base = rec
        .builds
        .iter()
        .find(|b| b.is_baseline)
        .map(|b| options(&b.defines))
        .unwrap_or_default();
    rec.builds
        .iter()
        .filter(|b| options(&b.defines) != base)
        .map(|b| b.name.clone())
        .collect()
}

/// A stored sweep's source as shown; `None` for a binary-only engine.
fn provenance(rec: &SweepRecord) -> Option<SourceProvenance> {
    rec.source_sha256.as_ref().map(|sha| SourceProvenance {
        sha256: sha.clone(),
        origin: rec.origin.clone(),
    })
}

/// Gives the memory the allocator kept after a finished table was made back to the system.
/// Making one reads every result of the sweep, a group of builds at a time, on the async and
/// blocking threads; glibc's allocator keeps what they freed in each thread's arena, so
/// without this the coordinator's RSS stayed 6-8 MB higher after a 250,000-result table
/// (18-22 MB with 16 builds per read), although the table kept is a few hundred kB.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of glibc's arenas; it takes no pointer
    // and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::read_groups;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_build_is_read_once_beside_the_baseline() {
        let all = names(&["a", "base", "b", "c", "d", "e"]);
        assert_eq!(
            read_groups("base", &all, 2),
            vec![
                names(&["base", "a", "b"]),
                names(&["base", "c", "d"]),
                names(&["base", "e"])
            ]
        );
        assert_eq!(
            read_groups("base", &names(&["base"]), 2),
            vec![names(&["base"])]
        );
        assert_eq!(
            read_groups("base", &all, 0).len(),
            5,
            "at least one build a read"
        );
    }
}
