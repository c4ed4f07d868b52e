//! The coordinator's use cases, between the HTTP adapters and the store: submitting a sweep
//! (validate, snapshot, plan, store) and reading it back as details, tables and derived suites.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::Context;
use sweep_domain::derive::{derive_suite, DeriveError, DeriveRequest, Derived, Provenance};
use sweep_domain::limit::Limit;
use sweep_domain::plan::{self, BuildPlan};
use sweep_domain::source::SourceProvenance;
use sweep_domain::spec::SweepConfig;
use sweep_domain::table::{self, PositionsReport, PositionsView, Table, TableBuild, TableInput};
use sweep_domain::wire::{Submitted, SweepDetail, SweepState, SweepSummary};
use sweep_domain::FieldError;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::catalog::Catalog;
use crate::metrics::Metrics;
use crate::store::{Created, NewSweep, Store, StoreError, SweepRecord};

mod access;
mod auth;
mod engines;
mod knobs;
mod monitor;
mod sources;
mod workers;

pub use knobs::check_declared_knobs;

use auth::Auth;
pub(crate) use auth::Need;
pub use auth::{Caller, Principal, TOKEN_TTL};
pub use engines::EngineAdded;
pub use sources::{ResolvedSource, Uploaded};
pub use workers::{
    AuthorizedWorker, DEFAULT_WORKERS_LISTED, MAX_WORKERS_LISTED, WORKERS_SEEN_WITHIN,
};

/// Why a use case did not succeed. Callers branch on it: the HTTP layer maps it to a status
/// in `http/error.rs` alone; the CLI prints it with its cause chain.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store refused (not found, lease lost, invalid) or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No token, or an unknown or revoked one, where one is needed.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The token's role (or ownership) does not allow this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The token made too many writes; it may try again after this many seconds.
    #[error("too many writes; retry after {retry_after_secs} s")]
    RateLimited {
        /// Seconds until the next write is allowed.
        retry_after_secs: u64,
    },
    /// Too many reads at once: the caller should retry shortly (the worker protocol keeps
    /// its share of the database meanwhile).
    #[error("too many reads at once; retry later")]
    Busy,
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Lease timing handed to workers, and how often a failing position or build is retried.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSettings {
    /// A lease lives this long without a heartbeat or report.
    pub lease: Duration,
    /// Workers heartbeat this often.
    pub heartbeat: Duration,
    /// A position that errored this many times (on different workers when there are several)
    /// is recorded as failed instead of being retried; a build that failed on this many
    /// workers (or on every live worker, if fewer) fails its variant.
    pub max_attempts: u32,
}

impl LeaseSettings {
    /// The one rule for lease settings: leases of `lease` (at least a second), heartbeats six
    /// times a lease (at least a second apart) so one lost heartbeat never costs a job, and
    /// at least one attempt.
    pub fn new(lease: Duration, max_attempts: u32) -> Self {
        let lease = lease.max(Duration::from_secs(1));
        Self {
            lease,
            heartbeat: (lease / 6).max(Duration::from_secs(1)),
            max_attempts: max_attempts.max(1),
        }
    }
}

impl Default for LeaseSettings {
    /// 30 s leases, heartbeats every 5 s, 3 attempts.
    fn default() -> Self {
        Self::new(Duration::from_secs(30), 3)
    }
}

/// Shared state of the coordinator.
#[derive(Clone)]
pub struct Service {
    /// Storage: only the service speaks to it.
    store: Arc<dyn Store>,
    /// Engines and suites: replaced whole when an engine is added (see [`Service::catalog`]).
    catalog: Arc<RwLock<Arc<Catalog>>>,
    /// Held while an engine is stored and swapped in, so concurrent adds land in the catalog
    /// in the order they reached the database.
    engine_writes: Arc<tokio::sync::Mutex<()>>,
    /// Lease timing.
    pub leases: LeaseSettings,
    /// Tables of finished sweeps, which can no longer change.
    tables: Arc<Mutex<HashMap<i64, Arc<Table>>>>,
    /// Tokens, worker ownership, write budgets.
    auth: Arc<Auth>,
    /// Read use cases in progress at most (see [`Service::with_read_limit`]).
    reads: Arc<Semaphore>,
    /// Where git sources are fetched to (see [`crate::git`]).
    git_cache: std::path::PathBuf,
    /// One git operation at a time on `git_cache`.
    git_lock: Arc<tokio::sync::Mutex<()>>,
    /// What `/metrics` shows: counted here, where the events happen.
    metrics: Arc<Metrics>,
}

