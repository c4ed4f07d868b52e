//! Support for the storage conformance suite: a fresh database per test for each backend,
//! and a tiny sweep to put in it.
#![allow(dead_code, unused_macros)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sweep_coordinator::database;
#[allow(unused_imports)]
pub use sweep_coordinator::database::Database;
#[allow(unused_imports)]
pub use sweep_coordinator::queue::WorkerQueue;
use sweep_coordinator::store::{NewSweep, Store, StoreError, StoreResult};
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{parse_suite, Suite};
use sweep_domain::limit::Limit;
use sweep_domain::plan;
use sweep_domain::spec::{BaselineConfig, SweepSpec, Variant};
use sweep_domain::wire::{
    BatchAck, HeldLease, JobLease, JobReport, LeaseStatus, PositionResult, RegisterWorker,
    SweepSummary,
};

mod steps;
#[allow(unused_imports)]
pub use steps::*;

/// Generates `postgres::<case>` and `sqlite::<case>` tests for every case function
/// `async fn case(db: Database)` of the calling test file (which imports [`Backend`]).
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod postgres {
            $(
                // Several worker threads, so concurrent store calls really run in parallel.
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = super::Backend::postgres().await;
                    super::$case(backend.db.clone()).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = super::Backend::sqlite().await;
                    super::$case(backend.db.clone()).await;
                }
            )*
        }
    };
}

/// Five positions covering the "solved" rule: castling both ways (bm), a plain bm, a position
/// with only an avoid move, and a black-to-move one. UCI: e1g1, g3g6, e2e4, am e1c1, e8c8.
pub const SUITE: &str = "\
4k3/8/8/8/8/8/8/4K2R w K - bm O-O; id \"castle\";
2rr3k/pp3pp1/1nnqbN1p/3pN3/2pP4/2P3Q1/PPB4P/R4RK1 w - - bm Qg6; id \"WAC.001\";
4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; id \"pawn\";
4k3/8/8/8/8/8/8/R3K3 w Q - am O-O-O; id \"avoid\";
r3k3/8/8/8/8/8/8/4K3 b q - bm O-O-O; id \"black\";
";

/// The best (or a harmless) move of each suite position, by index.
pub const GOOD_MOVES: [&str; 5] = ["e1g1", "g3g6", "e2e4", "a1a2", "e8c8"];

/// An engine definition with one knob (the domain crate's test definition of minnow).
pub const ENGINE: &str = sweep_domain::engine::fixtures::MINNOW;

/// A binary-only engine with one option knob.
pub const BINARY_ENGINE: &str = r#"
name = "fish"
protocol = "uci"
binary = "/opt/engines/fish"
options = { Threads = 1 }
[[knobs]]
name = "Hash"
kind = "option"
min = 1
max = 1024
default = 16
"#;

/// The swept knob.
pub const KNOB: &str = "NULLMOVE_R_BASE";
/// Hash of the stored source snapshot every sweep points at.
pub const SNAPSHOT: &str = "5eed";
/// Search depth of the test sweeps.
pub const DEPTH: u32 = 6;
/// A lease long enough never to expire during a test.
pub const LONG: Duration = Duration::from_secs(600);
/// A lease that tests let expire by moving the store's clock past it (`store.clock().advance`),
/// never by sleeping: long enough that no machine is slow enough to let it run out by itself
/// during a case, short enough that a few advances past it leave [`LONG`] leases live.
pub const SHORT: Duration = Duration::from_secs(10);
/// How often a position or build is tried before it fails for good (the coordinator's
/// default).
pub const MAX_ATTEMPTS: u32 = 3;

/// A database under test, with whatever keeps it alive (and removes it afterwards).
pub struct Backend {
    /// The store and the worker queue over it.
    pub db: Database,
    /// The store (as `db.store`).
    pub store: Arc<dyn Store>,
    /// What [`database::connect`] opened: a Postgres URL or a SQLite file's path (for tests that
    /// read the database's own catalogue).
    pub url: String,
    _db: Db,
}

enum Db {
    Postgres(PgDb),
    Sqlite(tempfile::TempDir),
}

