//! The Postgres lease path at the scale of a real queue: a sweep of over 250,000 jobs is
//! accepted, and the protocol's statements (lease, heartbeat, upload) are planned with
//! indexes on it, never with a scan or a sort of `jobs` (or `results`). Plans, not timings:
//! a fast machine cannot make these pass, a missing index makes them fail. Also: a lease that
//! fails part-way leaves no job leased.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::PgPool;
use support::{registration, Database, PgDb};
use sweep_coordinator::store::postgres::{statements as sql, PgStore};
use sweep_coordinator::store::{BackendCalls, Store};
use sweep_domain::limit::Limit;
use sweep_domain::spec::SweepSpec;
use sweep_domain::table::sums_of;
use sweep_domain::wire::{HeldLease, JobReport, PositionResult};

/// Positions of the generated suite; with 256 values plus the baseline at chunk 1 the sweep
/// has 257 x 1,000 = 257,000 jobs.
const POSITIONS: usize = 1_000;
const VALUES: i64 = 256;

fn big_spec() -> SweepSpec {
    let values: Vec<i64> = (1..=VALUES).collect();
    SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        suites: vec!["big".into()],
        ..support::spec("seed scale", &values, 1)
    }
}

/// Creates the 257,000-job sweep; returns (sweep id, jobs, seconds taken by the store).
async fn big_sweep(store: &PgStore) -> (i64, u64, f64) {
    let suite = support::generated_suite("big", POSITIONS);
    let started = Instant::now();
    let (id, jobs) = support::create_sweep_of(store, big_spec(), &suite).await;
    (id, jobs, started.elapsed().as_secs_f64())
}

/// Every plan node, depth first.
fn nodes(plan: &Value, out: &mut Vec<Value>) {
    out.push(plan.clone());
    if let Some(children) = plan.get("Plans").and_then(Value::as_array) {
        for c in children {
            nodes(c, out);
        }
    }
}

/// Whether a plan subtree reads `jobs` or `results` with more than `rows` estimated rows.
fn reads_big(plan: &Value, rows: f64) -> bool {
    let mut all = Vec::new();
    nodes(plan, &mut all);
    all.iter().any(|n| {
        matches!(n["Relation Name"].as_str(), Some("jobs" | "results"))
            && n["Plan Rows"].as_f64().unwrap_or(0.0) > rows
    })
}

/// Fails when the plan scans `jobs` or `results` sequentially, or sorts more than a call's
/// worth of their rows.
fn assert_indexed(name: &str, plan: &Value) {
    let root = &plan[0]["Plan"];
    let mut all = Vec::new();
    nodes(root, &mut all);
    for n in &all {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        let rel = n["Relation Name"].as_str().unwrap_or_default();
        assert!(
            !(kind == "Seq Scan" && (rel == "jobs" || rel == "results")),
            "{name}: sequential scan of {rel}:\n{plan:#}"
        );
        if kind == "Sort" || kind == "Incremental Sort" {
            assert!(
                !reads_big(n, 1_000.0),
                "{name}: sorts a large part of jobs/results:\n{plan:#}"
            );
        }
    }
}

type PgQuery = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// `EXPLAIN (FORMAT JSON)` of a statement with the parameters `bind` gives it (a custom
/// plan for those values, as the statement gets when it runs).
async fn plan(pool: &PgPool, statement: &str, bind: impl FnOnce(PgQuery) -> PgQuery) -> Value {
    let text: &'static str =
        Box::leak(format!("EXPLAIN (FORMAT JSON) {statement}").into_boxed_str());
    let row = bind(sqlx::query(text)).fetch_one(pool).await.unwrap();
    sqlx::Row::get::<Value, _>(&row, 0)
}

/// The parameters each statement of the worker protocol takes, by name (see
/// `queue/statements.rs` and `store/postgres/statements.rs`), for planning it.
struct Args {
    ids: Vec<i64>,
    builds: Vec<i64>,
    leases: Vec<i64>,
    worker: i64,
    sweep: i64,
    now: chrono::DateTime<chrono::Utc>,
}

