//! Lease calls served together. Every lease call of this coordinator queues its ask; whoever
//! gets the turn serves every ask queued so far in one transaction, and the others find
//! their answer waiting when their turn comes. Workers with nothing particular about them
//! (no failed build or position, no binary-only engines: nearly all of them) share one claim
//! of jobs, dealt out in the order they asked, and one statement leases all of them; the
//! others are picked for one by one in the same transaction. So under load the database does
//! a handful of statements for many lease calls instead of several per call, and concurrent
//! picks never walk past each other's locked rows.
//!
//! A claim that fails answers every ask in it with the error, and leaves no job leased (it
//! is one transaction). Serving runs in a task of its own, so a caller that goes away while
//! it serves (a closed connection) cannot cut the others' answers short.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use sweep_domain::wire::JobLease;

use super::group::{abandoned, replicate, Group};
use super::leases::{fail_stalled_builds, leases_of, pick_for, Leased};
use super::{checks, secs, statements, PgStore};
use crate::store::StoreResult;

/// One lease call waiting to be served.
pub(super) struct Ask {
    /// The asking worker.
    pub worker_id: i64,
    /// Most jobs it takes.
    pub max: u32,
    /// How long its leases last.
    pub lease: Duration,
    /// Attempts a job gets before it fails (judging stalled builds).
    pub max_attempts: u32,
}

/// The lease calls of this coordinator, served together.
#[derive(Clone)]
pub(super) struct Claims {
    group: Group<Ask, StoreResult<Vec<JobLease>>>,
    affinity: Affinity,
}

impl Default for Claims {
    fn default() -> Self {
        Self {
            // One claim at a time: concurrent claims would only skip past each other's
            // locked rows, and one claim serves every call queued meanwhile.
            group: Group::new(1),
            affinity: Affinity::default(),
        }
    }
}

impl Claims {
    /// Leases up to `ask.max` jobs to `ask.worker_id` (see the module documentation).
    pub async fn lease(&self, store: &PgStore, ask: Ask) -> StoreResult<Vec<JobLease>> {
        let store = store.clone();
        let affinity = self.affinity.clone();
        self.group
            .call(ask, move |batch| async move {
                serve(&store, &affinity, batch).await
            })
            .await
            .unwrap_or_else(|| Err(abandoned("lease claim")))
    }
}

/// Serves `batch`: one answer per ask, in order.
async fn serve(
    store: &PgStore,
    affinity: &Affinity,
    batch: Vec<Ask>,
) -> Vec<StoreResult<Vec<JobLease>>> {
    match claim(store, affinity, &batch).await {
        Ok(leases) => leases.into_iter().map(Ok).collect(),
        Err(e) => {
            tracing::warn!(error = %e, asks = batch.len(), "lease claim failed");
            batch.iter().map(|_| Err(replicate(&e))).collect()
        }
    }
}

