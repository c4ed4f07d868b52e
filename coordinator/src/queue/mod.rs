//! The worker queue: the worker protocol's engine (lease calls, heartbeats, leases given
//! back, result uploads, build failures and build records), with what it keeps in memory,
//! written once for both databases over the store's `Backend` (its rows, its SQL dialect
//! and its locking). The store keeps rows and SQL; this module decides who gets which job and
//! when a lease, a position or a build is done. [`WorkerQueue`] is its interface, which the
//! service's worker-protocol part holds; `Queue` implements it over any backend and owns
//! the in-memory state (`Memory`), so a backend holds nothing of the protocol.
//!
//! Leases are rows, one per lease call (`leases`; see `migrations/postgres/0018_lease_rows.sql`):
//! the hot path writes no job row. A lease call writes its lease row and moves a cursor per
//! build (`build_queue`); a heartbeat renews lease rows; an upload inserts results and sets
//! or deletes its lease rows. Calls that arrive together are served together (`group`):
//! whoever gets a turn serves every call of its kind queued so far, so under load the database
//! runs a handful of statements and one commit for many calls.
//!
//! Layout: `claim` serves lease calls, dealing jobs (`dealing`) found by `queued` (and
//! `checks` for cross-checks), taking expired leases back first (`expired`) and judging
//! builds that stalled (`stalled`), and turns them into what workers receive (`payload`);
//! `uploads` stores results; `beats` renews leases and takes them back;
//! `build_failures` and `build_records` what workers report of builds; `fence` whether a
//! worker still holds a job (every call naming a lease is checked by it); `closing`
//! gathers what a transaction changes in lease rows; `cache` keeps what never changes after
//! a sweep's submission; [`statements`] holds every statement, as each backend renders it.

mod beats;
mod build_failures;
mod build_records;
mod cache;
mod checks;
mod claim;
mod closing;
mod dealing;
mod expired;
mod fence;
mod group;
mod outcome;
mod payload;
mod queued;
mod shares;
mod speed;
mod stalled;
pub mod statements;
mod uploads;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sweep_domain::provenance::BuildReport;
use sweep_domain::wire::{BatchAck, BuildFailure, HeldLease, JobLease, JobReport};

use crate::store::backend::Backend;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{Clock, StoreError, StoreResult};
use group::Group;

pub use outcome::JobOutcome;

use closing::close_jobs;

