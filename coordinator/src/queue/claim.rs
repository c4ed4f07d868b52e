//! Lease calls served together. Every lease call of this coordinator queues its ask; whoever
//! gets the turn serves every ask queued so far in one transaction (a claim), and the others
//! find their answer waiting when their turn comes. Workers with nothing particular about
//! them (no failed build or position, no binary-only engines: nearly all of them) are dealt
//! jobs together; the others are picked for one by one in the same transaction. Each call
//! that gets jobs costs one `leases` row: no job row is written.
//!
//! A claim first takes back expired leases (at most every few hundred milliseconds, see
//! [`super::EXPIRY_CHECKS_MS`]). It then deals, in order: jobs waiting to be handed out again (an
//! expired lease's, given back, with positions still missing), so a dead worker's jobs are redone
//! before the queue moves on; then, while several sweeps have work, each ask first from the
//! sweep its fair share sends it to ([`super::shares`]), and from the whole queue after; then,
//! with build affinity (Postgres), jobs of builds each worker already has (a worker compiles
//! few variants, not every one), then, for the asks with room left, one build each from the
//! head of the queue, spread over them (so workers new to a sweep start on different
//! variants), then the queue build by build; without it (SQLite, a local run's one
//! worker), the queue in job order. Cross-checks fill the room work left: an ask sent to a
//! sweep takes that sweep's ready checks once its work is dealt (before the whole queue's
//! work, so a small sweep's checks do not wait for a big sweep), and any sweep's checks last.
//! A speed job goes alone: to an ask its share sends to a sweep whose work is done (whatever
//! its worker holds, which runs the job once its running jobs end), else, last, to an ask
//! dealt nothing whose worker holds no lease.
//!
//! A claim that fails answers every ask in it with the error, and leaves no job leased (it
//! is one transaction).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sweep_domain::wire::JobLease;

use super::dealing::{spread, ByBuild, Dealing};
use super::group::{abandoned, replicate};
use super::queued::{heads_of, requeue, sweeps_with_work, take_requeued, takeable_builds, Cursors};
use super::stalled::fail_stalled_builds;
use super::statements::{self as stmt, Retried, Takeable};
use super::Queue;
use super::{checks, expired, payload, shares, speed, Memory};
use crate::store::backend::Backend;
use crate::store::backend::NewLease;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::StoreResult;

/// One lease call waiting to be served.
pub(crate) struct Ask {
    /// The asking worker.
    pub worker_id: i64,
    /// Most jobs it takes.
    pub max: u32,
    /// How long its lease lasts.
    pub lease: Duration,
    /// Attempts a job gets before it fails (judging stalled builds).
    pub max_attempts: u32,
}

/// Leases up to `ask.max` jobs to `ask.worker_id` (see the module documentation).
pub(crate) async fn lease<B: Backend>(db: &Queue<B>, ask: Ask) -> StoreResult<Vec<JobLease>> {
    let store = db.clone();
    db.memory()
        .claims
        .call(ask, move |batch| async move { serve(&store, batch).await })
        .await
        .unwrap_or_else(|| Err(abandoned("lease claim")))
}

/// Serves `batch`: one answer per ask, in order.
async fn serve<B: Backend>(db: &Queue<B>, batch: Vec<Ask>) -> Vec<StoreResult<Vec<JobLease>>> {
    let started = std::time::Instant::now();
    match claim(db, &batch).await {
        Ok(leases) => {
            tracing::debug!(
                asks = batch.len(),
                jobs = leases.iter().map(Vec::len).sum::<usize>(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "claim served"
            );
            leases.into_iter().map(Ok).collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, asks = batch.len(), "lease claim failed");
            batch.iter().map(|_| Err(replicate(&e))).collect()
        }
    }
}

