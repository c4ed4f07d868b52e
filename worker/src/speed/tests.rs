//! Speed jobs run for real: minnow built from its source as a job's build is (through the
//! stand-in coordinator), and fake engines that fail on demand.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sweep_domain::epd::parse_suite;
use sweep_domain::limit::Limit;
use sweep_domain::wire::{BuildSpec, JobLease, JobPosition, SpeedLease, SpeedReport};
use sweep_testkit::stand_in::{serve, Shared};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::run_speed_job;
use crate::allow::{BuildPrograms, EngineBinaries};
use crate::build::BuildCache;
use crate::client::CoordinatorClient;
use crate::leases::{HeldLeases, LeaseKey};
use crate::provenance::BuildRecorder;
use crate::report::{Upload, UploadMsg};
use crate::runner::{JobEnv, RunOutcome};
use crate::sandbox::{Sandbox, SandboxMode};
use crate::source::SourceStore;
use crate::stop::{JobStop, StopReason};
use crate::test_support::build_spec;

const MINNOW_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../engines/minnow");

/// minnow's sources as a snapshot, with its sha256.
pub(crate) fn minnow_snapshot() -> (Vec<u8>, String) {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    let mut names: Vec<String> = std::fs::read_dir(MINNOW_SRC)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n == "Makefile" || n.ends_with(".c") || n.ends_with(".h"))
        .collect();
    names.sort();
    for n in names {
        b.append_path_with_name(Path::new(MINNOW_SRC).join(&n), &n)
            .unwrap();
    }
    let bytes = b.into_inner().unwrap().finish().unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

/// minnow from the snapshot `sha`, as a sweep's build.
pub(crate) fn minnow(sha: &str) -> BuildSpec {
    let mut spec = build_spec(&[
        "make",
        "-s",
        "-C",
        "{source}",
        "DEFINES={defines}",
        "OUT={out}",
    ]);
    spec.name = "minnow".into();
    spec.engine = "minnow".into();
    spec.source_sha256 = sha.into();
    spec.binary = "minnow".into();
    spec.build_timeout_secs = 120;
    spec.position_timeout_secs = 60;
    spec.init_timeout_secs = 10;
    spec.options = vec![("Hash".into(), "16".into())];
    spec
}

/// The first `n` positions of the WAC suite.
pub(crate) fn wac(n: usize) -> Vec<JobPosition> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../suites/wac.epd");
    let suite = parse_suite("wac", &std::fs::read_to_string(path).unwrap()).unwrap();
    let positions = suite.positions.iter().take(n).enumerate();
    positions
        .map(|(i, p)| JobPosition::of(i as u32, p))
        .collect()
}

/// A speed job timing `build` against `baseline`.
pub(crate) fn speed_job(
    build: BuildSpec,
    baseline: BuildSpec,
    positions: Vec<JobPosition>,
    depth: u32,
    repeats: u32,
) -> (JobLease, SpeedLease) {
    let speed = SpeedLease { baseline, repeats };
    let lease = JobLease {
        job_id: 5,
        attempt: 2,
        sweep_id: 3,
        build,
        suite: "wac".into(),
        limit: Limit::Depth(depth),
        positions,
        cross_check: false,
        speed: Some(speed.clone()),
    };
    (lease, speed)
}

/// A worker's job environment under `cache`, talking to the stand-in at `url`, allowing the
/// engine binaries `binaries`.
pub(crate) fn env(cache: &Path, url: &str, sandbox: Sandbox, binaries: Vec<String>) -> JobEnv {
    let programs = BuildPrograms::new(["make".to_string()]);
    JobEnv {
        client: CoordinatorClient::new(url, Duration::from_secs(10)).unwrap(),
        worker_id: 7,
        host: "test-host".into(),
        sources: SourceStore::new(cache),
        builds: BuildCache::new(cache)
            .with_programs(programs)
            .with_sandbox(sandbox.clone()),
        engine_binaries: EngineBinaries::new(binaries),
        option_checks: Default::default(),
        held: Arc::new(HeldLeases::default()),
        records: BuildRecorder::new("test-host", &sandbox),
        sandbox,
    }
}