/// Read use cases (list, detail, table, positions, derive) in progress at once by default:
/// half of the Postgres pool's 16 connections, so however many reads arrive, the worker
/// protocol (leases, heartbeats, uploads) always finds a connection.
pub const DEFAULT_MAX_READS: usize = 8;

/// How long a read over the bound waits for a turn before it is answered 503 with
/// `Retry-After`.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// Finished sweeps whose tables are kept; past it the cache starts over.
const MAX_CACHED_TABLES: usize = 256;

/// Rows of a positions page when the caller names no page size, and the most it may name.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// See [`DEFAULT_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 5000;

impl Service {
    /// A service over `store` with these engines, suites and lease settings.
    pub fn new(store: Arc<dyn Store>, catalog: Arc<Catalog>, leases: LeaseSettings) -> Self {
        Self {
            store,
            catalog: Arc::new(RwLock::new(catalog)),
            engine_writes: Arc::default(),
            leases,
            tables: Arc::default(),
            auth: Arc::new(Auth::new(false)),
            reads: Arc::new(Semaphore::new(DEFAULT_MAX_READS)),
            git_cache: crate::git::default_cache_dir(),
            git_lock: Arc::default(),
            metrics: Arc::default(),
        }
    }

    /// The same service fetching git sources into `dir` (default: `sweep-git` in the temp
    /// directory).
    pub fn with_git_cache(mut self, dir: std::path::PathBuf) -> Self {
        self.git_cache = dir;
        self
    }

    /// The same service with at most `max_reads` read use cases in progress at once (at least
    /// one); the rest wait up to [`READ_WAIT`], then fail with [`ServiceError::Busy`].
    pub fn with_read_limit(mut self, max_reads: usize) -> Self {
        self.reads = Arc::new(Semaphore::new(max_reads.max(1)));
        self
    }