impl Backend {
    /// A store on a fresh Postgres database `sweep_conf_<random>`, opened through
    /// [`database::connect`] so the URL dispatch is exercised too.
    pub async fn postgres() -> Self {
        let db = PgDb::new().await;
        let opened = database::connect(&db.url)
            .await
            .expect("opening the Postgres store");
        Self {
            store: opened.store.clone(),
            db: opened,
            url: db.url.clone(),
            _db: Db::Postgres(db),
        }
    }

    /// A store on a new SQLite file in a temporary directory, opened by plain path through
    /// [`database::connect`].
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("sweep.db");
        let url = path.to_str().expect("UTF-8 temp path").to_string();
        let opened = database::connect(&url)
            .await
            .expect("opening the SQLite store");
        Self {
            store: opened.store.clone(),
            db: opened,
            url,
            _db: Db::Sqlite(dir),
        }
    }
}

/// A Postgres database that exists for one test (dropped with this value).
pub use sweep_testkit::TestDb as PgDb;

/// The parsed test suite.
pub fn suite() -> Suite {
    parse_suite("tiny", SUITE).expect("test suite parses")
}

/// A suite of `n` positions named `name`, all the same position (ids `p0`, `p1`, ...): for
/// sweeps of many jobs.
pub fn generated_suite(name: &str, n: usize) -> Suite {
    let epd: String = (0..n)
        .map(|i| format!("4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; id \"p{i}\";\n"))
        .collect();
    parse_suite(name, &epd).expect("generated suite parses")
}

/// The parsed engine definition.
pub fn engine() -> EngineDef {
    EngineDef::from_toml(ENGINE).expect("test engine parses")
}

/// A spec sweeping [`KNOB`] over `values` on the tiny suite.
pub fn spec(name: &str, values: &[i64], chunk_size: u32) -> SweepSpec {
    SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        counters: Vec::new(),
        recompute: false,
        // Off: the cases here count jobs; cross-check cases turn them on.
        cross_check: sweep_domain::crosscheck::Share(0.0),
        cross_check_min: 0,
        name: name.to_string(),
        engine: "minnow".into(),
        knobs: vec![KNOB.into()],
        variants: values
            .iter()
            .map(|v| Variant {
                name: format!("{KNOB}={v}"),
                defines: BTreeMap::from([(KNOB.to_string(), *v)]),
                source: None,
            })
            .collect(),
        suites: vec!["tiny".into()],
        limits: vec![Limit::Depth(DEPTH)],
        chunk_size,
        baseline: BaselineConfig::default(),
        description: String::new(),
        stages: Vec::new(),
    }
}

/// Stores the snapshot and suite and creates a sweep of `values` in chunks of `chunk_size`
/// (jobs = (values + 1) x ceil(5 / chunk_size)); returns (sweep id, jobs).
pub async fn create_sweep(
    store: &dyn Store,
    name: &str,
    values: &[i64],
    chunk_size: u32,
) -> (i64, u64) {
    create_sweep_of(store, spec(name, values, chunk_size), &suite()).await
}

/// Stores the snapshot and `suite` and creates a sweep of `spec` (whose one suite is
/// `suite`); returns (sweep id, jobs).
pub async fn create_sweep_of(store: &dyn Store, spec: SweepSpec, suite: &Suite) -> (i64, u64) {
    let sweep = new_sweep(store, spec, suite).await;
    create(store, &sweep).await
}

/// Writes `sweep`, which must be new (no identical sweep queued or running); returns (sweep
/// id, jobs).
pub async fn create(store: &dyn Store, sweep: &NewSweep) -> (i64, u64) {
    let created = store
        .create_sweep_unless_running(sweep)
        .await
        .expect("create_sweep_unless_running");
    assert!(!created.existing, "an identical sweep is still running");
    (created.id, created.jobs)
}

