//! The whole worker (register, lease, source, build, run, upload, heartbeat, shutdown) against
//! a stand-in coordinator (`sweep_testkit::stand_in`) that can fail uploads, cancel sweeps and
//! take leases away.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};
use sweep_domain::limit::Limit;

use sha2::{Digest, Sha256};
use sweep_domain::wire::*;
use sweep_testkit::stand_in::{serve, Shared};
use sweep_worker::sandbox::SandboxMode;
use sweep_worker::{EngineSettings, Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

/// minnow's source as the coordinator would snapshot it: its C sources and Makefile.
fn minnow_snapshot() -> (Vec<u8>, String) {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let src = Path::new(common::MINNOW_SRC);
    let mut names: Vec<_> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n == "Makefile" || n.ends_with(".c") || n.ends_with(".h"))
        .collect();
    names.sort();
    for n in names {
        b.append_path_with_name(src.join(&n), &n).unwrap();
    }
    let bytes = b.into_inner().unwrap().finish().unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

fn job(
    job_id: i64,
    sha: &str,
    defines: &[(&str, i64)],
    positions: Vec<JobPosition>,
    depth: u32,
) -> JobLease {
    let mut build = common::minnow_spec(defines);
    build.source_sha256 = sha.to_string();
    JobLease {
        job_id,
        attempt: 1,
        sweep_id: 3,
        build,
        suite: "wac".into(),
        limit: Limit::Depth(depth),
        positions,
        cross_check: false,
        speed: None,
    }
}

fn config(url: &str, cache: &Path, cores: usize) -> WorkerConfig {
    let mut c = WorkerConfig::new(url, cache);
    c.cores = cores;
    c.poll_interval = Duration::from_millis(100);
    c.poll_interval_max = Duration::from_millis(200);
    c.upload_batch_max = 4;
    c.upload_interval = Duration::from_millis(100);
    // The stand-in's "builds" copy fake engines from outside their tree, and those run
    // fixtures beside this file: the sandbox would hide both (it is tested with real
    // builds in tests/hostile_sandbox.rs and the end-to-end tests).
    c.sandbox = SandboxMode::Off;
    c
}

/// Writes an executable script in `dir` that runs the fixture `name` from where it lies;
/// returns its path.
fn launcher(dir: &Path, name: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let target = common::fixture(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", target.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_jobs_and_retries_uploads() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    let positions = common::wac(10);
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        s.fail_uploads = 2;
        s.queue
            .push_back(job(1, &sha, &[], positions[..6].to_vec(), 4));
        s.queue.push_back(job(
            2,
            &sha,
            &[("NULLMOVE_R_BASE", 1)],
            positions[6..].to_vec(),
            4,
        ));
        let mut broken = job(3, &sha, &[], positions[..2].to_vec(), 4);
        broken.build.build_command = [
            "make",
            "-s",
            "-C",
            "{source}",
            "no-such-target",
            "OUT={out}",
        ]
        .map(String::from)
        .to_vec();
        s.queue.push_back(broken);
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(config(&url, cache.path(), 2)).run(shutdown.clone()));

    wait_for("jobs to finish", Duration::from_secs(20), || {
        let s = state.lock().unwrap();
        s.finished.len() == 2 && s.build_failures.len() == 1
    })
    .await;
    shutdown.cancel();
    let t = Instant::now();
    worker.await.unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    let s = state.lock().unwrap();
    assert_eq!(s.source_gets, 1, "one download shared by both slots");
    assert!(s.upload_calls >= 4, "the 503s were retried");
    // One lease loop for both slots: it asks for as many jobs as slots are free.
    assert_eq!(s.lease_asks[0], 2, "{:?}", s.lease_asks);
    assert!(s.lease_asks.iter().all(|&n| (1..=2).contains(&n)));
    assert_eq!(s.build_failures[0].0, 3);
    assert!(
        s.build_failures[0].1.contains("no-such-target"),
        "{}",
        s.build_failures[0].1
    );
    // The worker's numbers equal a direct run of the same binaries.
    let binary = |d: &[(&str, i64)]| {
        let mut spec = common::minnow_spec(d);
        spec.source_sha256 = sha.clone();
        sweep_worker::build::BuildCache::new(cache.path()).binary_path(&spec)
    };
    let settings = || EngineSettings::with_options(common::minnow_spec(&[]).options);
    for (job_id, bin, ps) in [
        (1, binary(&[]), &positions[..6]),
        (2, binary(&[("NULLMOVE_R_BASE", 1)]), &positions[6..]),
    ] {
        let got: Vec<_> = s.results[&job_id].values().cloned().collect();
        assert_eq!(got.len(), ps.len());
        let rt = tokio::runtime::Handle::current();
        let direct = tokio::task::block_in_place(|| {
            rt.block_on(sweep_worker::run_positions_direct(
                &bin,
                settings(),
                ps,
                Limit::Depth(4),
            ))
        });
        for (g, d) in got.iter().zip(&direct) {
            assert_eq!(
                (g.index, g.nodes, &g.bestmove, g.solved),
                (d.index, d.nodes, &d.bestmove, d.solved)
            );
            assert!(g.error.is_none());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_lease_loss_stop_jobs_quickly() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    // The opening position at depth 40 runs for ages (no quick mate to cut it short): only a
    // stop can end these jobs.
    let deep: Vec<JobPosition> = (0..3)
        .map(|i| JobPosition {
            index: i,
            id: format!("start{i}"),
            fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".into(),
            bm: vec![],
            am: vec![],
        })
        .collect();
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        s.queue.push_back(job(1, &sha, &[], deep.clone(), 40));
        s.queue.push_back(job(2, &sha, &[], deep.clone(), 40));
        s.queue.push_back(job(3, &sha, &[], common::wac(2), 3));
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(config(&url, cache.path(), 1)).run(shutdown.clone()));

    wait_for("job 1 to start", Duration::from_secs(15), || {
        state.lock().unwrap().queue.len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    state.lock().unwrap().cancelled.push(1);
    // Generous bounds (a loaded CI machine is slow): a depth-40 search left running would
    // take hours, so any of these proves the stop reached the engine.
    wait_for(
        "job 2 to start after the cancel",
        Duration::from_secs(30),
        || state.lock().unwrap().queue.len() == 1,
    )
    .await;
    state.lock().unwrap().lost.push(2);
    wait_for(
        "job 3 to finish after the lease loss",
        Duration::from_secs(30),
        || state.lock().unwrap().finished == vec![3],
    )
    .await;

    shutdown.cancel();
    worker.await.unwrap().unwrap();
    let s = state.lock().unwrap();
    assert!(
        !s.results.contains_key(&2),
        "results of a lost lease are dropped"
    );
    assert!(s.heartbeats >= 2);
    // The cancelled job's results stop at the cancel: nothing of it is closed.
    assert!(!s.finished.contains(&1) && !s.finished.contains(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_delivers_finished_results_and_returns() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    let start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
    let poison = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";
    let launchers = tempfile::tempdir().unwrap();
    let ps: Vec<JobPosition> = [start, start, poison]
        .iter()
        .enumerate()
        .map(|(i, fen)| JobPosition {
            index: i as u32,
            id: format!("p{i}"),
            fen: fen.to_string(),
            bm: vec![],
            am: vec![],
        })
        .collect();
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        // The "build" installs the hanging fake engine: two quick answers, then a hang. It
        // installs a launcher, since the fixture finds the file it sources next to itself.
        let mut j = job(1, &sha, &[], ps, 4);
        j.build.build_command = vec![
            "cp".into(),
            launcher(launchers.path(), "hang.sh"),
            "{out}".into(),
        ];
        s.queue.push_back(j);
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let mut cfg = config(&url, cache.path(), 1);
    // The "build" is a `cp`, which a worker runs only when told it may.
    cfg.build_programs.push("cp".into());
    // Nothing is uploaded before the shutdown forces it.
    cfg.upload_interval = Duration::from_secs(60);
    cfg.upload_batch_max = 100;
    let worker = tokio::spawn(Worker::new(cfg).run(shutdown.clone()));
    wait_for("the job to start", Duration::from_secs(15), || {
        state.lock().unwrap().queue.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(state.lock().unwrap().upload_calls, 0);
    shutdown.cancel();
    let t = Instant::now();
    worker.await.unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let s = state.lock().unwrap();
    assert_eq!(
        s.results[&1].len(),
        2,
        "the two computed results were delivered"
    );
    assert!(s.finished.is_empty(), "an interrupted job is not closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_a_lease_call_gives_its_jobs_back() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        // The coordinator answers the lease only after the shutdown began: the jobs it
        // leases then must be given back, not dropped with the answer (stranded until
        // their lease expires).
        s.lease_delay = Duration::from_millis(1500);
        s.queue.push_back(job(1, &sha, &[], common::wac(2), 3));
        s.queue.push_back(job(2, &sha, &[], common::wac(2), 3));
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(config(&url, cache.path(), 1)).run(shutdown.clone()));
    wait_for("the first lease call", Duration::from_secs(15), || {
        !state.lock().unwrap().lease_asks.is_empty()
    })
    .await;
    shutdown.cancel();
    let t = Instant::now();
    worker.await.unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let s = state.lock().unwrap();
    let leased: Vec<i64> = (1..=2)
        .filter(|id| !s.queue.iter().any(|j| j.job_id == *id))
        .collect();
    assert!(!leased.is_empty(), "the lease call answered with jobs");
    let mut released = s.released.clone();
    released.sort_unstable();
    assert_eq!(released, leased, "every leased job was given back");
    assert!(s.finished.is_empty() && s.results.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_upload_and_one_heartbeat_serve_every_slot() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    let positions = common::wac(6);
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        s.queue
            .push_back(job(1, &sha, &[], positions[..3].to_vec(), 3));
        s.queue
            .push_back(job(2, &sha, &[], positions[3..].to_vec(), 3));
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let mut cfg = config(&url, cache.path(), 2);
    // Both slots finish well within one interval, so one upload carries both jobs.
    cfg.upload_interval = Duration::from_secs(3);
    cfg.upload_batch_max = 100;
    let t = Instant::now();
    let worker = tokio::spawn(Worker::new(cfg).run(shutdown.clone()));
    wait_for("both jobs to finish", Duration::from_secs(20), || {
        state.lock().unwrap().finished.len() == 2
    })
    .await;
    let elapsed = t.elapsed();
    shutdown.cancel();
    worker.await.unwrap().unwrap();
    let s = state.lock().unwrap();
    assert_eq!(s.upload_jobs, [2], "one upload for both jobs");
    assert_eq!(s.results[&1].len() + s.results[&2].len(), 6);
    assert_eq!(s.lease_asks[0], 2);
    // One heartbeat per second for the worker, not one per job.
    assert!(
        u128::from(s.heartbeats) <= elapsed.as_millis() / 1000 + 1,
        "{} heartbeats in {elapsed:?}",
        s.heartbeats
    );
}

/// A binary-only engine's jobs: nothing is downloaded or built, the given binary runs with the
/// variant's option; a binary missing on this machine fails the build naming path and host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_only_jobs_run_the_given_binary_or_fail_naming_it() {
    let prebuilt = tempfile::tempdir().unwrap();
    let minnow = common::build_minnow(prebuilt.path()).await;
    let positions = common::wac(3);
    let binary_job = |job_id: i64, path: &str| {
        let mut lease = job(job_id, "", &[], positions.clone(), 3);
        lease.build.binary_path = Some(path.to_string());
        lease.build.build_command.clear();
        lease.build.options.push(("Hash".into(), "32".into()));
        lease.build.checked_options = vec!["Hash".into()];
        lease
    };
    let state: Shared = Default::default();
    {
        let mut s = state.lock().unwrap();
        s.queue.push_back(binary_job(1, minnow.to_str().unwrap()));
        s.queue
            .push_back(binary_job(2, "/nonexistent/engines/fish"));
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let mut c = config(&url, cache.path(), 1);
    c.host = "box7".into();
    // Both are allowed here: the second fails for being missing, not for being refused.
    c.engine_binaries = vec![
        minnow.to_str().unwrap().to_string(),
        "/nonexistent/engines/fish".to_string(),
    ];
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(c).run(shutdown.clone()));
    wait_for("both jobs", Duration::from_secs(20), || {
        let s = state.lock().unwrap();
        s.finished.len() == 1 && s.build_failures.len() == 1
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap().unwrap();

    let mut options = common::minnow_spec(&[]).options;
    options.push(("Hash".into(), "32".into()));
    let want = sweep_worker::run_positions_direct(
        &minnow,
        EngineSettings::with_options(options),
        &positions,
        Limit::Depth(3),
    )
    .await;
    let s = state.lock().unwrap();
    assert_eq!(s.source_gets, 0, "nothing to download");
    assert!(
        !cache.path().join("builds").exists(),
        "nothing built into the cache"
    );
    assert_eq!(s.finished, [1]);
    let got: Vec<_> = s.results[&1].values().cloned().collect();
    let nodes = |rs: &[PositionResult]| rs.iter().map(|r| r.nodes).collect::<Vec<_>>();
    assert_eq!(nodes(&got), nodes(&want));
    assert!(got.iter().all(|r| r.error.is_none()), "{got:?}");
    let (job_id, output) = &s.build_failures[0];
    assert_eq!(*job_id, 2);
    assert!(
        output.contains("/nonexistent/engines/fish") && output.contains("box7"),
        "{output}"
    );
}

/// When each thing the stand-in saw first happened.
#[derive(Debug, Default)]
struct Seen {
    /// The job's close, by job id.
    finished: std::collections::BTreeMap<i64, Instant>,
    /// Each lease call, in order.
    asks: Vec<Instant>,
}

/// Watches `state` every few milliseconds until `done` says it has seen enough.
async fn watch(state: &Shared, done: impl Fn(&Seen) -> bool) -> Seen {
    let mut seen = Seen::default();
    let t = Instant::now();
    while !done(&seen) {
        assert!(t.elapsed() < Duration::from_secs(60), "timed out: {seen:?}");
        {
            let s = state.lock().unwrap();
            for &job_id in &s.finished {
                seen.finished.entry(job_id).or_insert_with(Instant::now);
            }
            while seen.asks.len() < s.lease_asks.len() {
                seen.asks.push(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speed_job_runs_alone() {
    let (bytes, sha) = minnow_snapshot();
    let state: Shared = Default::default();
    {
        let mut s = state.lock().unwrap();
        s.source = bytes;
        // A long job, then a speed job, leased together (two slots, no prefetch), then a
        // short job.
        s.queue.push_back(job(1, &sha, &[], common::wac(6), 7));
        let mut speed = job(2, &sha, &[], common::wac(4), 5);
        speed.speed = Some(SpeedLease {
            baseline: speed.build.clone(),
            repeats: 6,
        });
        s.queue.push_back(speed);
        s.queue.push_back(job(3, &sha, &[], common::wac(2), 3));
    }
    let url = serve(state.clone()).await;
    let cache = tempfile::tempdir().unwrap();
    let mut c = config(&url, cache.path(), 2);
    // Idle asks far apart, uploads at once: an ask seen is one the worker chose to make.
    c.poll_interval = Duration::from_millis(500);
    c.poll_interval_max = Duration::from_millis(500);
    c.upload_interval = Duration::from_millis(10);
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(c).run(shutdown.clone()));
    let seen = watch(&state, |seen| seen.finished.len() == 3).await;
    shutdown.cancel();
    worker.await.unwrap().unwrap();

    let s = state.lock().unwrap();
    // The speed job waited for the long job, though its own runs are far shorter, and the
    // next job came after it.
    assert_eq!(s.finished, [1, 2, 3]);
    assert_eq!(s.lease_asks[0], 2, "{:?}", s.lease_asks);
    assert!(
        s.results.get(&2).is_none_or(|r| r.is_empty()),
        "a speed job has no position results"
    );
    assert_eq!(s.results[&3].len(), 2);
    // No lease call while the speed job waited or ran: the second came as it ended, not
    // when the long job did.
    let (long_done, speed_done) = (seen.finished[&1], seen.finished[&2]);
    let ran = speed_done - long_done;
    assert!(ran > Duration::from_millis(100), "{ran:?}");
    assert!(seen.asks[1] > long_done + ran / 2, "{seen:?}");
}