    /// A turn for one read use case, held while it uses the database.
    async fn read_turn(&self) -> Result<SemaphorePermit<'_>, ServiceError> {
        match tokio::time::timeout(READ_WAIT, self.reads.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Timed out, or (never: it is not closed) the semaphore was closed.
            _ => Err(ServiceError::Busy),
        }
    }

    /// The same service, letting anonymous callers read sweeps, tables, engines and suites
    /// when `public_read` (writes always need a token).
    pub fn with_public_read(mut self, public_read: bool) -> Self {
        self.auth = Arc::new(Auth::new(public_read));
        self
    }

    /// The caller a request's bearer token (or its absence) makes;
    /// [`ServiceError::Unauthenticated`] for an unknown or revoked token.
    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, ServiceError> {
        self.auth.authenticate(self.store.as_ref(), bearer).await
    }

    /// Checks that `caller` may do what `need` says: for an adapter to answer 401 or 403
    /// before it parses a request's input. The use case checks again (the same pure check), so
    /// this is never what keeps a caller out.
    pub(crate) fn authorize(&self, caller: &Caller, need: Need) -> Result<(), ServiceError> {
        self.auth.require(caller, need).map(|_| ())
    }

    /// The engines and suites as they are now. A use case takes one snapshot and keeps it, so
    /// an engine added meanwhile never mixes two definitions into one answer.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().expect("catalog lock").clone()
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), ServiceError> {
        Ok(self.store.ping().await?)
    }

    /// Sweeps, newest first (at most `limit`, capped at 1,000).
    pub async fn list(
        &self,
        caller: &Caller,
        limit: u32,
    ) -> Result<Vec<SweepSummary>, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        Ok(self.store.list_sweeps(limit.min(1000)).await?)
    }

    /// Cancels a sweep: open jobs are closed, workers learn it at their next call. Submitters
    /// cancel their own sweeps, admins any; a finished sweep cannot be cancelled.
    pub async fn cancel(&self, caller: &Caller, id: i64) -> Result<(), ServiceError> {
        let principal = self.auth.require(caller, Need::Submit)?;
        self.auth.spend_write(caller)?;
        let rec = self.store.sweep(id).await?;
        if let Some(p) = principal {
            if p.role != sweep_domain::auth::Role::Admin && rec.submitter_token != Some(p.token_id)
            {
                return Err(ServiceError::Forbidden(format!(
                    "sweep {id} was submitted by {}; only its submitter or an admin may cancel it",
                    rec.summary.submitter.as_deref().unwrap_or("someone else")
                )));
            }
        }
        if rec.summary.state.is_final() {
            return Err(FieldError::new(
                "id",
                format!(
                    "sweep {id} is {}; only a queued or running sweep can be cancelled",
                    rec.summary.state.as_str()
                ),
            )
            .into());
        }
        self.store.cancel_sweep(id).await?;
        self.audit(caller, "cancel", format!("sweep {id}"), rec.summary.name)
            .await?;
        tracing::info!(sweep_id = id, "sweep cancelled");
        Ok(())
    }

    /// `NotFound` unless sweep `id` exists.
    pub async fn exists(&self, caller: &Caller, id: i64) -> Result<(), ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        self.store.sweep(id).await?;
        Ok(())
    }

    /// Validates and stores a sweep; returns its id and job count. An identical sweep (same
    /// engine, source and spec) that is still queued or running is returned instead of a
    /// second copy, flagged `existing`.
    pub async fn submit(
        &self,
        caller: &Caller,
        config: SweepConfig,
    ) -> Result<Submitted, ServiceError> {
        self.auth.require(caller, Need::Submit)?;
        self.auth.spend_write(caller)?;
        let catalog = self.catalog();
        let engine = catalog.engines.get(&config.engine).cloned();
        let declared = config.knobs.clone();
        // The source first (the registered directory, an upload or a git commit), then the
        // spec is validated; an unknown engine is left to validation to name.
        let resolved = match &engine {
            Some(engine) => self.resolve_source(caller, &config, engine).await?,
            None => None,
        };
        // The definition the sweep stores: the registered one as it is now plus the declared
        // knobs (later updates of the engine never reach it).
        let (spec, engine_def) =
            config.validate_with_engine(&catalog.engine_defs(), &catalog.suite_sizes())?;
        // Declared knobs must be in the source that will be built: checked on the archive
        // itself, before the sweep is stored.
        if let (false, Some(engine), Some(resolved)) = (declared.is_empty(), &engine, &resolved) {
            let registered = engine.def.clone();
            let archive = resolved.archive.clone();
            tokio::task::spawn_blocking(move || {
                check_declared_knobs(&registered, &declared, &archive)
            })
            .await
            .context("declared knobs task")??;
        }
        let (source_sha256, origin) = match resolved {
            Some(r) => (Some(r.sha256), r.origin),
            None => (None, Default::default()),
        };
        let sizes = catalog.suite_sizes();
        let new = NewSweep {
            builds: plan::builds(&spec),
            chunks: plan::chunks(&spec, &sizes),
            suite_ids: spec.suites.iter().map(|s| catalog.suites[s].id).collect(),
            engine_def,
            source_sha256,
            origin,
            spec,
            submitter: caller.owner(),
        };
        let created = self.store.create_sweep_unless_running(&new).await?;
        let Created {
            id,
            jobs,
            existing,
            reused,
        } = created;
        if existing {
            tracing::info!(sweep_id = id, name = %new.spec.name, "identical sweep still running: not submitted again");
        } else {
            self.audit(
                caller,
                "submit",
                format!("sweep {id}"),
                new.spec.name.clone(),
            )
            .await?;
            tracing::info!(sweep_id = id, jobs, reused, name = %new.spec.name, "sweep submitted");
        }
        Ok(Submitted {
            id,
            jobs,
            existing,
            reused,
        })
    }

    /// The newest sweep with exactly this config that has not finished, if any: re-running the
    /// same local command continues it instead of starting over.
    pub async fn find_unfinished(&self, config: &SweepConfig) -> Result<Option<i64>, ServiceError> {
        let catalog = self.catalog();
        let spec = config
            .clone()
            .validate(&catalog.engine_defs(), &catalog.suite_sizes())?;
        for summary in self.store.list_sweeps(1000).await? {
            if summary.state.is_final() {
                continue;
            }
            let rec = self.store.sweep(summary.id).await?;
            // With `[source] sha256`, the same spec on other code is another sweep.
            let asked = config.source.as_ref().and_then(|s| s.sha256.as_deref());
            if rec.spec == spec && (asked.is_none() || asked == rec.source_sha256.as_deref()) {
                return Ok(Some(summary.id));
            }
        }
        Ok(None)
    }

    /// Everything about a sweep.
    pub async fn detail(&self, caller: &Caller, id: i64) -> Result<SweepDetail, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        let rec = self.store.sweep(id).await?;
        let mut builds = rec.builds;
        let mut records = self
            .store
            .build_records(id, sweep_domain::wire::MAX_BUILD_RECORDS as u32)
            .await?;
        for b in &mut builds {
            if let Some((list, total)) = records.remove(&b.name) {
                b.records = list;
                b.records_total = total;
            }
        }
        Ok(SweepDetail {
            progress: self.store.progress(id).await?,
            active_workers: self.store.active_workers(id).await?,
            active_builds: self.store.active_builds(id).await?,
            errors: self.store.position_errors(id, 100).await?,
            cross_checks: self
                .store
                .cross_checks(id, sweep_domain::crosscheck::MAX_LISTED)
                .await?,
            summary: rec.summary,
            spec: rec.spec,
            source_sha256: rec.source_sha256.unwrap_or_default(),
            builds,
        })
    }

    /// The delta table of a sweep.
    pub async fn table(&self, caller: &Caller, id: i64) -> Result<Arc<Table>, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        if let Some(t) = self.tables.lock().expect("table cache lock").get(&id) {
            return Ok(t.clone());
        }
        let _turn = self.read_turn().await?;
        let rec = self.store.sweep(id).await?;
        let sums = self.store.table_sums(id, &rec.spec.baseline.name).await?;
        let (builds, suites, sizes) = plan_of(&rec);
        let mut table = table::build_table(TableInput {
            knobs: &rec.spec.knobs,
            builds: &builds,
            limits: &rec.spec.limits,
            suites: &suites,
            suite_sizes: &sizes,
            sums: &sums,
            counters: &rec.spec.counters,
        });
        table.source = provenance(&rec);
        table.suite_sha256 = rec.suite_sha256.clone();
        // Cross-checks per row: a handful of counts (the checks are a small share).
        let checks = self.store.cross_checks(id, 0).await?;
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
        table.sweep = Some(table::TableSweep {
            id: rec.summary.id,
            name: rec.summary.name.clone(),
            engine: rec.summary.engine.clone(),
            submitted_at: rec.summary.created_at,
            sweep_version: env!("CARGO_PKG_VERSION").to_string(),
        });
        // A finished sweep's table can no longer change (a cancelled one can: results of
        // leases held at the cancel still arrive).
        let finished = matches!(
            rec.summary.state,
            SweepState::Done | SweepState::DoneWithErrors | SweepState::Failed
        );
        // Paired statistics need every per-position result: one query per limit, then the
        // bootstrap off the async workers. Only once the sweep has finished, when the table is
        // made once and cached: a running sweep's table stays summed in the database, so
        // polling it never loads all its results (a 226k-result sweep cost 250 MB per read).
        // Counter sums come from the same results, at the same moment (a baseline-only sweep
        // has counters too, and no statistics).
        let names: Vec<String> = builds.iter().map(|b| b.plan.name.clone()).collect();
        if finished {
            for &limit in &rec.spec.limits {
                let results = self.store.build_results(id, &names, limit).await?;
                table = tokio::task::spawn_blocking(move || {
                    table::attach_counters(&mut table, limit, &results);
                    // Seeded by build, limit and suite only (no sweep id): the same results
                    // give the same interval in every sweep, e.g. a rerun or a local run.
                    table::attach_stats(&mut table, limit, &results, "");
                    table
                })
                .await
                .map_err(|e| {
                    ServiceError::Internal(anyhow::Error::new(e).context("table statistics"))
                })?;
            }
        }
        if finished {
            table.curve_flags = table::non_monotonic(&table);
        }
        let table = Arc::new(table);
        if finished {
            let mut cache = self.tables.lock().expect("table cache lock");
            if cache.len() >= MAX_CACHED_TABLES {
                cache.clear();
            }
            cache.insert(id, table.clone());
        }
        Ok(table)
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
    ) -> Result<PositionsReport, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        let rec = self.store.sweep(id).await?;
        let (builds, suites, _) = plan_of(&rec);
        let baseline = rec.spec.baseline.name.clone();
        let limit = self.limit_of(&rec, limit)?;
        let build = match build {
            Some(b) if builds.iter().any(|x| x.plan.name == b) => b.to_string(),
            Some(b) => {
                let names: Vec<&str> = builds.iter().map(|x| x.plan.name.as_str()).collect();
                return Err(ServiceError::Invalid(sweep_domain::FieldError::new(
                    "build",
                    format!(
                        "no build `{b}` in sweep {id} (builds: {})",
                        names.join(", ")
                    ),
                )));
            }
            // Without a build, show the first variant (or the baseline if it is alone).
            None => builds.get(1).unwrap_or(&builds[0]).plan.name.clone(),
        };
        let names = [build.clone(), baseline.clone()];
        let results = self.store.build_results(id, &names, limit).await?;
        let mut report = table::compare_positions(&build, &baseline, limit, &suites, &results)
            .view(view)
            .page(offset, page_size);
        // Only the suites on this page are read (their positions are cached by the store).
        let mut read: HashMap<String, sweep_domain::epd::Suite> = HashMap::new();
        for row in &mut report.rows {
            if !read.contains_key(&row.suite) {
                let suite = self.store.sweep_suite(id, &row.suite).await?;
                read.insert(row.suite.clone(), suite);
            }
            if let Some(p) = read[&row.suite].positions.get(row.index as usize) {
                row.fen.clone_from(&p.fen);
                row.bm.clone_from(&p.bm);
                row.am.clone_from(&p.am);
            }
        }
        Ok(report)
    }

    /// Drops a sweep's cached table.
    fn forget_table(&self, id: i64) {
        self.tables.lock().expect("table cache lock").remove(&id);
    }

    /// `asked` if the sweep has that limit, else its first limit when nothing was asked.
    fn limit_of(&self, rec: &SweepRecord, asked: Option<Limit>) -> Result<Limit, ServiceError> {
        let id = rec.summary.id;
        match asked {
            Some(l) if rec.spec.limits.contains(&l) => Ok(l),
            Some(l) => {
                let known: Vec<String> = rec.spec.limits.iter().map(|l| l.to_string()).collect();
                Err(FieldError::new(
                    "limit",
                    format!(
                        "sweep {id} has no limit `{l}` (limits: {})",
                        known.join(", ")
                    ),
                )
                .into())
            }
            None => rec.spec.limits.first().copied().ok_or_else(|| {
                ServiceError::Internal(anyhow::anyhow!("sweep {id} has no search limit"))
            }),
        }
    }

    /// A sub-suite of one of the sweep's suites, selected by `request.rule` from the results
    /// of `request.build`, as EPD text (see [`derive_suite`]). Refuses an unknown build or
    /// suite, a build that failed to compile, and a sweep whose jobs are not all closed unless
    /// `request.partial`.
    pub async fn derive(
        &self,
        caller: &Caller,
        id: i64,
        request: &DeriveRequest,
    ) -> Result<Derived, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        request.rule.validate()?;
        let rec = self.store.sweep(id).await?;
        let Some(build) = rec.builds.iter().find(|b| b.name == request.build) else {
            let names: Vec<&str> = rec.builds.iter().map(|b| b.name.as_str()).collect();
            return Err(FieldError::new(
                "build",
                format!(
                    "no build `{}` in sweep {id} (builds: {})",
                    request.build,
                    names.join(", ")
                ),
            )
            .into());
        };
        if build.build_error.is_some() {
            return Err(FieldError::new(
                "build",
                format!(
                    "build `{}` failed to compile, so it has no results",
                    build.name
                ),
            )
            .into());
        }
        if !rec.suites.iter().any(|(name, _)| *name == request.suite) {
            let names: Vec<&str> = rec.suites.iter().map(|(n, _)| n.as_str()).collect();
            return Err(FieldError::new(
                "suite",
                format!(
                    "no suite `{}` in sweep {id} (suites: {})",
                    request.suite,
                    names.join(", ")
                ),
            )
            .into());
        }
        // Failed means every job is closed too (the baseline did not build); the requested
        // build compiled, so its results are complete.
        let state = rec.summary.state;
        if !matches!(
            state,
            SweepState::Done | SweepState::DoneWithErrors | SweepState::Failed
        ) && !request.partial
        {
            return Err(FieldError::new(
                "partial",
                format!(
                    "sweep {id} is {}, not finished: wait for it, or derive from the positions \
                     with a result so far with partial (--partial)",
                    state.as_str()
                ),
            )
            .into());
        }
        let limit = self.limit_of(&rec, request.limit)?;
        let suite = self.store.sweep_suite(id, &request.suite).await?;
        let mut results = self.store.results(id).await?;
        results.retain(|r| r.limit == limit);
        let provenance = Provenance {
            sweep_id: id,
            sweep_name: rec.summary.name.clone(),
            sweep_state: state,
            engine: rec.spec.engine.clone(),
            defines: build.defines.clone(),
            limit,
        };
        let derived =
            derive_suite(&suite, &results, request, &provenance).map_err(|e| match e {
                DeriveError::Invalid(field) => ServiceError::Invalid(field),
                other => ServiceError::Internal(anyhow::Error::new(other)),
            })?;
        tracing::info!(
            sweep_id = id,
            build = %request.build,
            suite = %request.suite,
            selected = derived.selected.len(),
            skipped_errors = derived.skipped_errors,
            skipped_missing = derived.skipped_missing,
            "suite derived"
        );
        Ok(derived)
    }
}

type Planned = (
    Vec<TableBuild>,
    Vec<String>,
    std::collections::BTreeMap<String, usize>,
);

fn plan_of(rec: &SweepRecord) -> Planned {
    let builds = rec
        .builds
        .iter()
        .map(|b| TableBuild {
            plan: BuildPlan {
                name: b.name.clone(),
                defines: b.defines.clone(),
                is_baseline: b.is_baseline,
            },
            failed: b.build_error.is_some(),
        })
        .collect();
    let suites = rec.suites.iter().map(|(n, _)| n.clone()).collect();
    let sizes = rec.suites.iter().cloned().collect();
    (builds, suites, sizes)
}

/// A stored sweep's source as shown; `None` for a binary-only engine.
fn provenance(rec: &SweepRecord) -> Option<SourceProvenance> {
    rec.source_sha256.as_ref().map(|sha| SourceProvenance {
        sha256: sha.clone(),
        origin: rec.origin.clone(),
    })
}