/// Serves `batch` in one transaction; one list of leases per ask, in order.
async fn claim<B: Backend>(db: &Queue<B>, batch: &[Ask]) -> StoreResult<Vec<Vec<JobLease>>> {
    let Some(first) = batch.first() else {
        return Ok(Vec::new());
    };
    let proto = db.memory();
    // Once per claim (and a second) rather than per call: builds that fail with the workers
    // live now (every asking worker was marked seen before it asked) get their error before
    // anything is picked. All asks of one coordinator carry the same settings.
    let now = db.clock().now();
    if proto.judge_stalled(now) {
        fail_stalled_builds(db, first.lease, first.max_attempts, now).await?;
    }
    let mut tx = db.backend.begin_claim().await?;
    if proto.look_for_expired(now) && expired::take_back(db, &mut tx, now).await? {
        proto.more_expired();
    }
    let (dealt, again) = deal(db, &mut tx, batch, now).await?;
    let mut out = payload::leases_of(db, &mut tx, &dealt, &again).await?;
    write_leases(db, &mut tx, batch, &mut out, now).await?;
    let sweeps = mark_started(db, &mut tx, &out).await?;
    tx.commit().await?;
    proto.started(sweeps);
    // Cross-checks too: a worker compiles the build of every job it runs.
    for (ask, leases) in batch.iter().zip(&out) {
        proto.affinity.record(
            ask.worker_id,
            leases.iter().map(|l| (l.build_id, l.lease.sweep_id)),
        );
        if let Some(sweep) = main_sweep(leases) {
            proto.shares.send(ask.worker_id, sweep, ask.lease);
        }
    }
    Ok(out
        .into_iter()
        .map(|ls| ls.into_iter().map(|l| l.lease).collect())
        .collect())
}

/// The sweep most of `leases` are of: where the worker now is, for the shares.
fn main_sweep(leases: &[payload::Leased]) -> Option<i64> {
    let mut count: HashMap<i64, usize> = HashMap::new();
    for l in leases {
        *count.entry(l.lease.sweep_id).or_default() += 1;
    }
    count
        .into_iter()
        .max_by_key(|&(sweep, n)| (n, std::cmp::Reverse(sweep)))
        .map(|(sweep, _)| sweep)
}

/// Deals jobs to the asks of `batch` inside `tx` (see the module documentation for the
/// order): work to the ordinary asks together, then to the particular ones one by one, the
/// cursors moved past what was dealt, then cross-checks. Returns the jobs dealt to each ask,
/// and those that may have positions measured already (see [`Claim::again`]).
async fn deal<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    batch: &[Ask],
    now: DateTime<Utc>,
) -> StoreResult<(Vec<Vec<i64>>, HashSet<i64>)> {
    let workers: Vec<i64> = batch.iter().map(|a| a.worker_id).collect();
    let particular = particular_workers::<B>(tx, &workers).await?;
    let (special, ordinary): (Vec<usize>, Vec<usize>) =
        (0..batch.len()).partition(|&i| particular.contains(&batch[i].worker_id));
    let mut claim = Claim {
        db,
        workers: workers.clone(),
        proto: db.memory(),
        now,
        live_since: crate::store::clock::before(now, batch[0].lease),
        checks_only: HashSet::new(),
        deal: Dealing::new(batch.iter().map(|a| a.max).collect()),
        cursors: Cursors::default(),
        again: HashSet::new(),
    };
    // Every ask's sweep at once, so asks served together spread over the sweeps.
    let all: Vec<usize> = (0..batch.len()).collect();
    let targets = claim.targets(tx, &all).await?;
    claim.deal_ordinary(tx, &ordinary, &targets).await?;
    for &i in &special {
        let target = targets.get(&i).copied();
        claim.pick_for(tx, i, batch[i].worker_id, target).await?;
    }
    // Then any sweep's cross-checks, for the room work left: they run after all work.
    claim.checks(tx, &all, None).await?;
    // Last, a speed job to a worker given nothing (it runs alone).
    claim.speed(tx, &all).await?;
    let Claim {
        deal,
        cursors,
        again,
        ..
    } = claim;
    cursors.save(db, tx).await?;
    Ok((deal.dealt, again))
}