/// Stores the snapshot and `suite` and plans `spec` (whose one suite is `suite`) into the
/// sweep the coordinator would write.
pub async fn new_sweep(store: &dyn Store, spec: SweepSpec, suite: &Suite) -> NewSweep {
    store
        .put_snapshot(SNAPSHOT, b"archive")
        .await
        .expect("put_snapshot");
    let suite_id = store.put_suite(suite).await.expect("put_suite");
    let sizes = BTreeMap::from([(suite.name.clone(), suite.positions.len())]);
    NewSweep {
        submitter: None,
        builds: plan::builds(&spec),
        chunks: plan::chunks(&spec, &sizes),
        spec,
        engine_def: engine(),
        source_sha256: Some(SNAPSHOT.into()),
        origin: Default::default(),
        suite_ids: vec![suite_id],
        hold: None,
        search: None,
    }
}

/// Creates a sweep of [`BINARY_ENGINE`] over `Hash` values in chunks of `chunk_size`; no
/// snapshot, as the coordinator does for a binary-only engine. Returns (sweep id, jobs).
pub async fn create_binary_sweep(
    store: &dyn Store,
    name: &str,
    values: &[i64],
    chunk_size: u32,
) -> (i64, u64) {
    let suite = suite();
    let suite_id = store.put_suite(&suite).await.expect("put_suite");
    let spec = SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        engine: "fish".into(),
        knobs: vec!["Hash".into()],
        variants: values
            .iter()
            .map(|v| Variant {
                name: format!("Hash={v}"),
                defines: BTreeMap::from([("Hash".to_string(), *v)]),
                source: None,
            })
            .collect(),
        ..spec(name, values, chunk_size)
    };
    let sizes = BTreeMap::from([("tiny".to_string(), suite.positions.len())]);
    let sweep = NewSweep {
        submitter: None,
        builds: plan::builds(&spec),
        chunks: plan::chunks(&spec, &sizes),
        spec,
        engine_def: EngineDef::from_toml(BINARY_ENGINE).expect("binary engine parses"),
        source_sha256: None,
        origin: Default::default(),
        suite_ids: vec![suite_id],
        hold: None,
        search: None,
    };
    create(store, &sweep).await
}

/// Registers a worker named `name`.
pub async fn worker(store: &dyn Store, name: &str) -> i64 {
    worker_with_engines(store, name, &[]).await
}

/// Registers a worker named `name` that reports the binary-only `engines`.
pub async fn worker_with_engines(store: &dyn Store, name: &str, engines: &[&str]) -> i64 {
    store
        .register_worker(
            &RegisterWorker {
                name: name.into(),
                host: format!("{name}.local"),
                cores: 2,
                engines: engines.iter().map(|e| e.to_string()).collect(),
            },
            None,
        )
        .await
        .expect("register_worker")
}

/// A registration of worker `name` on host `h` with `cores` cores and no binary-only engines.
pub fn registration(name: impl Into<String>, cores: u32) -> RegisterWorker {
    RegisterWorker {
        name: name.into(),
        host: "h".into(),
        cores,
        engines: vec![],
    }
}

/// A successful result for position `index` with `bestmove`, claiming `solved = false` so
/// that only the store's own verdict can make it solved.
pub fn result(index: u32, bestmove: &str) -> PositionResult {
    PositionResult {
        counters: Default::default(),
        index,
        nodes: 1000 + u64::from(index),
        bestmove: bestmove.into(),
        solved: false,
        score_cp: Some(12),
        score_mate: None,
        depth: DEPTH,
        time_ms: 5,
        error: None,
    }
}

/// A position whose search failed for `error`.
pub fn failed(index: u32, error: &str) -> PositionResult {
    PositionResult {
        counters: Default::default(),
        nodes: 0,
        bestmove: String::new(),
        score_cp: None,
        depth: 0,
        error: Some(error.into()),
        ..result(index, "")
    }
}

/// New results of one job from the worker holding `attempt`: one report of an upload, with
/// the worker named (the tests' shorthand for a one-job [`WorkerQueue::report_many`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultBatch {
    /// Reporting worker.
    pub worker_id: i64,
    /// Attempt the worker holds.
    pub attempt: i64,
    /// Results (may be empty).
    pub results: Vec<PositionResult>,
    /// Every position of the lease is now reported: close the job.
    pub finished: bool,
}