/// The worker protocol's calls. Implementations must make leasing safe with several
/// coordinators on one database, and result writes idempotent.
#[async_trait]
pub trait WorkerQueue: Send + Sync + 'static {
    /// Leases up to `max` jobs to `worker_id` (jobs of expired leases and jobs given back
    /// first, then fresh work), never of a build it failed to compile, and jobs it saw a
    /// position fail on only after all others; one lease row for them all, whose id is the
    /// attempt every later call about them names. [`StoreError::NotFound`] when the worker
    /// is not registered.
    ///
    /// First it judges again, against the workers live now (seen within the last `lease`),
    /// every build that failed on some workers but was not failed yet and still has work
    /// waiting, and fails those that now fail by the rule of [`WorkerQueue::build_failed`]
    /// (with `max_attempts`): when the workers that had not tried died, those left all failed
    /// the build, and nobody could ever take its jobs.
    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>>;
    /// Renews every lease of one worker heartbeat (the worker must hold each job under the
    /// lease it names), and marks the worker seen. Returns one outcome per lease in request
    /// order: a lease the worker does not hold (or an unknown job) is `Lost` and does not fail
    /// the others. [`StoreError::NotFound`] (and nothing written) when the worker is not
    /// registered.
    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>>;
    /// Gives back the leases of `worker_id` named in `leases` (the worker is stopping): each
    /// job it still holds under that lease is queued again, so any worker may take it at once
    /// (under a new lease: late reports naming the old one are refused). The worker no longer
    /// counts as live (for cross-checks, stalled builds, listings) until it is next marked
    /// seen. One outcome per lease in request order: `Held` when released, `Lost` when it was
    /// not held; `leases` may be empty (a stopping worker that held nothing).
    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>>;
    /// Stores every job report of one worker upload in one transaction, and marks the worker
    /// seen.
    ///
    /// Each report's results are stored idempotently and renew the job's lease; a `finished`
    /// report ends the lease's hold on the job, which is complete when every position has a
    /// result and is queued again otherwise.
    ///
    /// A result with an error is one failed try of its position (recorded once per job
    /// attempt, so a re-sent batch does not count twice): the position stays without a result,
    /// and is leased again (preferably to another worker) until it has failed `max_attempts`
    /// times; then it gets a final result carrying the reasons. Recorded failures count as
    /// accepted in the outcome.
    ///
    /// Returns one outcome per report in request order: a report whose lease is lost (or
    /// whose job is unknown) is `Lost`, stores nothing, and does not fail the others. Invalid
    /// input in any report fails the whole call with [`StoreError::Invalid`] and stores
    /// nothing; an unregistered worker fails it with [`StoreError::NotFound`].
    async fn report_many(
        &self,
        worker_id: i64,
        reports: Arc<[JobReport]>,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>>;
    /// Records that the job's build failed on the reporting worker, which is never leased
    /// that build again. Once `min(max_attempts, live workers)` distinct workers failed it
    /// (live: seen within the last `lease`), the build gets its build error and its open jobs
    /// are closed as failed; until then the job goes back to the queue for another worker.
    async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck>;
    /// Keeps how a worker got the binary of `job_id`'s build (the worker must hold the job's
    /// lease at `report.attempt`, else `LeaseLost`); the first report per (build, worker) stays.
    /// A bench total that differs from the one another worker reported earlier for the same
    /// binary in the sweep is returned as the mismatch, in words: the worker is then refused
    /// the build as by [`WorkerQueue::build_failed`] (with `lease` and `max_attempts`).
    async fn record_build(
        &self,
        job_id: i64,
        report: &BuildReport,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Option<String>>;
}

/// The worker queue over one database: its rows through `backend`, its state in `memory`.
/// Cheap to clone (the clones share the memory): the calls served together run on clones.
#[derive(Clone)]
pub(crate) struct Queue<B> {
    /// The database's rows and SQL.
    backend: B,
    /// What this coordinator keeps in memory about the protocol.
    memory: Memory,
}

impl<B: Backend> Queue<B> {
    /// The queue over `backend`, remembering nothing yet (as after a restart).
    pub(crate) fn new(backend: B) -> Self {
        Self {
            backend,
            memory: Memory::default(),
        }
    }

    /// What the queue keeps in memory.
    fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The store's clock (see [`Clock`]).
    fn clock(&self) -> &Clock {
        self.backend.clock()
    }
}

/// What the queue keeps in memory for one database: the calls served together, and hints and
/// caches that are cheap to lose (a coordinator that restarts, or another one sharing the
/// database, starts without them).
#[derive(Clone)]
pub(crate) struct Memory {
    /// Lease calls (see [`claim`]).
    claims: Group<claim::Ask, StoreResult<Vec<JobLease>>>,
    /// Result uploads (see [`uploads`]).
    uploads: Group<uploads::Upload, uploads::Acks>,
    /// Heartbeats (see [`beats`]).
    beats: Group<beats::Beat, beats::Acks>,
    /// Builds each worker has (build affinity).
    affinity: dealing::Affinity,
    /// Where workers are and which sweeps have work: the fair shares.
    shares: shares::Shares,
    /// Sweeps' and suites' immutable parts.
    statics: cache::Statics,
    /// When this coordinator last marked each worker seen.
    seen: Seen,
    /// Sweeps known to have started.
    started: Arc<Mutex<HashSet<i64>>>,
    /// When this coordinator last judged stalled builds (store clock).
    judged: Every,
    /// When this coordinator's claims last looked for expired leases (store clock).
    expiries: Every,
}

impl Default for Memory {
    fn default() -> Self {
        Self {
            // One claim at a time: concurrent claims would only skip past each other's
            // locked cursors, and one claim serves every call queued meanwhile.
            claims: Group::new(1),
            uploads: Group::new(uploads::UPLOAD_TURNS),
            beats: Group::new(beats::BEAT_TURNS),
            affinity: dealing::Affinity::default(),
            shares: shares::Shares::default(),
            statics: cache::Statics::default(),
            seen: Seen::default(),
            started: Arc::default(),
            judged: Every::new(chrono::Duration::seconds(1)),
            expiries: Every::new(chrono::Duration::milliseconds(EXPIRY_CHECKS_MS)),
        }
    }
}

impl Memory {
    /// Sweeps remembered as started at most; past it the memory starts over.
    const MAX_STARTED: usize = 100_000;

    /// Whether sweep `id` is known to have started.
    fn is_started(&self, id: i64) -> bool {
        self.started.lock().expect("started lock").contains(&id)
    }

    /// Whether stalled builds are due to be judged again at `now` (at most once a second:
    /// they wait for workers to die, which takes a lease), and if so, notes that they are.
    fn judge_stalled(&self, now: DateTime<Utc>) -> bool {
        self.judged.due(now)
    }

    /// Whether a claim at `now` looks for expired leases (see [`EXPIRY_CHECKS_MS`]), and if
    /// so, notes that it does.
    fn look_for_expired(&self, now: DateTime<Utc>) -> bool {
        self.expiries.due(now)
    }

    /// Makes the next claim look for expired leases again: this one left some.
    fn more_expired(&self) {
        self.expiries.again();
    }

    /// Remembers that `sweeps` started.
    fn started(&self, sweeps: Vec<i64>) {
        let mut started = self.started.lock().expect("started lock");
        if started.len() + sweeps.len() > Self::MAX_STARTED {
            started.clear();
        }
        started.extend(sweeps);
    }
}

/// How often, at most, this coordinator's claims look for expired leases, in milliseconds.
/// Not in every claim: under load claims follow each other by a few milliseconds and nearly
/// all find none, yet each look is a round trip. A lease lasts seconds, so its jobs go back
/// to the queue at most this much later than they would have.
const EXPIRY_CHECKS_MS: i64 = 250;

/// Something done at most once per period of the store's clock, by whichever call finds it
/// due first.
#[derive(Clone)]
struct Every {
    period: chrono::Duration,
    last: Arc<Mutex<Option<DateTime<Utc>>>>,
}

impl Every {
    fn new(period: chrono::Duration) -> Self {
        Self {
            period,
            last: Arc::default(),
        }
    }

    /// Whether it is due at `now` (never done, a period since, or the clock went back), and
    /// if so, notes that it is done now.
    fn due(&self, now: DateTime<Utc>) -> bool {
        let mut last = self.last.lock().expect("every lock");
        let due = match *last {
            None => true,
            Some(t) => now - t >= self.period || now < t,
        };
        if due {
            *last = Some(now);
        }
        due
    }

    /// Makes it due at the next call.
    fn again(&self) {
        *self.last.lock().expect("every lock") = None;
    }
}

/// When each worker was last marked seen by this coordinator. A worker's `last_seen_at`
/// only has to be fresh to within a fraction of a lease (it decides who is live), so a
/// worker marked within the last tenth of a lease is not marked again: one write per worker
/// every few seconds instead of one per call.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<i64, DateTime<Utc>>>>);

impl Seen {
    /// Workers remembered at most; past it the memory starts over.
    const MAX: usize = 100_000;

    /// Whether `worker_id` was marked within the `lease / 10` before `now`.
    fn recent(&self, worker_id: i64, lease: Duration, now: DateTime<Utc>) -> bool {
        let seen = self.0.lock().expect("seen lock");
        seen.get(&worker_id)
            .is_some_and(|t| (now - *t).to_std().is_ok_and(|ago| ago < lease / 10))
    }

    /// Forgets when `worker_id` was marked, so its next call marks it again.
    fn forget(&self, worker_id: i64) {
        self.0.lock().expect("seen lock").remove(&worker_id);
    }

    /// Remembers that `worker_id` (a registered worker) was marked at `now`.
    fn marked(&self, worker_id: i64, now: DateTime<Utc>) {
        let mut seen = self.0.lock().expect("seen lock");
        if seen.len() >= Self::MAX {
            seen.clear();
        }
        seen.insert(worker_id, now);
    }
}

/// Workers marked seen inside a transaction, for this coordinator to remember once it commits:
/// a mark rolled back must not spare the next call from marking again.
#[must_use = "remembered only after the transaction commits"]
struct Marked<'a> {
    seen: &'a Seen,
    workers: HashSet<i64>,
    at: DateTime<Utc>,
}