impl Args {
    fn bind(&self, name: &str, q: PgQuery) -> PgQuery {
        let (ids, now, w) = (self.ids.clone(), self.now, self.worker);
        match name {
            "take_requeued" | "take_requeued_by" | "head_builds" | "head_builds_by" => {
                q.bind(64i64).bind(w)
            }
            "head_builds_of" => q.bind(64i64).bind(w).bind(self.sweep),
            "sweeps_with_work" | "sweeps_with_checks" | "sweeps_with_speed" | "speed_waiting" => q,
            "pick_speed" => q.bind(w),
            "pick_speed_of" => q.bind(w).bind(self.sweep),
            "requeue" | "renew" | "touch" => q.bind(ids).bind(now),
            "takeable_builds" => q.bind(self.builds.clone()).bind(w),
            "delete_cursors" => q.bind(self.builds.clone()),
            "LOCK_CURSORS" => {
                let n = self.builds.len();
                q.bind(self.builds.clone()).bind(vec![8i64; n])
            }
            "leases" | "delete_leases" => q.bind(self.leases.clone()),
            "expired" => q.bind(now).bind(256i64),
            "particular_workers" => q.bind(vec![w]),
            "mark_started" => q.bind(vec![self.sweep]),
            "mark_sweep_originals_stored" => q.bind(self.sweep),
            "pick_checks" => q.bind(w).bind(8i64).bind(now),
            "pick_checks_of" => q.bind(w).bind(8i64).bind(now).bind(self.sweep),
            "set_check_state" => q.bind(ids).bind("done"),
            "JOBS_AFTER" => {
                let n = self.builds.len();
                q.bind(self.builds.clone())
                    .bind(vec![0i64; n])
                    .bind(vec![i64::MAX; n])
                    .bind(vec![8i64; n])
            }
            "SET_CURSORS" => {
                let n = self.builds.len();
                q.bind(self.builds.clone())
                    .bind(vec![1i64; n])
                    .bind(vec![1i64; n])
            }
            "INSERT_LEASES" => q
                .bind(vec![w])
                .bind(vec![format!("{{{}}}", ids[0])])
                .bind(vec![now]),
            "SET_LEASES" => q
                .bind(self.leases.clone())
                .bind(vec![1i64; self.leases.len()])
                .bind(vec![now; self.leases.len()]),
            "INSERT_RESULTS" | "INSERT_CHECKS" => {
                // $1-$15 (worker .. error), as both inserts bind them.
                let q = q
                    .bind(vec![w])
                    .bind(vec![1i64])
                    .bind(vec![1i64])
                    .bind(vec![0i32])
                    .bind(vec![6i32])
                    .bind(vec![0i64])
                    .bind(vec![self.sweep])
                    .bind(vec![ids[0]])
                    .bind(vec![1i64])
                    .bind(vec!["p0".to_string()])
                    .bind(vec![1i64])
                    .bind(vec!["e2e4".to_string()])
                    .bind(vec![6i32])
                    .bind(vec![1i64])
                    .bind(vec![None::<String>]);
                if name == "INSERT_RESULTS" {
                    q.bind(vec![true])
                        .bind(vec![None::<i32>])
                        .bind(vec![None::<i32>])
                        .bind(vec![Some(r#"{"null_skipped": 3}"#.to_string())])
                } else {
                    q
                }
            }
            // jobs, requeue_checks, measured_positions, measured_counts,
            // mark_originals_stored.
            _ => q.bind(ids),
        }
    }
}

#[tokio::test]
async fn a_257k_job_sweep_is_accepted_and_protocol_statements_use_indexes() {
    let db = PgDb::new().await;
    let store = PgStore::connect(&db.url).await.unwrap();
    let queue = Database::from(store.clone()).queue;
    let (sweep_id, jobs, secs) = big_sweep(&store).await;
    assert_eq!(jobs, 257_000);
    eprintln!("created a {jobs}-job sweep in {secs:.2} s");
    let pool = store.pool().clone();
    // The shape the filer measured: a long-running service with most of a queue done. The
    // first 100,000 jobs have their results (in statements of 5,000, the size of a big
    // upload; each is summed by a trigger), and the cursors have moved past them.
    let cut: i64 = sqlx::query_scalar("SELECT min(id) + 100000 FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    for part in 0..20 {
        sqlx::query(
            "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                                  attempt, worker_id, position_id, nodes, bestmove, solved,
                                  reached_depth, time_ms, error)
             SELECT build_id, suite_id, first_index, depth, sweep_id, id, 1, 0, 'p',
                    1 + CASE WHEN first_index % 5 = 1 THEN first_index ELSE 0 END, 'e2e4',
                    first_index % 5 <> 1, 6, 1,
                    CASE WHEN first_index % 7 = 3 THEN 'crashed' END
             FROM jobs WHERE id < $2 AND id % 20 = $1",
        )
        .bind(part)
        .bind(cut)
        .execute(&pool)
        .await
        .unwrap();
    }
    sqlx::query("DELETE FROM build_queue")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
         SELECT build_id, sweep_id, min(id), max(id), count(*) FROM jobs
         WHERE kind = 'work' AND id >= $1 GROUP BY build_id, sweep_id",
    )
    .bind(cut)
    .execute(&pool)
    .await
    .unwrap();
    // Cross-checks of 2 % of the positions, queued after all the work as a submit plans
    // them (one position each): the work picks never see them, and the check pick must
    // find them by its own index.
    sqlx::query(
        "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth, nodes_limit, kind)
         SELECT sweep_id, build_id, suite_id, first_index, 1, depth, nodes_limit, 'check'
         FROM jobs WHERE id % 50 = 0 ORDER BY id",
    )
    .execute(&pool)
    .await
    .unwrap();
    // Those whose original is stored (the first 100,000 jobs') are marked takeable, by the
    // statement a submit that copies earlier results runs.
    let (_, mark) = sweep_coordinator::queue::statements::on_postgres()
        .into_iter()
        .find(|(n, _)| *n == "mark_sweep_originals_stored")
        .unwrap();
    let marked = sqlx::query(&mark)
        .bind(sweep_id)
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(marked, 2_000, "the checks of the first 100,000 jobs");
    let worker = store
        .register_worker(&registration("w", 8), None)
        .await
        .unwrap();
    let leases = queue
        .lease_jobs(worker, 8, Duration::from_secs(600), 3)
        .await
        .unwrap();
    assert_eq!(leases.len(), 8);
    assert!(leases.iter().all(|l| l.sweep_id == sweep_id));
    assert!(
        leases.iter().all(|l| l.job_id >= cut),
        "the cursors hand out the jobs past the done ones"
    );
    // 10,000 leases held (as by 10,000 workers), a second worker's lease open, and a few
    // jobs waiting to be handed out again: none of these tables is empty when planned.
    sqlx::query(
        "INSERT INTO leases (worker_id, jobs, expires_at)
         SELECT 0, ARRAY[id], now() + interval '1 hour' FROM jobs
         WHERE id >= $1 AND id < $1 + 10000",
    )
    .bind(cut + 100_000)
    .execute(&pool)
    .await
    .unwrap();
    let other = store
        .register_worker(&registration("v", 8), None)
        .await
        .unwrap();
    let open = queue
        .lease_jobs(other, 8, Duration::from_secs(600), 3)
        .await
        .unwrap();
    assert_eq!(open.len(), 8);
    sqlx::query(
        "INSERT INTO requeued (job_id, sweep_id, build_id, since)
         SELECT id, sweep_id, build_id, now() FROM jobs WHERE id >= $1 AND id % 7 = 0",
    )
    .bind(cut + 50_000)
    .execute(&pool)
    .await
    .unwrap();
    // Some results of the protocol itself.
    let reports: Vec<JobReport> = leases
        .iter()
        .map(|l| JobReport {
            job_id: l.job_id,
            attempt: l.attempt,
            results: l
                .positions
                .iter()
                .map(|p| PositionResult {
                    counters: Default::default(),
                    index: p.index,
                    nodes: 1000,
                    bestmove: "e2e4".into(),
                    solved: true,
                    score_cp: Some(20),
                    score_mate: None,
                    depth: 6,
                    time_ms: 1,
                    error: None,
                })
                .collect(),
            finished: true,
            speed: None,
        })
        .collect();
    let outcomes = queue
        .report_many(worker, reports.into(), Duration::from_secs(600), 3)
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| o.accepted == 1));
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();

    let args = Args {
        ids: open.iter().map(|l| l.job_id).collect(),
        builds: sqlx::query_scalar(
            "SELECT build_id FROM build_queue WHERE sweep_id = $1 ORDER BY build_id LIMIT 3",
        )
        .bind(sweep_id)
        .fetch_all(&pool)
        .await
        .unwrap(),
        leases: open.iter().map(|l| l.attempt).take(1).collect(),
        worker,
        sweep: sweep_id,
        // Time comes from the store's clock, bound like every other value.
        now: chrono::Utc::now(),
    };
    let mut statements = sweep_coordinator::queue::statements::on_postgres();
    statements.extend(
        [
            ("LOCK_CURSORS", sql::LOCK_CURSORS.as_str()),
            ("JOBS_AFTER", sql::JOBS_AFTER.as_str()),
            ("SET_CURSORS", sql::SET_CURSORS),
            ("INSERT_LEASES", sql::INSERT_LEASES),
            ("SET_LEASES", sql::SET_LEASES),
            ("INSERT_RESULTS", sql::INSERT_RESULTS),
            ("INSERT_CHECKS", sql::INSERT_CHECKS),
        ]
        .map(|(n, s)| (n, s.to_string())),
    );
    let mut plans = Vec::new();
    for (name, text) in &statements {
        let p = plan(&pool, text, |q| args.bind(name, q)).await;
        assert_indexed(name, &p);
        plans.push((*name, p.to_string()));
    }
    let uses = |name: &str, index: &str| {
        let (_, p) = plans.iter().find(|(n, _)| *n == name).unwrap();
        assert!(p.contains(index), "{name} does not use {index}:\n{p}");
    };
    // The cursors walk a build's range of job ids; expired leases and jobs to hand out again
    // are each read in index order; checks by their own index. (The head of the queue is
    // read from `build_queue`, a row per build of the sweeps not finished: a few hundred.)
    uses("LOCK_CURSORS", "jobs_pkey");
    uses("JOBS_AFTER", "jobs_pkey");
    uses("expired", "leases_expiry");
    uses("take_requeued", "requeued_since");
    uses("pick_checks", "jobs_check_ready");
    // The checks ready are walked in id order and the walk stops at the last one taken:
    // nothing joined to them is hashed or sorted (with 2,000 ready here). The statement
    // writes what it picked, found again by the primary key.
    let (_, p) = plans.iter().find(|(n, _)| *n == "pick_checks").unwrap();
    let p: Value = serde_json::from_str(p).unwrap();
    assert_eq!(p[0]["Plan"]["Operation"], "Update", "pick_checks:\n{p:#}");
    let mut all = Vec::new();
    nodes(&p[0]["Plan"], &mut all);
    let mut walk = all
        .iter()
        .find(|n| n["Node Type"] == "Limit")
        .unwrap_or_else(|| panic!("pick_checks has no limit:\n{p:#}"));
    for step in ["Limit", "LockRows"] {
        assert_eq!(walk["Node Type"], step, "pick_checks:\n{p:#}");
        walk = &walk["Plans"][0];
    }
    assert_eq!(
        walk["Index Name"], "jobs_check_ready",
        "pick_checks:\n{p:#}"
    );
    uses("pick_checks", "jobs_pkey");
    uses("mark_originals_stored", "jobs_check_waiting");
    // A check's original is probed by the primary key, one check at a time, never joined:
    // Postgres planned the join of the first version as a hash of all of `results` on every
    // pick once `results` was large (a nested loop here, on this data).
    for name in [
        "pick_checks",
        "mark_originals_stored",
        "mark_sweep_originals_stored",
    ] {
        let (_, p) = plans.iter().find(|(n, _)| *n == name).unwrap();
        let p: Value = serde_json::from_str(p).unwrap();
        let mut all = Vec::new();
        nodes(&p[0]["Plan"], &mut all);
        let probes: Vec<&Value> = all
            .iter()
            .filter(|n| n["Relation Name"] == "results")
            .collect();
        assert!(!probes.is_empty(), "{name} reads no original:\n{p:#}");
        for n in probes {
            assert!(
                n["Index Name"] == "results_pkey"
                    && n["Parent Relationship"] == "SubPlan"
                    && n["Plan Rows"].as_f64().unwrap_or(f64::MAX) <= 1.0,
                "{name} reads results other than by one probe of its primary key:\n{p:#}"
            );
        }
    }

    // The table's sums, kept by Postgres over 100k results inserted in 20 statements, equal
    // the sums computed from the results themselves, errors and unsolved positions included.
    let started = Instant::now();
    let in_db = store.table_sums(sweep_id).await.unwrap();
    eprintln!("table sums of 100k results in {:?}", started.elapsed());
    let rows = store.results(sweep_id).await.unwrap();
    assert_eq!(rows.len(), 100_008);
    assert_eq!(in_db, sums_of(&rows, "head_reference"));
    // The two builds a positions page compares, selected by the database, are those rows.
    let pair = ["head_reference".to_string(), format!("{}=1", support::KNOB)];
    let picked = store
        .build_results(sweep_id, &pair, Limit::Depth(6))
        .await
        .unwrap();
    let mut expected: Vec<_> = rows
        .iter()
        .filter(|r| pair.contains(&r.build))
        .cloned()
        .collect();
    expected.sort_by(|a, b| {
        (a.build != pair[0], &a.suite, a.index).cmp(&(b.build != pair[0], &b.suite, b.index))
    });
    assert!(!picked.is_empty());
    assert_eq!(picked, expected);
    assert!(in_db
        .values()
        .any(|s| s.errors > 0 && s.compared > 0 && s.compared < s.done));
}