/// Writes one lease row per ask with jobs in `out` (its lease lasting from `now`), and sets
/// the attempt of each of its jobs to the row's id.
async fn write_leases<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    batch: &[Ask],
    out: &mut [Vec<payload::Leased>],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let new: Vec<NewLease> = batch
        .iter()
        .zip(out.iter())
        .filter(|(_, leases)| !leases.is_empty())
        .map(|(ask, leases)| NewLease {
            worker_id: ask.worker_id,
            jobs: leases.iter().map(|l| l.lease.job_id).collect(),
            expires_at: crate::store::clock::after(now, ask.lease),
        })
        .collect();
    let mut ids = db.backend.insert_leases(tx, &new).await?.into_iter();
    for leases in out.iter_mut().filter(|l| !l.is_empty()) {
        let id = ids.next().expect("one lease row per ask with jobs");
        for l in leases.iter_mut() {
            l.lease.attempt = id;
        }
    }
    Ok(())
}

/// Of `workers`, those a claim must treat one by one: they failed a build or a position
/// (their jobs are chosen around those), or reported binary-only engines (they may take
/// those sweeps' jobs). All others take any job of a source engine.
async fn particular_workers<B: Backend>(
    tx: &mut B::Tx,
    workers: &[i64],
) -> StoreResult<HashSet<i64>> {
    let sql = stmt::particular_workers::<B>();
    tx.rows(&sql, &[Value::Ints(workers)])
        .await?
        .iter()
        .map(|r| r.int("worker_id"))
        .collect()
}

/// Marks started the sweeps of `leases` not known to be (once per sweep, not per lease);
/// returns them, to be remembered once the claim commits.
async fn mark_started<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    leases: &[Vec<payload::Leased>],
) -> StoreResult<Vec<i64>> {
    let mut sweeps: Vec<i64> = leases
        .iter()
        .flatten()
        .map(|l| l.lease.sweep_id)
        .filter(|s| !db.memory().is_started(*s))
        .collect();
    sweeps.sort_unstable();
    sweeps.dedup();
    if !sweeps.is_empty() {
        let sql = stmt::mark_started::<B>();
        tx.execute(&sql, &[Value::Ints(&sweeps)]).await?;
    }
    Ok(sweeps)
}

/// A claim in progress: its jobs dealt so far and the cursors it holds.
struct Claim<'a, B: Backend> {
    db: &'a Queue<B>,
    /// The asking worker of each ask.
    workers: Vec<i64>,
    proto: &'a Memory,
    now: DateTime<Utc>,
    /// Workers seen since count as live (for who may take a cross-check). All asks of one
    /// coordinator carry the same lease.
    live_since: DateTime<Utc>,
    /// The sweeps with cross-checks ready and no fresh work left: an ask sent to one of them
    /// takes its checks before the rest of the queue's work (see [`Claim::checks`]).
    checks_only: HashSet<i64>,
    deal: Dealing,
    cursors: Cursors,
    /// Jobs handed out before (taken out of `requeued`) and cross-checks: they may have
    /// positions measured already.
    again: HashSet<i64>,
}

