//! The worker protocol's store calls (lease, heartbeat, upload, give back), written once for
//! both databases over the [`Backend`]'s few primitives (its SQL dialect and its locking).
//!
//! Leases are rows, one per lease call (`leases`; see `migrations/postgres/0018_lease_rows.sql`):
//! the hot path writes no job row. A lease call writes its lease row and moves a cursor per
//! build (`build_queue`); a heartbeat renews lease rows; an upload inserts results and sets
//! or deletes its lease rows. Calls that arrive together are served together ([`group`]):
//! whoever gets a turn serves every call of its kind queued so far, so under load the database
//! runs a handful of statements and one commit for many calls.
//!
//! Layout: [`claim`] serves lease calls, dealing jobs ([`dealing`]) found by [`queue`] (and
//! [`checks`] for cross-checks), taking expired leases back first ([`expired`]), and turns
//! them into what workers receive ([`payload`]); [`uploads`] stores results; [`beats`] renews
//! leases and takes them back; [`closing`] gathers what a transaction changes in lease rows;
//! [`cache`] keeps what never changes after a sweep's submission.

mod beats;
mod cache;
pub(crate) mod checks;
mod claim;
mod closing;
mod dealing;
mod expired;
pub(crate) mod group;
mod payload;
mod queue;
mod stalled;
pub(crate) mod statements;
mod uploads;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sweep_domain::wire::{BatchAck, HeldLease, JobLease, JobReport};

use super::backend::Backend;
use super::sql::{Columns, Tx, Value};
use super::{JobOutcome, StoreError, StoreResult};
use group::Group;

pub(crate) use closing::close_jobs;
pub(crate) use queue::{close_work, jobs, leases, put_back, Scope};
pub(crate) use stalled::{close_build, fail_stalled_builds, failed_on, live_workers};

/// A backend that serves the worker protocol: it keeps the protocol's in-memory state.
pub(crate) trait Serves: Backend {
    /// What the worker protocol keeps in memory for this store.
    fn protocol(&self) -> &Protocol;
}

/// What the protocol keeps in memory for one store: the calls served together, and hints and
/// caches that are cheap to lose (a coordinator that restarts, or another one sharing the
/// database, starts without them).
#[derive(Clone)]
pub(crate) struct Protocol {
    /// Lease calls (see [`claim`]).
    claims: Group<claim::Ask, StoreResult<Vec<JobLease>>>,
    /// Result uploads (see [`uploads`]).
    uploads: Group<uploads::Upload, uploads::Acks>,
    /// Heartbeats (see [`beats`]).
    beats: Group<beats::Beat, beats::Acks>,
    /// Builds each worker has (build affinity).
    affinity: dealing::Affinity,
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

impl Default for Protocol {
    fn default() -> Self {
        Self {
            // One claim at a time: concurrent claims would only skip past each other's
            // locked cursors, and one claim serves every call queued meanwhile.
            claims: Group::new(1),
            uploads: Group::new(uploads::UPLOAD_TURNS),
            beats: Group::new(beats::BEAT_TURNS),
            affinity: dealing::Affinity::default(),
            statics: cache::Statics::default(),
            seen: Seen::default(),
            started: Arc::default(),
            judged: Every::new(chrono::Duration::seconds(1)),
            expiries: Every::new(chrono::Duration::milliseconds(EXPIRY_CHECKS_MS)),
        }
    }
}

impl Protocol {
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
async fn touch_unless_recent<'a, B: Serves>(
    db: &'a B,
    tx: &mut B::Tx,
    workers: &[i64],
    lease: Duration,
) -> StoreResult<(HashSet<i64>, Marked<'a>)> {
    let now = db.clock().now();
    let seen = &db.protocol().seen;
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

/// See [`super::Store::lease_jobs`].
pub(crate) async fn lease_jobs<B: Serves>(
    db: &B,
    worker_id: i64,
    max: u32,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<JobLease>> {
    // The asking worker counts as live for the stalled-build judgement the claim makes.
    if !db
        .protocol()
        .seen
        .recent(worker_id, lease, db.clock().now())
    {
        let mut tx = db.begin_hot().await?;
        let (unknown, marked) = touch_unless_recent(db, &mut tx, &[worker_id], lease).await?;
        if !unknown.is_empty() {
            return Err(StoreError::NotFound(format!("worker {worker_id}")));
        }
        tx.commit().await?;
        marked.committed();
    }
    claim::lease(
        db,
        claim::Ask {
            worker_id,
            max,
            lease,
            max_attempts,
        },
    )
    .await
}

/// See [`super::Store::heartbeat_many`].
pub(crate) async fn heartbeat_many<B: Serves>(
    db: &B,
    worker_id: i64,
    leases: &[HeldLease],
    lease: Duration,
) -> StoreResult<Vec<JobOutcome>> {
    let beat = beats::Beat {
        worker_id,
        leases: leases.to_vec(),
        lease,
    };
    outcomes(beats::heartbeat(db, beat).await)
}

/// See [`super::Store::release_leases`].
pub(crate) async fn release_leases<B: Serves>(
    db: &B,
    worker_id: i64,
    leases: &[HeldLease],
) -> StoreResult<Vec<JobOutcome>> {
    beats::release(db, worker_id, leases).await
}

/// See [`super::Store::report_many`].
pub(crate) async fn report_many<B: Serves>(
    db: &B,
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
    outcomes(uploads::report(db, upload).await)
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