/// Serves `batch` in one transaction; one list of leases per ask, in order.
async fn claim(
    store: &PgStore,
    affinity: &Affinity,
    batch: &[Ask],
) -> StoreResult<Vec<Vec<JobLease>>> {
    // Once per claim rather than per call: builds that fail with the workers live now (every
    // asking worker was marked seen before it asked) get their error before anything is
    // picked. All asks of one coordinator carry the same settings.
    let now = store.clock.now();
    if let Some(first) = batch.first() {
        fail_stalled_builds(&store.pool, first.lease, first.max_attempts, now).await?;
    }
    let mut tx = store.pool.begin().await?;
    sqlx::query(statements::LEASE_SETTINGS)
        .execute(&mut *tx)
        .await?;
    let workers: Vec<i64> = batch.iter().map(|a| a.worker_id).collect();
    let particular: HashSet<i64> = sqlx::query_scalar(statements::PARTICULAR_WORKERS)
        .bind(&workers)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
    let (special, ordinary): (Vec<usize>, Vec<usize>) =
        (0..batch.len()).partition(|&i| particular.contains(&batch[i].worker_id));
    let mut rows: Vec<Vec<Leased>> = (0..batch.len()).map(|_| Vec::new()).collect();

    let dealt = deal(&mut tx, affinity, batch, &ordinary, now).await?;
    if !dealt.is_empty() {
        let (mut job, mut worker, mut lease) = (Vec::new(), Vec::new(), Vec::new());
        for &(i, id) in &dealt {
            job.push(id);
            worker.push(batch[i].worker_id);
            lease.push(secs(batch[i].lease));
        }
        let assigned: Vec<Leased> = sqlx::query_as(statements::ASSIGN)
            .bind(&job)
            .bind(&worker)
            .bind(&lease)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        let mut by_id: HashMap<i64, Leased> = assigned.into_iter().map(|r| (r.id, r)).collect();
        for &(i, id) in &dealt {
            if let Some(row) = by_id.remove(&id) {
                rows[i].push(row);
            }
        }
    }
    for &i in &special {
        let ask = &batch[i];
        let known = affinity.builds(ask.worker_id);
        rows[i] = pick_for(&mut tx, ask.worker_id, ask.max, ask.lease, now, &known).await?;
    }
    // Cross-checks only for the room work left: they run after all work.
    for (i, ask) in batch.iter().enumerate() {
        if rows[i].len() < ask.max as usize {
            let room = ask.max - rows[i].len() as u32;
            rows[i].extend(checks::pick(&mut tx, ask.worker_id, room, ask.lease, now).await?);
        }
    }
    // Cross-checks too: a worker compiles the build of every job it runs.
    for (ask, r) in batch.iter().zip(&rows) {
        affinity.record(ask.worker_id, r.iter().map(|row| row.build_id));
    }
    let mut out = Vec::with_capacity(batch.len());
    for r in &rows {
        out.push(leases_of(store, &mut tx, r).await?);
    }
    tx.commit().await?;
    Ok(out)
}

/// What the ordinary asks get, as (ask, job) in the order each ask takes them, all locked:
/// expired leases first (a dead worker's jobs are redone before the queue moves on); then
/// jobs of builds each worker already has (build affinity: a worker compiles few variants,
/// not every one); then, for the asks with room left, one build each from the head of the
/// queue, spread over them (so workers new to a sweep start on different variants); then
/// the queue in id order.
async fn deal(
    tx: &mut Transaction<'_, Postgres>,
    affinity: &Affinity,
    batch: &[Ask],
    ordinary: &[usize],
    now: DateTime<Utc>,
) -> StoreResult<Vec<(usize, i64)>> {
    let mut deal = Dealing {
        room: batch.iter().map(|a| a.max).collect(),
        dealt: Vec::new(),
        taken: HashSet::new(),
    };
    let want = deal.wanted(ordinary);
    if want == 0 {
        return Ok(Vec::new());
    }
    let expired: Vec<i64> = sqlx::query_scalar(statements::CLAIM_EXPIRED)
        .bind(want)
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
    deal.in_order(ordinary, expired);

    let mut known = ByBuild::default();
    for &i in ordinary {
        if deal.room[i] > 0 {
            for build in affinity.builds(batch[i].worker_id) {
                known.add(build, i);
            }
        }
    }
    deal.of_builds(tx, &known).await?;

    let needy: Vec<usize> = ordinary
        .iter()
        .copied()
        .filter(|&i| deal.room[i] > 0)
        .collect();
    if !needy.is_empty() {
        let heads: Vec<i64> = sqlx::query_scalar(statements::HEAD_BUILDS)
            .bind(deal.wanted(&needy) + deal.taken.len() as i64)
            .fetch_all(&mut **tx)
            .await?;
        let starts = spread(&needy, &heads, &affinity.owned_among(&heads));
        deal.of_builds(tx, &starts).await?;
    }

    let rest = deal.wanted(ordinary);
    if rest > 0 {
        // Jobs this claim picked above are still queued (and locked by it, so not skipped):
        // ask for that many more.
        let queued: Vec<i64> = sqlx::query_scalar(statements::CLAIM_QUEUED)
            .bind(rest + deal.taken.len() as i64)
            .fetch_all(&mut **tx)
            .await?;
        deal.in_order(ordinary, queued);
    }
    Ok(deal.dealt)
}