/// A lease is one transaction: when anything after its picks fails (here: the suite's
/// stored positions cannot be decoded), no lease row is left and no cursor has moved, so no
/// job is stranded and nothing waits for a lease to expire. (The lease of the first version
/// updated the jobs in a statement of its own and stranded them.)
#[tokio::test]
async fn a_lease_that_fails_after_its_update_leaves_no_job_leased() {
    let db = PgDb::new().await;
    let store = PgStore::connect(&db.url).await.unwrap();
    let (_, jobs) = support::create_sweep(&store, "strand", &[1, 2], 1).await;
    assert_eq!(jobs, 15);
    let pool = store.pool().clone();
    let cursors = || {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (i64, i64, i64)>(
                "SELECT build_id, next_job, remaining FROM build_queue ORDER BY build_id",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let before = cursors().await;
    assert_eq!(before.len(), 3);
    sqlx::query("UPDATE suites SET positions = '{\"not\": \"positions\"}'")
        .execute(&pool)
        .await
        .unwrap();
    // A queue that has not cached the suite yet (as after a coordinator restart).
    let fresh = Database::from(PgStore::connect(&db.url).await.unwrap());
    let worker = fresh
        .store
        .register_worker(&registration("w", 1), None)
        .await
        .unwrap();
    let failed = fresh
        .queue
        .lease_jobs(worker, 8, Duration::from_secs(600), 3)
        .await;
    assert!(failed.is_err(), "the lease should fail: {failed:?}");
    let leases: i64 = sqlx::query_scalar("SELECT count(*) FROM leases")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(leases, 0, "a failed lease left a lease row");
    assert_eq!(cursors().await, before, "a failed lease moved a cursor");
    // And a heartbeat of jobs the worker never got renews nothing.
    let beats = fresh
        .queue
        .heartbeat_many(
            worker,
            &[HeldLease {
                job_id: 1,
                attempt: 1,
            }],
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    assert_eq!(beats[0].status, sweep_domain::wire::LeaseStatus::Lost);
}

/// Lease calls arriving together are served together (one claim for many calls): under 64
/// concurrent calls every job goes to exactly one worker, every worker gets at most what it
/// asked for, and the leases are real (the holder's heartbeat renews them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_lease_calls_share_claims_and_never_share_jobs() {
    let db = PgDb::new().await;
    let store = std::sync::Arc::new(PgStore::connect(&db.url).await.unwrap());
    let queue = Database::from(PgStore::clone(&store)).queue;
    // 40 values x 5 positions, chunk 1: 205 jobs.
    let values: Vec<i64> = (1..=40).collect();
    let (_, jobs) = support::create_sweep(&*store, "crowd", &values, 1).await;
    assert_eq!(jobs, 205);
    let mut workers = Vec::new();
    for n in 0..64 {
        let id = store
            .register_worker(&registration(format!("w{n}"), 4), None)
            .await
            .unwrap();
        workers.push(id);
    }
    let calls: Vec<_> = workers
        .iter()
        .map(|&w| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let leases = queue
                    .lease_jobs(w, 4, Duration::from_secs(600), 3)
                    .await
                    .unwrap();
                (w, leases)
            })
        })
        .collect();
    let mut held = std::collections::BTreeMap::new();
    let mut per_worker = Vec::new();
    for call in calls {
        let (w, leases) = call.await.unwrap();
        per_worker.push(leases.len());
        for l in leases {
            let before = held.insert(l.job_id, (w, l.attempt));
            assert!(before.is_none(), "job {} leased twice", l.job_id);
        }
    }
    // 64 x 4 = 256 asked, 205 there: all leased, nobody over its ask.
    assert_eq!(held.len(), 205);
    assert!(per_worker.iter().all(|&n| n <= 4));
    // The lease rows say the same: each job in one row, of the worker it went to.
    let in_db: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT u.job, l.worker_id, l.id FROM leases l, unnest(l.jobs) AS u(job) ORDER BY u.job",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(in_db.len(), 205);
    for (id, w, attempt) in in_db {
        assert_eq!(held[&id], (w, attempt));
    }
    for &w in &workers {
        let mine: Vec<HeldLease> = held
            .iter()
            .filter(|(_, (holder, _))| *holder == w)
            .map(|(&job_id, &(_, attempt))| HeldLease { job_id, attempt })
            .collect();
        let beats = queue
            .heartbeat_many(w, &mine, Duration::from_secs(600))
            .await
            .unwrap();
        assert!(beats
            .iter()
            .all(|b| b.status == sweep_domain::wire::LeaseStatus::Held));
    }
}

