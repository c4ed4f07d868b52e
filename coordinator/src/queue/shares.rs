//! Fair shares of the workers between the sweeps with work, at lease time. Each sweep with
//! fresh work weighs its priority (`low` 0.5, `normal` 1, `high` 2) divided by the number of
//! such sweeps its submitter has, so one person's ten sweeps together weigh what another's
//! one does. A claim sends each asking worker to a sweep: the one it is on while that sweep
//! is not above its share (so it keeps its builds), else the sweep furthest below its share.
//! Workers are counted where this coordinator last sent them, for a few leases' time: a
//! hint kept in memory, like build affinity, cheap to lose (a restarted coordinator, or
//! another one on the same database, starts from none and evens out within a lease or two). Running jobs are never taken back: a worker moves when it next asks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the sweeps with work and their weights are kept before they are read again.
const WEIGHTS_KEPT: Duration = Duration::from_millis(500);

/// How far (in workers) a worker's own sweep may lag the neediest one and still keep it:
/// less than a whole worker, so two sweeps do not trade one worker back and forth.
const KEEP_WITHIN: f64 = 0.5;

/// A sweep with fresh work (or cross-checks ready) and what it weighs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Weighed {
    /// Sweep id.
    pub sweep: i64,
    /// Its weight (see the module doc).
    pub weight: f64,
    /// Whether it has fresh work; without, only cross-checks are left of it.
    pub work: bool,
}

/// The weight of a sweep of `priority` whose submitter has `sweeps` sweeps with work.
pub(crate) fn weight(priority: &str, sweeps: usize) -> f64 {
    let p = match priority {
        "low" => 0.5,
        "high" => 2.0,
        _ => 1.0,
    };
    p / sweeps.max(1) as f64
}

/// Where workers are and which sweeps have work, as this coordinator knows it.
#[derive(Clone, Default)]
pub(crate) struct Shares {
    /// The sweep each worker was last sent to, and how many count on each sweep.
    serving: Arc<Mutex<Serving>>,
    /// The sweeps with work and their weights, and when they were read.
    weighed: Arc<Mutex<Option<Read>>>,
}

/// The sweeps with work and their weights, as read at an instant.
type Read = (Instant, Vec<Weighed>);

/// The sweep each worker was last sent to, kept so that a claim reads how many workers each
/// sweep has without walking every worker: counts per sweep, and the workers in the order
/// their time there runs out, taken off the counts as it does.
#[derive(Default)]
struct Serving {
    /// The sweep each worker was last sent to, and until when it counts there.
    at: HashMap<i64, (i64, Instant)>,
    /// Workers counted on each sweep (those of `at` whose time has not run out).
    count: HashMap<i64, u32>,
    /// (until, worker) of every sending; one that a later sending replaced is skipped.
    expiry: BinaryHeap<Reverse<(Instant, i64)>>,
}

impl Serving {
    /// Takes off the counts the workers whose time ran out by `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&Reverse((until, worker))) = self.expiry.peek() {
            if until > now {
                break;
            }
            self.expiry.pop();
            if let Some(&(sweep, current)) = self.at.get(&worker) {
                if current == until {
                    self.at.remove(&worker);
                    self.uncount(sweep);
                }
            }
        }
    }

    fn uncount(&mut self, sweep: i64) {
        if let Some(n) = self.count.get_mut(&sweep) {
            *n -= 1;
            if *n == 0 {
                self.count.remove(&sweep);
            }
        }
    }

    /// `worker` counts on `sweep` until `until`, wherever it counted before.
    fn send(&mut self, worker: i64, sweep: i64, until: Instant) {
        if self.at.len() >= WORKERS_KEPT && !self.at.contains_key(&worker) {
            *self = Serving::default();
        }
        if let Some((before, _)) = self.at.insert(worker, (sweep, until)) {
            self.uncount(before);
        }
        *self.count.entry(sweep).or_default() += 1;
        self.expiry.push(Reverse((until, worker)));
    }
}