/// What a run of the speed job `lease` ended with, and the report it handed over (if any).
async fn run(
    env: &JobEnv,
    lease: JobLease,
    speed: SpeedLease,
    stop: Arc<JobStop>,
) -> (RunOutcome, Option<SpeedReport>) {
    let (tx, mut rx) = mpsc::channel(4);
    let key = LeaseKey {
        job_id: lease.job_id,
        attempt: lease.attempt,
    };
    env.held.insert(key, stop.clone());
    let outcome = run_speed_job(env, lease, speed, stop, &tx).await;
    drop(tx);
    let mut report = None;
    while let Some(UploadMsg { key: k, what, .. }) = rx.recv().await {
        assert_eq!(k, key);
        match what {
            Upload::Speed(r) => report = Some(r),
            other => panic!("a speed job sends its report only, not {other:?}"),
        }
    }
    (outcome, report)
}

/// The stand-in coordinator serving minnow's snapshot; its URL and the snapshot's sha256.
pub(crate) async fn coordinator() -> (Shared, String, String) {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    state.lock().unwrap().source = bytes;
    let url = serve(state.clone()).await;
    (state, url, sha)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_minnow_against_itself() {
    let (state, url, sha) = coordinator().await;
    let cache = tempfile::tempdir().unwrap();
    // The real sandbox where bubblewrap works here: its CPU time must reach the worker.
    let sandbox = Sandbox::resolve(SandboxMode::Auto, &[]).unwrap();
    let env = env(cache.path(), &url, sandbox, vec![]);
    let (lease, speed) = speed_job(minnow(&sha), minnow(&sha), wac(6), 5, 3);
    let stop = JobStop::new(&CancellationToken::new());
    let (outcome, report) = run(&env, lease, speed, stop).await;
    assert_eq!(outcome, RunOutcome::Finished);
    let report = report.expect("a report");
    assert_eq!(report.error, None, "{report:?}");
    assert_eq!(report.problem(3), None, "{report:?}");
    let repeats: Vec<u32> = report.runs.iter().map(|r| r.repeat).collect();
    assert_eq!(repeats, [0, 1, 2]);
    let nodes = report.runs[0].base.nodes;
    assert!(nodes > 0);
    for run in &report.runs {
        // minnow is deterministic, and both sides are the same build.
        assert_eq!(
            (run.base.nodes, run.test.nodes),
            (nodes, nodes),
            "{report:?}"
        );
        for side in [run.base, run.test] {
            assert!(side.cpu_us > 0 && side.wall_us > 0, "{side:?}");
            // The engine's own time is counted, not only the sandbox's: a search is all CPU
            // (bubblewrap's own, without the engine's, is under a tenth of the wall time).
            assert!(side.cpu_us * 4 >= side.wall_us, "{side:?}");
        }
    }
    // The same nodes a job of the build reports.
    let binary = env.builds.binary_path(&minnow(&sha));
    let settings = crate::EngineSettings::with_options(minnow(&sha).options);
    let direct = crate::run_positions_direct(&binary, settings, &wac(6), Limit::Depth(5)).await;
    assert_eq!(direct.iter().map(|r| r.nodes).sum::<u64>(), nodes);
    assert!(state.lock().unwrap().build_failures.is_empty());
}

/// `n` positions on which the fake engines' move (e2e4) is legal.
pub(crate) fn openings(n: u32) -> Vec<JobPosition> {
    let position = |index| JobPosition {
        index,
        id: format!("start{index}"),
        fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".into(),
        bm: vec![],
        am: vec![],
    };
    (0..n).map(position).collect()
}

/// A fake UCI engine (`tests/fixtures/uci_common.sh`) that counts its starts in `dir` and,
/// from start `crash_from` on, crashes on every search.
fn flaky_engine(dir: &Path, crash_from: u32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let common = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/uci_common.sh");
    let starts = dir.join("starts");
    let script = format!(
        "#!/bin/sh\nn=$(cat '{s}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{s}'\n\
         . '{common}'\npoisoned() {{ exit 3; }}\n\
         if [ $n -ge {crash_from} ]; then POISON=''; fi\nuci_loop\n",
        s = starts.display()
    );
    let path = dir.join("flaky.sh");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[tokio::test]
async fn a_failing_run_ends_the_report_with_the_pairs_before_it() {
    let (_state, url, _) = coordinator().await;
    let cache = tempfile::tempdir().unwrap();
    // Start 4 is the second pair's baseline run (baseline, variant, then variant, baseline).
    let engine = flaky_engine(cache.path(), 4);
    let env = env(cache.path(), &url, Sandbox::Off, vec![engine.clone()]);
    let mut spec = build_spec(&[]);
    spec.binary_path = Some(engine);
    let (lease, speed) = speed_job(spec.clone(), spec, openings(3), 1, 3);
    let stop = JobStop::new(&CancellationToken::new());
    let (outcome, report) = run(&env, lease, speed, stop).await;
    assert_eq!(outcome, RunOutcome::Finished);
    let report = report.expect("a report");
    assert_eq!(report.runs.len(), 1, "{report:?}");
    assert_eq!(report.runs[0].repeat, 0);
    assert_eq!(
        (report.runs[0].base.nodes, report.runs[0].test.nodes),
        (3 * 42, 3 * 42)
    );
    let error = report.error.as_deref().unwrap();
    assert!(
        error.starts_with("repeat 1, baseline run: position"),
        "{error}"
    );
    assert_eq!(report.problem(3), None, "a report cut short says why");
}

#[tokio::test]
async fn a_baseline_that_does_not_build_is_the_reports_error() {
    let (state, url, sha) = coordinator().await;
    let cache = tempfile::tempdir().unwrap();
    let engine = flaky_engine(cache.path(), u32::MAX);
    let env = env(cache.path(), &url, Sandbox::Off, vec![engine.clone()]);
    let mut variant = build_spec(&[]);
    variant.binary_path = Some(engine);
    let mut baseline = minnow(&sha);
    baseline.build_command = [
        "make",
        "-s",
        "-C",
        "{source}",
        "no-such-target",
        "OUT={out}",
    ]
    .map(String::from)
    .to_vec();
    let (lease, speed) = speed_job(variant, baseline, openings(2), 1, 2);
    let stop = JobStop::new(&CancellationToken::new());
    let (outcome, report) = run(&env, lease, speed, stop).await;
    assert_eq!(outcome, RunOutcome::Finished);
    let report = report.expect("a report");
    assert!(report.runs.is_empty());
    let error = report.error.as_deref().unwrap();
    assert!(
        error.starts_with("the baseline build `minnow` failed"),
        "{error}"
    );
    assert!(error.contains("no-such-target"), "{error}");
    // Not a failure of the job's build, which is the variant's.
    assert!(state.lock().unwrap().build_failures.is_empty());
}

#[tokio::test]
async fn a_variant_that_does_not_build_fails_its_build() {
    let (state, url, sha) = coordinator().await;
    let cache = tempfile::tempdir().unwrap();
    let env = env(cache.path(), &url, Sandbox::Off, vec![]);
    let mut variant = minnow(&sha);
    variant.build_command = [
        "make",
        "-s",
        "-C",
        "{source}",
        "no-such-target",
        "OUT={out}",
    ]
    .map(String::from)
    .to_vec();
    let (lease, speed) = speed_job(variant, minnow(&sha), wac(2), 1, 2);
    let stop = JobStop::new(&CancellationToken::new());
    let (outcome, report) = run(&env, lease, speed, stop).await;
    assert_eq!((outcome, report), (RunOutcome::BuildFailed, None));
    let failures = state.lock().unwrap().build_failures.clone();
    assert_eq!(failures.len(), 1);
    assert!(
        failures[0].0 == 5 && failures[0].1.contains("no-such-target"),
        "{failures:?}"
    );
}

#[tokio::test]
async fn a_lost_lease_stops_the_runs_and_reports_nothing() {
    let (_state, url, sha) = coordinator().await;
    let cache = tempfile::tempdir().unwrap();
    let env = env(cache.path(), &url, Sandbox::Off, vec![]);
    // The opening position at depth 40 runs for ages: only the stop ends it.
    let (lease, speed) = speed_job(minnow(&sha), minnow(&sha), openings(1), 40, 2);
    let stop = JobStop::new(&CancellationToken::new());
    let stopper = {
        let stop = stop.clone();
        let binary = env.builds.binary_path(&minnow(&sha));
        tokio::spawn(async move {
            // Once built (the first run then starts), and a moment into the search.
            while !binary.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            stop.stop(StopReason::LeaseLost);
            Instant::now()
        })
    };
    let (outcome, report) = run(&env, lease, speed, stop).await;
    let stopped_at = stopper.await.unwrap();
    assert_eq!(
        (outcome, report),
        (RunOutcome::Stopped(StopReason::LeaseLost), None)
    );
    assert!(stopped_at.elapsed() < Duration::from_secs(5));
    assert!(env.held.is_empty(), "a stopped job is no longer held");
}