impl<B: Backend> Claim<'_, B> {
    /// Deals to the ordinary asks (see the module documentation for the order): each ask
    /// first from the sweep its share sends it to (`targets`, see [`shares`]), then from the
    /// whole queue.
    async fn deal_ordinary(
        &mut self,
        tx: &mut B::Tx,
        ordinary: &[usize],
        targets: &HashMap<usize, i64>,
    ) -> StoreResult<()> {
        let want = self.deal.wanted(ordinary);
        if want == 0 {
            return Ok(());
        }
        let again = take_requeued::<B>(tx, want, Takeable::Ordinary, Retried::Any).await?;
        self.in_order(tx, ordinary, again).await?;
        let mut by_sweep: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for &i in ordinary {
            if let Some(&sweep) = targets.get(&i) {
                by_sweep.entry(sweep).or_default().push(i);
            }
        }
        if B::BUILD_AFFINITY {
            self.own_builds(ordinary, targets, tx).await?;
        }
        for (sweep, asks) in &by_sweep {
            self.fill_ordinary(tx, asks, Some(*sweep)).await?;
            self.checks(tx, asks, Some(*sweep)).await?;
            self.speed_of(tx, asks, *sweep).await?;
        }
        self.fill_ordinary(tx, ordinary, None).await
    }

    /// Fills the room of the ordinary `asks` from `sweep`'s queue, or the whole queue's:
    /// spread over the builds at its head with build affinity, in job order without.
    async fn fill_ordinary(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        if B::BUILD_AFFINITY {
            self.spread_and_fill(tx, asks, sweep).await
        } else {
            self.in_job_order(tx, asks, Takeable::Ordinary, sweep).await
        }
    }

    /// Ready cross-checks for the room `asks` have left: of `sweep` (the one their share sends
    /// them to) once it has no fresh work left, or of any sweep. While the sweep has work its
    /// checks wait for it (they run after their sweep's work), and the room goes to the
    /// queue's work: a pick walks the sweep's ready checks, which a work-heavy claim must not
    /// pay for on every call.
    async fn checks(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        if sweep.is_some_and(|s| !self.checks_only.contains(&s)) {
            return Ok(());
        }
        for &i in asks {
            let room = self.deal.room(i);
            if room == 0 {
                continue;
            }
            let worker = self.workers[i];
            for id in checks::pick::<B>(tx, worker, room, self.live_since, sweep).await? {
                self.deal.give(i, id);
                self.again.insert(id);
            }
        }
        Ok(())
    }

    /// A speed job for each of `asks` dealt nothing whose worker holds no lease (see
    /// [`speed`]): it is all the worker gets until it ends.
    async fn speed(&mut self, tx: &mut B::Tx, asks: &[usize]) -> StoreResult<()> {
        let idle: Vec<usize> = asks
            .iter()
            .copied()
            .filter(|&i| self.deal.dealt[i].is_empty() && self.deal.room(i) > 0)
            .collect();
        if idle.is_empty() || !speed::any_waiting::<B>(tx).await? {
            return Ok(());
        }
        for i in idle {
            if let Some(id) = speed::pick::<B>(tx, self.workers[i]).await? {
                self.deal.give_alone(i, id);
            }
        }
        Ok(())
    }

    /// A speed job of `sweep` (the one their share sends `asks` to) for each of them dealt
    /// nothing yet, alone, once `sweep` has no fresh work left (it is among `checks_only`):
    /// whatever the worker holds, so speed jobs get their share while other sweeps' work
    /// keeps every worker busy.
    async fn speed_of(&mut self, tx: &mut B::Tx, asks: &[usize], sweep: i64) -> StoreResult<()> {
        if !self.checks_only.contains(&sweep) {
            return Ok(());
        }
        for &i in asks {
            if !self.deal.dealt[i].is_empty() || self.deal.room(i) == 0 {
                continue;
            }
            if let Some(id) = speed::pick_of::<B>(tx, self.workers[i], sweep).await? {
                self.deal.give_alone(i, id);
            }
        }
        Ok(())
    }

    /// The sweep each of `asks` goes to, as the shares say; none when fewer than two sweeps
    /// have work (the queue's order decides then).
    async fn targets(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
    ) -> StoreResult<HashMap<usize, i64>> {
        let shares = &self.proto.shares;
        let weighed = match shares.weighed() {
            Some(w) => w,
            None => {
                let w = sweeps_with_work::<B>(tx).await?;
                shares.keep_weighed(w.clone());
                w
            }
        };
        self.checks_only = weighed
            .iter()
            .filter(|w| !w.work)
            .map(|w| w.sweep)
            .collect();
        let mut out = HashMap::new();
        if weighed.len() < 2 {
            return Ok(out);
        }
        let workers: Vec<i64> = asks.iter().map(|&i| self.workers[i]).collect();
        let current: Vec<Option<i64>> = workers.iter().map(|&w| shares.serving(w)).collect();
        let targets = shares::targets(&weighed, &shares.held(&workers), &current);
        for (&i, target) in asks.iter().zip(targets) {
            if let Some(sweep) = target {
                out.insert(i, sweep);
            }
        }
        Ok(out)
    }

    /// Fresh jobs of the builds each ask's worker has (build affinity), of the sweep its
    /// share sends it to when it has one.
    async fn own_builds(
        &mut self,
        asks: &[usize],
        targets: &HashMap<usize, i64>,
        tx: &mut B::Tx,
    ) -> StoreResult<()> {
        let mut known = ByBuild::default();
        for &i in asks {
            if self.deal.room(i) == 0 {
                continue;
            }
            for build in self.builds_of(self.workers[i], targets.get(&i).copied()) {
                known.add(build, i);
            }
        }
        self.of_builds(tx, &known).await
    }

    /// The builds `worker` has (newest first), of `sweep` when given.
    fn builds_of(&self, worker: i64, sweep: Option<i64>) -> Vec<i64> {
        let affinity = &self.proto.affinity;
        let mut builds = affinity.builds(worker);
        if let Some(t) = sweep {
            builds.retain(|&b| affinity.sweep_of(b) == Some(t));
        }
        builds
    }

    /// For the asks with room left: one build each from the head of `sweep`'s queue (of the
    /// whole queue without one), spread over them, then that queue build by build.
    async fn spread_and_fill(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        let needy: Vec<usize> = asks
            .iter()
            .copied()
            .filter(|&i| self.deal.room(i) > 0)
            .collect();
        if needy.is_empty() {
            return Ok(());
        }
        let n = 2 * needy.len() as i64 + 8;
        let heads = heads_of::<B>(tx, sweep, n, Takeable::Ordinary).await?;
        let owned = self.proto.affinity.owned_among(&heads);
        self.of_builds(tx, &spread(&needy, &heads, &owned)).await?;
        self.rest(tx, &needy, Takeable::Ordinary, sweep).await
    }

    /// The picks for one particular worker (ask `i`, sent to `sweep` by its share): jobs to
    /// hand out again that it saw no position fail on, then fresh jobs of the builds it has
    /// (build affinity; of `sweep`), then `sweep`'s queue and its ready cross-checks, then
    /// the whole queue, then the jobs it saw a position fail on (a retry lands on another worker when there is one, on
    /// this one when there is not). Never a build it failed to compile.
    async fn pick_for(
        &mut self,
        tx: &mut B::Tx,
        i: usize,
        worker: i64,
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        let takeable = Takeable::By(worker);
        let room = i64::from(self.deal.room(i));
        let again = take_requeued::<B>(tx, room, takeable, Retried::NotByIt).await?;
        self.in_order(tx, &[i], again).await?;
        if B::BUILD_AFFINITY {
            let mine = takeable_builds::<B>(tx, &self.builds_of(worker, sweep), takeable).await?;
            let mut known = ByBuild::default();
            for build in mine {
                known.add(build, i);
            }
            self.of_builds(tx, &known).await?;
        }
        // `sweep`'s work and then its cross-checks, then the whole queue's work.
        for scope in sweep.map(Some).into_iter().chain([None]) {
            if B::BUILD_AFFINITY {
                self.rest(tx, &[i], takeable, scope).await?;
            } else {
                self.in_job_order(tx, &[i], takeable, scope).await?;
            }
            if let Some(sweep) = scope {
                self.checks(tx, &[i], scope).await?;
                self.speed_of(tx, &[i], sweep).await?;
            }
        }
        let room = i64::from(self.deal.room(i));
        let retried = take_requeued::<B>(tx, room, takeable, Retried::ByIt).await?;
        self.in_order(tx, &[i], retried).await
    }

    /// Deals jobs taken out of `requeued` in order; any nobody had room for go back.
    async fn in_order(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        jobs: Vec<i64>,
    ) -> StoreResult<()> {
        self.again.extend(&jobs);
        let left = self.deal.in_order(asks, jobs);
        requeue::<B>(tx, &left, self.now).await
    }

    /// Fresh jobs of each build for the asks listed with it (as many as their room together),
    /// dealt to those asks in order, builds in the order listed.
    async fn of_builds(&mut self, tx: &mut B::Tx, builds: &ByBuild) -> StoreResult<()> {
        let wants: Vec<(i64, i64)> = builds
            .0
            .iter()
            .map(|(b, who)| (*b, self.deal.wanted(who)))
            .filter(|w| w.1 > 0)
            .collect();
        if wants.is_empty() {
            return Ok(());
        }
        self.cursors.fetch(self.db, tx, &wants).await?;
        for (build, who) in &builds.0 {
            for &i in who {
                while self.deal.room(i) > 0 {
                    let Some(job) = self.cursors.take(*build) else {
                        break;
                    };
                    self.deal.give(i, job);
                }
            }
        }
        Ok(())
    }

    /// Fills the room `asks` have left round-robin over the builds at the head of the queue
    /// (of `sweep`'s, or the whole queue's; those with the most jobs left first), a job of
    /// each in turn: the builds stay level, as a local run's table fills.
    async fn in_job_order(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        takeable: Takeable,
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        let want = self.deal.wanted(asks);
        if want == 0 {
            return Ok(());
        }
        let spent = self.cursors.spent() as i64;
        let heads = heads_of::<B>(tx, sweep, want.min(256) + spent, takeable).await?;
        let heads: Vec<i64> = heads
            .into_iter()
            .filter(|&b| !self.cursors.is_spent(b))
            .collect();
        // Each build gets at most its turn's share, and one more.
        let share = want / heads.len().max(1) as i64 + 1;
        let wants: Vec<(i64, i64)> = heads.iter().map(|&b| (b, share)).collect();
        self.cursors.fetch(self.db, tx, &wants).await?;
        let mut turn = heads.iter().cycle();
        let mut dry = 0;
        for &i in asks {
            while self.deal.room(i) > 0 && dry < heads.len() {
                let &build = turn.next().expect("heads are not empty here");
                match self.cursors.take(build) {
                    Some(job) => {
                        dry = 0;
                        self.deal.give(i, job);
                    }
                    None => dry += 1,
                }
            }
        }
        Ok(())
    }

    /// Fills the room `asks` have left from the head of the queue (of `sweep`'s, or the
    /// whole queue's), build after build in queue order.
    async fn rest(
        &mut self,
        tx: &mut B::Tx,
        asks: &[usize],
        takeable: Takeable,
        sweep: Option<i64>,
    ) -> StoreResult<()> {
        let mut want = self.deal.wanted(asks);
        if want == 0 {
            return Ok(());
        }
        // Enough builds for the room even if each had one job left, past those this claim
        // already found empty (their rows go when it commits).
        let spent = self.cursors.spent() as i64;
        let heads = heads_of::<B>(tx, sweep, want.min(256) + spent, takeable).await?;
        for build in heads {
            if self.cursors.is_spent(build) {
                continue;
            }
            let mut one = ByBuild::default();
            for &i in asks {
                if self.deal.room(i) > 0 {
                    one.add(build, i);
                }
            }
            self.of_builds(tx, &one).await?;
            want = self.deal.wanted(asks);
            if want == 0 {
                break;
            }
        }
        Ok(())
    }
}