/// A heartbeat writes only the leases due for renewal (less than two thirds left): a fresh
/// lease is left as it is, a lease near its end is renewed to a full one, and a lease taken
/// back and handed to another worker since is not renewed for the old holder.
#[tokio::test]
async fn heartbeats_renew_only_leases_that_are_due() {
    let db = PgDb::new().await;
    let store = PgStore::connect(&db.url).await.unwrap();
    let queue = Database::from(store.clone()).queue;
    support::create_sweep(&store, "beats", &[1], 5).await;
    let a = support::worker(&store, "a").await;
    let long = Duration::from_secs(600);
    let mut leases = Vec::new();
    for _ in 0..2 {
        leases.extend(queue.lease_jobs(a, 1, long, 3).await.unwrap());
    }
    assert_eq!(leases.len(), 2);
    let held = support::held(&leases);
    let (first, second) = (held[0].attempt, held[1].attempt);
    assert_ne!(first, second, "two lease calls, two lease rows");
    let row = |id: i64| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_as::<_, (chrono::DateTime<chrono::Utc>, f64)>(
                "SELECT expires_at, extract(epoch FROM expires_at - now())::float8
                 FROM leases WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let before = row(first).await.0;
    // The second lease is near its end.
    sqlx::query("UPDATE leases SET expires_at = now() + interval '10 seconds' WHERE id = $1")
        .bind(second)
        .execute(store.pool())
        .await
        .unwrap();
    let beats = queue.heartbeat_many(a, &held, long).await.unwrap();
    assert!(beats
        .iter()
        .all(|b| b.status == sweep_domain::wire::LeaseStatus::Held));
    assert_eq!(row(first).await.0, before, "a fresh lease is not written");
    assert!(
        row(second).await.1 > 590.0,
        "a lease near its end is renewed in full"
    );
    // Expired and taken by b: a's heartbeat must not renew it for a.
    sqlx::query("UPDATE leases SET expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(second)
        .execute(store.pool())
        .await
        .unwrap();
    let b = support::worker(&store, "b").await;
    // Claims look for expired leases at most every 250 ms of the store's clock: b's claim,
    // a second on, does.
    store.clock().advance(Duration::from_secs(1));
    let taken = queue.lease_jobs(b, 1, long, 3).await.unwrap();
    assert_eq!(taken[0].job_id, held[1].job_id);
    let beats = queue.heartbeat_many(a, &held[1..], long).await.unwrap();
    assert_eq!(beats[0].status, sweep_domain::wire::LeaseStatus::Lost);
}

/// The sums trigger pairs each new result with the baseline's at its position by one probe
/// of `results_pkey` on all four of its columns, whatever the statistics were when the
/// trigger's statement was planned: on a connection first used while `results` was empty (a
/// new database), a later insert of 8 results into 34,000 reads a few pages of the index per
/// result. Counted in pages the insert's transaction read (`pg_stat_get_xact_blocks_fetched`),
/// not in time. Written as a join of `builds` and `results` (as 0017 wrote it), the lookup
/// scanned the index by its last three columns per new result: 441 pages for these 8 (53
/// now), growing with the table.
#[tokio::test]
async fn sums_trigger_probes_by_key() {
    const MID: usize = 2_000;
    let db = PgDb::new().await;
    let store = PgStore::connect(&db.url).await.unwrap();
    let suite = support::generated_suite("mid", MID);
    let values: Vec<i64> = (1..=16).collect();
    let spec = SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        suites: vec!["mid".into()],
        ..support::spec("probe", &values, 1)
    };
    let (sweep_id, jobs) = support::create_sweep_of(&store, spec, &suite).await;
    assert_eq!(jobs, 17 * MID as u64);
    let pool = store.pool().clone();
    // Results of work jobs, one per job, some of them errors and some unsolved.
    const INSERT: &str = "
        INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                             attempt, worker_id, position_id, nodes, bestmove, solved,
                             reached_depth, time_ms, error)
        SELECT build_id, suite_id, first_index, depth, sweep_id, id, 1, 0, 'p',
               1 + first_index, 'e2e4', first_index % 5 <> 1, 6, 1,
               CASE WHEN first_index % 7 = 3 THEN 'crashed' END
        FROM jobs WHERE kind = 'work' AND id = ANY($1)";
    // Two sets of 8 jobs of a build that is not the baseline, kept for the connection below.
    let kept: Vec<i64> = sqlx::query_scalar(
        "SELECT j.id FROM jobs j JOIN builds b ON b.id = j.build_id
         WHERE j.sweep_id = $1 AND j.kind = 'work' AND NOT b.is_baseline
         ORDER BY j.id DESC LIMIT 16",
    )
    .bind(sweep_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
        .await
        .unwrap();
    // Plans the trigger's statement on this connection while `results` is empty.
    sqlx::query(INSERT)
        .bind(&kept[..8])
        .execute(&mut conn)
        .await
        .unwrap();
    // Every other job's result, 5,000 or so per statement, through other connections.
    let rest: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE sweep_id = $1 AND kind = 'work' AND NOT id = ANY($2)
         ORDER BY id",
    )
    .bind(sweep_id)
    .bind(&kept)
    .fetch_all(&pool)
    .await
    .unwrap();
    for part in rest.chunks(5_000) {
        sqlx::query(INSERT).bind(part).execute(&pool).await.unwrap();
    }
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    sqlx::query(INSERT)
        .bind(&kept[8..])
        .execute(&mut *tx)
        .await
        .unwrap();
    let pages: i64 =
        sqlx::query_scalar("SELECT pg_stat_get_xact_blocks_fetched('results_pkey'::regclass)")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    eprintln!("an insert of 8 results read {pages} pages of results_pkey");
    // Inserting 8 entries and probing 8 keys: a few pages each (the index is 3 levels deep).
    assert!(
        pages < 8 * 12,
        "an insert of 8 results read {pages} pages of results_pkey"
    );
    // And the sums are still right.
    let rows = store.results(sweep_id).await.unwrap();
    assert_eq!(rows.len(), 17 * MID);
    assert_eq!(
        store.table_sums(sweep_id).await.unwrap(),
        sums_of(&rows, "head_reference")
    );
}