impl Marked<'_> {
    /// Remembers the marks (call once the transaction has committed).
    fn committed(self) {
        for w in self.workers {
            self.seen.marked(w, self.at);
        }
    }
}

/// Marks `workers` seen inside `tx` with one statement, but for those this coordinator marked
/// within a tenth of a lease; returns those of them that are not registered, and the marks
/// to remember once `tx` commits.
async fn touch_unless_recent<'a, B: Backend>(
    db: &'a Queue<B>,
    tx: &mut B::Tx,
    workers: &[i64],
    lease: Duration,
) -> StoreResult<(HashSet<i64>, Marked<'a>)> {
    let now = db.clock().now();
    let seen = &db.memory().seen;
    let mut stale: Vec<i64> = workers
        .iter()
        .copied()
        .filter(|&w| !seen.recent(w, lease, now))
        .collect();
    let mut marked = Marked {
        seen,
        workers: HashSet::new(),
        at: now,
    };
    if stale.is_empty() {
        return Ok((HashSet::new(), marked));
    }
    stale.sort_unstable();
    stale.dedup();
    let sql = statements::touch::<B>();
    marked.workers = tx
        .rows(&sql, &[Value::Ints(&stale), Value::Time(now)])
        .await?
        .iter()
        .map(|r| r.int("id"))
        .collect::<StoreResult<HashSet<i64>>>()?;
    let unknown = stale
        .into_iter()
        .filter(|w| !marked.workers.contains(w))
        .collect();
    Ok((unknown, marked))
}

