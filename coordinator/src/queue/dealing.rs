//! How a claim deals jobs out to the lease calls it serves: each call's room, the builds
//! each worker already has (build affinity, [`Affinity`]), and which builds at the head of
//! the queue workers new to a sweep start on ([`spread`]). Pure bookkeeping; the jobs come
//! from [`super::queue`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// A claim's jobs being dealt out to its asks.
#[derive(Debug)]
pub(super) struct Dealing {
    /// Room left per ask (by index in the batch).
    room: Vec<u32>,
    /// Jobs dealt per ask, in the order dealt.
    pub dealt: Vec<Vec<i64>>,
    /// Jobs dealt so far.
    taken: HashSet<i64>,
}

impl Dealing {
    /// Nothing dealt yet; `room` per ask.
    pub fn new(room: Vec<u32>) -> Self {
        Self {
            dealt: room.iter().map(|_| Vec::new()).collect(),
            room,
            taken: HashSet::new(),
        }
    }

    /// Room left over `asks`.
    pub fn wanted(&self, asks: &[usize]) -> i64 {
        asks.iter().map(|&i| i64::from(self.room[i])).sum()
    }

    /// Room left of `ask`.
    pub fn room(&self, ask: usize) -> u32 {
        self.room[ask]
    }

    /// Gives `job` to `ask` unless it has no room or the job is dealt already.
    pub fn give(&mut self, ask: usize, job: i64) -> bool {
        if self.room[ask] == 0 || !self.taken.insert(job) {
            return false;
        }
        self.room[ask] -= 1;
        self.dealt[ask].push(job);
        true
    }

    /// Gives `job` to `ask` alone: nothing else is dealt to it after. False when it had
    /// something dealt already, or the job is dealt.
    pub fn give_alone(&mut self, ask: usize, job: i64) -> bool {
        if !self.dealt[ask].is_empty() || !self.give(ask, job) {
            return false;
        }
        self.room[ask] = 0;
        true
    }

    /// Deals `jobs` in their order to `asks` in theirs, each filled before the next; returns
    /// the jobs nobody had room for.
    pub fn in_order(&mut self, asks: &[usize], jobs: Vec<i64>) -> Vec<i64> {
        let mut jobs = jobs.into_iter();
        for &i in asks {
            while self.room[i] > 0 {
                let Some(job) = jobs.next() else {
                    return Vec::new();
                };
                self.give(i, job);
            }
        }
        jobs.collect()
    }
}

/// Asks listed by build, builds in the order they are preferred.
#[derive(Debug, Default)]
pub(super) struct ByBuild(pub Vec<(i64, Vec<usize>)>);

impl ByBuild {
    /// Lists `ask` with `build` (once).
    pub fn add(&mut self, build: i64, ask: usize) {
        match self.0.iter_mut().find(|(b, _)| *b == build) {
            Some((_, asks)) if asks.contains(&ask) => {}
            Some((_, asks)) => asks.push(ask),
            None => self.0.push((build, vec![ask])),
        }
    }
}

/// Builds an ask with room starts on, from the head of the queue.
const START_BUILDS: usize = 2;

/// Which of the builds at the head of the queue (`heads`, in queue order) each ask of
/// `needy` starts on: builds no worker is known to have first (so a worker new to a sweep
/// does not compile what another already has), then the others, each in queue order;
/// round-robin over the asks, [`START_BUILDS`] each, so asks served together start on
/// different builds.
pub(super) fn spread(needy: &[usize], heads: &[i64], owned: &HashSet<i64>) -> ByBuild {
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
pub(crate) struct Affinity(Arc<Mutex<Known>>);

/// What [`Affinity`] remembers.
#[derive(Default)]
struct Known {
    /// Builds per worker, newest last.
    builds: HashMap<i64, Vec<i64>>,
    /// How many workers have each build: kept beside `builds` so a claim asks about the few
    /// builds at the head of the queue instead of walking every worker's list.
    holders: HashMap<i64, usize>,
    /// The sweep of each build remembered (so a claim keeps a worker's builds of the sweep
    /// its share sends it to).
    sweep_of: HashMap<i64, i64>,
}

/// Builds remembered per worker.
const BUILDS_KEPT: usize = 8;
/// Workers remembered; past this the memory starts again (a hint is cheap to lose).
const WORKERS_KEPT: usize = 100_000;

impl Affinity {
    /// The builds `worker` has, newest first.
    pub fn builds(&self, worker: i64) -> Vec<i64> {
        let known = self.0.lock().expect("affinity lock");
        known
            .builds
            .get(&worker)
            .map(|b| b.iter().rev().copied().collect())
            .unwrap_or_default()
    }

    /// Those of `builds` some worker is known to have.
    pub fn owned_among(&self, builds: &[i64]) -> HashSet<i64> {
        let known = self.0.lock().expect("affinity lock");
        builds
            .iter()
            .copied()
            .filter(|b| known.holders.contains_key(b))
            .collect()
    }

    /// The sweep of `build`, if known.
    pub fn sweep_of(&self, build: i64) -> Option<i64> {
        let known = self.0.lock().expect("affinity lock");
        known.sweep_of.get(&build).copied()
    }

    /// Notes that `worker` was leased jobs of `builds`, each (build, its sweep).
    pub fn record(&self, worker: i64, builds: impl Iterator<Item = (i64, i64)>) {
        let mut known = self.0.lock().expect("affinity lock");
        if known.builds.len() >= WORKERS_KEPT && !known.builds.contains_key(&worker) {
            *known = Known::default();
        }
        let Known {
            builds: lists,
            holders,
            sweep_of,
        } = &mut *known;
        let list = lists.entry(worker).or_default();
        for (build, sweep) in builds {
            sweep_of.insert(build, sweep);
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
                    sweep_of.remove(&dropped);
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
        affinity.record(7, [1, 2, 1].into_iter().map(|b| (b, 100)));
        assert_eq!(affinity.builds(7), [1, 2]);
        affinity.record(7, (10..20).map(|b| (b, 100)));
        assert_eq!(affinity.builds(7).len(), BUILDS_KEPT);
        assert_eq!(affinity.builds(7)[0], 19);
        assert_eq!(affinity.owned_among(&[1, 12, 99]), HashSet::from([12]));
        // A build another worker still has stays owned when one worker drops it.
        affinity.record(8, [12, 1].into_iter().map(|b| (b, 100)));
        affinity.record(7, (30..40).map(|b| (b, 101)));
        assert_eq!(affinity.sweep_of(35), Some(101));
        assert_eq!(affinity.sweep_of(1), Some(100));
        assert_eq!(
            affinity.owned_among(&[1, 12, 19, 35]),
            HashSet::from([1, 12, 35])
        );
    }

    #[test]
    fn jobs_are_dealt_in_order_each_ask_filled_before_the_next() {
        let mut d = Dealing::new(vec![2, 0, 3]);
        let left = d.in_order(&[0, 1, 2], vec![10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(d.dealt, vec![vec![10, 11], vec![], vec![12, 13, 14]]);
        assert_eq!(left, [15, 16]);
        assert!(!d.give(0, 17), "no room left");
        assert_eq!(d.wanted(&[0, 1, 2]), 0);
    }
}