/// A lease renewal for one job: the worker claims to hold `attempt` (the tests' shorthand
/// for a one-job [`WorkerQueue::heartbeat_many`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Worker holding the lease.
    pub worker_id: i64,
    /// Attempt it holds.
    pub attempt: i64,
}

/// The ack of a one-job call's outcome; `Lost` is the error the worker would act on.
fn ack_of(
    outcomes: Vec<sweep_coordinator::queue::JobOutcome>,
    job_id: i64,
    worker_id: i64,
    attempt: i64,
) -> StoreResult<BatchAck> {
    assert_eq!(outcomes.len(), 1, "one outcome per job");
    let outcome = outcomes[0];
    match outcome.status {
        LeaseStatus::Lost => Err(StoreError::LeaseLost {
            job_id,
            worker_id,
            attempt,
        }),
        status => Ok(BatchAck {
            accepted: outcome.accepted,
            duplicates: outcome.duplicates,
            cancelled: status == LeaseStatus::Cancelled,
        }),
    }
}

/// One-job calls many tests are written in, made of the store's many-job calls, which are
/// what production uses: so every case exercises the production path. A `Lost` outcome is
/// returned as [`StoreError::LeaseLost`], so cases can tell it from a stored report. The
/// calls are written once, here, as the trait's own bodies.
#[async_trait]
pub trait OneJob: WorkerQueue {
    /// Stores one job's results ([`WorkerQueue::report_many`] with one report).
    async fn report(
        &self,
        job_id: i64,
        batch: &ResultBatch,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck> {
        let report = JobReport {
            job_id,
            attempt: batch.attempt,
            results: batch.results.clone(),
            finished: batch.finished,
            speed: None,
        };
        let outcomes = self
            .report_many(batch.worker_id, [report].into(), lease, max_attempts)
            .await?;
        ack_of(outcomes, job_id, batch.worker_id, batch.attempt)
    }

    /// Renews one job's lease ([`WorkerQueue::heartbeat_many`] with one lease).
    async fn heartbeat(
        &self,
        job_id: i64,
        beat: &Heartbeat,
        lease: Duration,
    ) -> StoreResult<BatchAck> {
        let held = HeldLease {
            job_id,
            attempt: beat.attempt,
        };
        let outcomes = self.heartbeat_many(beat.worker_id, &[held], lease).await?;
        ack_of(outcomes, job_id, beat.worker_id, beat.attempt)
    }
}

impl OneJob for dyn WorkerQueue {}

/// A batch from the lease holder.
pub fn batch(
    worker_id: i64,
    lease: &JobLease,
    results: Vec<PositionResult>,
    finished: bool,
) -> ResultBatch {
    ResultBatch {
        worker_id,
        attempt: lease.attempt,
        results,
        finished,
    }
}

/// One job's report of a worker upload, at the lease's attempt.
pub fn job_report(lease: &JobLease, results: Vec<PositionResult>, finished: bool) -> JobReport {
    JobReport {
        job_id: lease.job_id,
        attempt: lease.attempt,
        results,
        finished,
        speed: None,
    }
}

/// A result with its good move for every position of the lease.
pub fn good_results(lease: &JobLease) -> Vec<PositionResult> {
    lease
        .positions
        .iter()
        .map(|p| result(p.index, GOOD_MOVES[p.index as usize]))
        .collect()
}

/// A heartbeat from `worker_id` at the lease's attempt.
pub fn beat(worker_id: i64, lease: &JobLease) -> Heartbeat {
    Heartbeat {
        worker_id,
        attempt: lease.attempt,
    }
}

/// The summary of sweep `id`.
pub async fn summary(store: &dyn Store, id: i64) -> SweepSummary {
    store.sweep(id).await.expect("sweep").summary
}

/// Indices of the positions of a lease.
pub fn indices(lease: &JobLease) -> Vec<u32> {
    lease.positions.iter().map(|p| p.index).collect()
}

/// The leases as a heartbeat names them.
pub fn held(leases: &[JobLease]) -> Vec<sweep_domain::wire::HeldLease> {
    leases
        .iter()
        .map(|l| sweep_domain::wire::HeldLease {
            job_id: l.job_id,
            attempt: l.attempt,
        })
        .collect()
}