#[async_trait]
impl<B: Backend> WorkerQueue for Queue<B> {
    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>> {
        // The asking worker counts as live for the stalled-build judgement the claim makes.
        if !self
            .memory
            .seen
            .recent(worker_id, lease, self.clock().now())
        {
            let mut tx = self.backend.begin_hot().await?;
            let (unknown, marked) = touch_unless_recent(self, &mut tx, &[worker_id], lease).await?;
            if !unknown.is_empty() {
                return Err(StoreError::NotFound(format!("worker {worker_id}")));
            }
            tx.commit().await?;
            marked.committed();
        }
        let ask = claim::Ask {
            worker_id,
            max,
            lease,
            max_attempts,
        };
        claim::lease(self, ask).await
    }

    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>> {
        let beat = beats::Beat {
            worker_id,
            leases: leases.to_vec(),
            lease,
        };
        outcomes(beats::heartbeat(self, beat).await)
    }

    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>> {
        beats::release(self, worker_id, leases).await
    }

    async fn report_many(
        &self,
        worker_id: i64,
        reports: Arc<[JobReport]>,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>> {
        let upload = uploads::Upload {
            worker_id,
            reports,
            lease,
            max_attempts,
        };
        outcomes(uploads::report(self, upload).await)
    }

    async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck> {
        build_failures::build_failed(self, job_id, failure, lease, max_attempts).await
    }

    async fn record_build(
        &self,
        job_id: i64,
        report: &BuildReport,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Option<String>> {
        build_records::record_build(self, job_id, report, lease, max_attempts).await
    }
}

/// A call's answer per job as outcomes: a lost lease or an unknown job is that job's `Lost`;
/// any other error is the whole call's.
fn outcomes(acks: StoreResult<Vec<StoreResult<BatchAck>>>) -> StoreResult<Vec<JobOutcome>> {
    acks?.into_iter().map(JobOutcome::of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_is_due_once_per_period_and_again_when_asked() {
        let t0 = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap();
        let ms = chrono::Duration::milliseconds;
        let every = Every::new(ms(250));
        assert!(every.due(t0), "never done");
        assert!(!every.due(t0));
        assert!(!every.due(t0 + ms(249)));
        assert!(every.due(t0 + ms(250)));
        assert!(!every.due(t0 + ms(300)));
        assert!(every.due(t0), "the clock went back");
        every.again();
        assert!(every.due(t0), "asked again");
        assert!(!every.due(t0 + ms(1)));
    }
}