/// How many leases' time a worker counts on the sweep it was last sent to.
const COUNTED_LEASES: u32 = 3;

/// Workers remembered at most; past it the memory starts over.
const WORKERS_KEPT: usize = 100_000;

impl Shares {
    /// The sweeps with work and their weights, if read less than [`WEIGHTS_KEPT`] ago.
    pub fn weighed(&self) -> Option<Vec<Weighed>> {
        let kept = self.weighed.lock().expect("shares lock");
        kept.as_ref()
            .filter(|(at, _)| at.elapsed() < WEIGHTS_KEPT)
            .map(|(_, w)| w.clone())
    }

    /// Keeps `weighed`, as just read.
    pub fn keep_weighed(&self, weighed: Vec<Weighed>) {
        *self.weighed.lock().expect("shares lock") = Some((Instant::now(), weighed));
    }

    /// How many workers each sweep has, those whose lease has not run out, but `asking`:
    /// the sweeps' counts less the asking workers on them (not a walk over every worker).
    pub fn held(&self, asking: &[i64]) -> HashMap<i64, u32> {
        let now = Instant::now();
        let mut serving = self.serving.lock().expect("shares lock");
        serving.expire(now);
        let mut held = serving.count.clone();
        for worker in asking {
            if let Some((sweep, _)) = serving.at.get(worker) {
                if let Some(n) = held.get_mut(sweep) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        held.retain(|_, n| *n > 0);
        held
    }

    /// The sweep `worker` was last sent to, while its lease lasts.
    pub fn serving(&self, worker: i64) -> Option<i64> {
        let serving = self.serving.lock().expect("shares lock");
        serving
            .at
            .get(&worker)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(sweep, _)| *sweep)
    }

    /// Notes that `worker` was sent to `sweep` for a lease of `lease`. It counts there for
    /// [`COUNTED_LEASES`] leases: a job may outlast its lease (heartbeats renew it) and a
    /// worker asks again only as its jobs end.
    pub fn send(&self, worker: i64, sweep: i64, lease: Duration) {
        let now = Instant::now();
        let mut serving = self.serving.lock().expect("shares lock");
        serving.expire(now);
        serving.send(worker, sweep, now + lease * COUNTED_LEASES);
    }
}

/// The sweep each asking worker goes to, from `weighed` (the sweeps with work), `held` (how
/// many other workers each sweep has) and each ask's current sweep, in the asks' order; `None`
/// when no sweep has work. Pure arithmetic (see the module doc).
pub(crate) fn targets(
    weighed: &[Weighed],
    held: &HashMap<i64, u32>,
    current: &[Option<i64>],
) -> Vec<Option<i64>> {
    let total_weight: f64 = weighed.iter().map(|w| w.weight).sum();
    if weighed.is_empty() || total_weight <= 0.0 {
        return current.iter().map(|_| None).collect();
    }
    let workers = weighed
        .iter()
        .map(|w| held.get(&w.sweep).copied().unwrap_or(0))
        .sum::<u32>() as f64
        + current.len() as f64;
    let mut count: HashMap<i64, f64> = weighed
        .iter()
        .map(|w| (w.sweep, f64::from(held.get(&w.sweep).copied().unwrap_or(0))))
        .collect();
    let lag = |w: &Weighed, count: &HashMap<i64, f64>| {
        workers * w.weight / total_weight - count[&w.sweep]
    };
    current
        .iter()
        .map(|cur| {
            // The neediest sweep, oldest first among equals.
            let neediest = weighed
                .iter()
                .max_by(|a, b| {
                    lag(a, &count)
                        .total_cmp(&lag(b, &count))
                        .then(b.sweep.cmp(&a.sweep))
                })
                .expect("weighed is not empty");
            let own = cur.and_then(|c| weighed.iter().find(|w| w.sweep == c));
            let to = match own {
                Some(w) if lag(w, &count) >= lag(neediest, &count) - KEEP_WITHIN => w.sweep,
                _ => neediest.sweep,
            };
            *count.get_mut(&to).expect("a weighed sweep") += 1.0;
            Some(to)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(sweep: i64, weight: f64) -> Weighed {
        Weighed {
            sweep,
            weight,
            work: true,
        }
    }

    #[test]
    fn a_new_sweep_takes_a_worker_from_the_one_that_had_them_all() {
        // Two one-core workers on sweep 1; sweep 2 arrives; worker A asks.
        let both = [w(1, 1.0), w(2, 1.0)];
        let held = HashMap::from([(1, 1)]);
        assert_eq!(targets(&both, &held, &[Some(1)]), [Some(2)]);
        // Then B asks, A being on 2: B stays on 1.
        let held = HashMap::from([(2, 1)]);
        assert_eq!(targets(&both, &held, &[Some(1)]), [Some(1)]);
        // Alone, a sweep keeps every worker.
        let held = HashMap::from([(1, 1)]);
        assert_eq!(targets(&[w(1, 1.0)], &held, &[Some(1)]), [Some(1)]);
    }

    #[test]
    fn weights_split_the_workers_and_asks_together_spread() {
        // 1 high (2) against 1 normal (1): 6 new workers go 4 and 2.
        let got = targets(&[w(1, 2.0), w(2, 1.0)], &HashMap::new(), &[None; 6]);
        let on = |s| got.iter().filter(|t| **t == Some(s)).count();
        assert_eq!((on(1), on(2)), (4, 2));
        // One submitter's two sweeps (0.5 each) against another's one (1): 4 workers 1/1/2.
        let got = targets(
            &[w(1, 0.5), w(2, 0.5), w(3, 1.0)],
            &HashMap::new(),
            &[None; 4],
        );
        let on = |s| got.iter().filter(|t| **t == Some(s)).count();
        assert_eq!((on(1), on(2), on(3)), (1, 1, 2));
    }

    #[test]
    fn a_worker_keeps_its_sweep_within_half_a_worker_and_nothing_without_work() {
        // Three workers, two equal sweeps: 2 and 1 is as even as it gets; the worker of the
        // sweep with 2 keeps it rather than swapping back and forth.
        let both = [w(1, 1.0), w(2, 1.0)];
        let held = HashMap::from([(1, 1), (2, 1)]);
        assert_eq!(targets(&both, &held, &[Some(1)]), [Some(1)]);
        assert_eq!(targets(&[], &held, &[Some(1), None]), [None, None]);
        // A sweep whose work ran out sends its worker to one that has some.
        assert_eq!(targets(&[w(2, 1.0)], &held, &[Some(1)]), [Some(2)]);
    }

    #[test]
    fn priorities_and_submitters_weigh() {
        assert_eq!(weight("normal", 1), 1.0);
        assert_eq!(weight("high", 1), 2.0);
        assert_eq!(weight("low", 2), 0.25);
    }

    #[test]
    fn workers_count_until_their_lease_runs_out() {
        let shares = Shares::default();
        shares.send(1, 10, Duration::from_secs(60));
        shares.send(2, 10, Duration::from_secs(60));
        shares.send(3, 11, Duration::ZERO);
        assert_eq!(shares.held(&[2]), HashMap::from([(10, 1)]));
        assert_eq!(shares.serving(1), Some(10));
        assert_eq!(shares.serving(3), None);
        // A worker sent elsewhere moves its count; one whose time ran out leaves it.
        shares.send(2, 11, Duration::from_secs(60));
        assert_eq!(shares.held(&[]), HashMap::from([(10, 1), (11, 1)]));
        shares.send(1, 10, Duration::ZERO);
        assert_eq!(shares.held(&[]), HashMap::from([(11, 1)]));
        assert_eq!(shares.held(&[2]), HashMap::new());
    }
}