/// A claim's jobs being dealt out to its asks.
struct Dealing {
    /// Room left per ask (by index in the batch).
    room: Vec<u32>,
    /// (ask, job) in the order dealt.
    dealt: Vec<(usize, i64)>,
    /// Jobs dealt so far.
    taken: HashSet<i64>,
}

impl Dealing {
    /// Room left over `asks`.
    fn wanted(&self, asks: &[usize]) -> i64 {
        asks.iter().map(|&i| i64::from(self.room[i])).sum()
    }

    /// Gives `job` to `ask` unless it has no room or the job is dealt already.
    fn give(&mut self, ask: usize, job: i64) -> bool {
        if self.room[ask] == 0 || !self.taken.insert(job) {
            return false;
        }
        self.room[ask] -= 1;
        self.dealt.push((ask, job));
        true
    }

    /// Deals `jobs` in their order to `asks` in theirs, each filled before the next.
    fn in_order(&mut self, asks: &[usize], jobs: Vec<i64>) {
        let mut jobs = jobs.into_iter();
        for &i in asks {
            while self.room[i] > 0 {
                let Some(job) = jobs.next() else { return };
                self.give(i, job);
            }
        }
    }

    /// Picks queued jobs of each build for the asks listed with it (as many as their room
    /// together) and deals them to those asks in order, builds in the order listed.
    async fn of_builds(
        &mut self,
        tx: &mut Transaction<'_, Postgres>,
        builds: &ByBuild,
    ) -> StoreResult<()> {
        let mut build_ids = Vec::new();
        let mut rooms = Vec::new();
        let mut asks = Vec::new();
        for (build, who) in &builds.0 {
            let build = *build;
            let room = self.wanted(who);
            if room > 0 {
                build_ids.push(build);
                rooms.push(i32::try_from(room).unwrap_or(i32::MAX));
                asks.push(who);
            }
        }
        if build_ids.is_empty() {
            return Ok(());
        }
        let mut picked: Vec<(i64, i64)> = sqlx::query_as(statements::CLAIM_OF_BUILDS)
            .bind(&build_ids)
            .bind(&rooms)
            .fetch_all(&mut **tx)
            .await?;
        picked.sort_unstable();
        for (n, job) in picked {
            let Some(who) = usize::try_from(n - 1).ok().and_then(|k| asks.get(k)) else {
                continue;
            };
            if let Some(&i) = who.iter().find(|&&i| self.room[i] > 0) {
                self.give(i, job);
            }
        }
        Ok(())
    }
}

/// Asks listed by build, builds in the order they are preferred.
#[derive(Default)]
struct ByBuild(Vec<(i64, Vec<usize>)>);

impl ByBuild {
    /// Lists `ask` with `build` (once).
    fn add(&mut self, build: i64, ask: usize) {
        match self.0.iter_mut().find(|(b, _)| *b == build) {
            Some((_, asks)) if asks.contains(&ask) => {}
            Some((_, asks)) => asks.push(ask),
            None => self.0.push((build, vec![ask])),
        }
    }
}

/// Builds an ask with room starts on, from the head of the queue.
const START_BUILDS: usize = 2;

/// Which of the builds at the head of the queue (`heads`, one per job, in queue order) each
/// ask of `needy` starts on: builds no worker is known to have first (so a worker new to a
/// sweep does not compile what another already has), then the others, each in queue order;
/// round-robin over the asks, [`START_BUILDS`] each, so asks served together start on
/// different builds.
fn spread(needy: &[usize], heads: &[i64], owned: &HashSet<i64>) -> ByBuild {
    let mut seen = HashSet::new();
    let distinct: Vec<i64> = heads.iter().copied().filter(|b| seen.insert(*b)).collect();
    let order: Vec<i64> = distinct
        .iter()
        .filter(|b| !owned.contains(b))
        .chain(distinct.iter().filter(|b| owned.contains(b)))
        .copied()
        .collect();
    let mut out = ByBuild::default();
    if order.is_empty() {
        return out;
    }
    let mut next = order.iter().cycle();
    for _ in 0..START_BUILDS.min(order.len()) {
        for &i in needy {
            if let Some(&build) = next.next() {
                out.add(build, i);
            }
        }
    }
    out
}