/// The worker protocol's transactions begin with their settings in the same simple query as
/// `BEGIN` (one round trip): inside, no sequential scans (and a claim's commit does not wait
/// for the disk); the settings are local, so the connection goes back to the pool as it was.
#[tokio::test]
async fn protocol_transactions_begin_with_their_settings() {
    let db = PgDb::new().await;
    let opts: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .unwrap();
    const SETTINGS: &str =
        "SELECT current_setting('enable_seqscan'), current_setting('synchronous_commit')";
    let outside: (String, String) = sqlx::query_as(SETTINGS).fetch_one(&pool).await.unwrap();
    assert_eq!(outside.0, "on", "the server's default");
    for (begin, sync) in [
        (sql::HOT_BEGIN, outside.1.as_str()),
        (sql::CLAIM_BEGIN, "off"),
    ] {
        let mut tx = pool.begin_with(begin).await.unwrap();
        let inside: (String, String) = sqlx::query_as(SETTINGS).fetch_one(&mut *tx).await.unwrap();
        assert_eq!(
            (inside.0.as_str(), inside.1.as_str()),
            ("off", sync),
            "{begin}"
        );
        tx.commit().await.unwrap();
        // The pool's one connection, after the transaction.
        let after: (String, String) = sqlx::query_as(SETTINGS).fetch_one(&pool).await.unwrap();
        assert_eq!(after, outside, "{begin}");
    }
}