/// Builds each worker was last leased jobs of, newest last: what it has compiled (its build
/// cache), as far as this coordinator knows. A hint only: a coordinator that restarts, or
/// another one sharing the database, starts without it and the worker compiles again.
#[derive(Clone, Default)]
struct Affinity(Arc<Mutex<Known>>);

/// What [`Affinity`] remembers.
#[derive(Default)]
struct Known {
    /// Builds per worker, newest last.
    builds: HashMap<i64, Vec<i64>>,
    /// How many workers have each build: kept beside `builds` so a claim asks about the few
    /// builds at the head of the queue instead of walking every worker's list.
    holders: HashMap<i64, usize>,
}

/// Builds remembered per worker.
const BUILDS_KEPT: usize = 8;
/// Workers remembered; past this the memory starts again (a hint is cheap to lose).
const WORKERS_KEPT: usize = 100_000;

impl Affinity {
    /// The builds `worker` has, newest first.
    fn builds(&self, worker: i64) -> Vec<i64> {
        let known = self.0.lock().expect("affinity lock");
        known
            .builds
            .get(&worker)
            .map(|b| b.iter().rev().copied().collect())
            .unwrap_or_default()
    }

    /// Those of `builds` some worker is known to have.
    fn owned_among(&self, builds: &[i64]) -> HashSet<i64> {
        let known = self.0.lock().expect("affinity lock");
        builds
            .iter()
            .copied()
            .filter(|b| known.holders.contains_key(b))
            .collect()
    }

    /// Notes that `worker` was leased jobs of `builds`.
    fn record(&self, worker: i64, builds: impl Iterator<Item = i64>) {
        let mut known = self.0.lock().expect("affinity lock");
        if known.builds.len() >= WORKERS_KEPT && !known.builds.contains_key(&worker) {
            *known = Known::default();
        }
        let Known {
            builds: lists,
            holders,
        } = &mut *known;
        let list = lists.entry(worker).or_default();
        for build in builds {
            match list.iter().position(|&b| b == build) {
                Some(at) => {
                    list.remove(at);
                }
                None => *holders.entry(build).or_default() += 1,
            }
            list.push(build);
        }
        let over = list.len().saturating_sub(BUILDS_KEPT);
        for dropped in list.drain(..over) {
            if let Some(n) = holders.get_mut(&dropped) {
                *n -= 1;
                if *n == 0 {
                    holders.remove(&dropped);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_asks_start_on_builds_nobody_has_then_on_the_rest() {
        // Queue head: builds 1, 2, 1, 3, 4; build 2 is some worker's already.
        let heads = [1, 2, 1, 3, 4];
        let owned = HashSet::from([2]);
        let one = spread(&[0], &heads, &owned);
        assert_eq!(one.0, vec![(1, vec![0]), (3, vec![0])]);
        let three = spread(&[0, 1, 2], &heads, &owned);
        assert_eq!(
            three.0,
            vec![(1, vec![0, 1]), (3, vec![1, 2]), (4, vec![2]), (2, vec![0])]
        );
        assert!(spread(&[0], &[], &owned).0.is_empty());
    }

    #[test]
    fn affinity_keeps_the_newest_builds_of_each_worker() {
        let affinity = Affinity::default();
        affinity.record(7, [1, 2, 1].into_iter());
        assert_eq!(affinity.builds(7), [1, 2]);
        affinity.record(7, 10..20);
        assert_eq!(affinity.builds(7).len(), BUILDS_KEPT);
        assert_eq!(affinity.builds(7)[0], 19);
        assert_eq!(affinity.owned_among(&[1, 12, 99]), HashSet::from([12]));
        // A build another worker still has stays owned when one worker drops it.
        affinity.record(8, [12, 1].into_iter());
        affinity.record(7, 30..40);
        assert_eq!(
            affinity.owned_among(&[1, 12, 19, 35]),
            HashSet::from([1, 12, 35])
        );
    }
}
