//! Paired statistics of a variant against the baseline, position by position: the geometric
//! mean of the node ratios with a seeded bootstrap confidence interval, the median ratio,
//! faster/slower/equal counts, and solved flips with McNemar's exact test. Pure arithmetic.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Bootstrap resamples: plenty for a 95 % percentile interval, and cheap enough per cell.
pub const RESAMPLES: usize = 2_000;

/// One position both the variant and the baseline finished without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The variant's nodes.
    pub nodes: u64,
    /// The baseline's nodes.
    pub base_nodes: u64,
    /// Solved by the variant?
    pub solved: bool,
    /// Solved by the baseline?
    pub base_solved: bool,
}

/// Paired statistics of one cell (a variant on a suite, or combined, at one limit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PairedStats {
    /// Positions compared (both sides valid).
    pub pairs: u64,
    /// Of those, positions with 0 nodes on either side: left out of the ratios.
    pub zero_nodes: u64,
    /// Geometric mean of variant/baseline node ratios; `null` when no ratio exists.
    pub geomean_ratio: Option<f64>,
    /// 95 % percentile-bootstrap interval of the geometric mean, `[lo, hi]`.
    pub ci95: Option<[f64; 2]>,
    /// Median of the ratios.
    pub median_ratio: Option<f64>,
    /// Positions where the variant searched fewer nodes.
    pub faster: u64,
    /// Positions where the variant searched more nodes.
    pub slower: u64,
    /// Positions with the same node count.
    pub equal: u64,
    /// Solved by the variant only.
    pub gained: u64,
    /// Solved by the baseline only.
    pub lost: u64,
    /// McNemar's exact two-sided p-value of the flips (1 when there are none).
    pub mcnemar_p: f64,
}

/// SplitMix64: a tiny PRNG whose sequence is fixed by its definition (unlike `StdRng`, which
/// may change between `rand` releases), so intervals stay reproducible, and a test can
/// recompute them independently.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `n` (multiply-shift; the bias is below 2^-40 for any realistic `n`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    /// Uniform in `0..bound` (`bound` > 0), by Lemire's multiply-and-reject, so no value is
    /// favoured at all.
    pub(crate) fn below_unbiased(&mut self, bound: u64) -> u64 {
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let m = u128::from(self.next()) * u128::from(bound);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

/// A seed from text (FNV-1a, 64 bits): e.g. the sweep id, build, limit and suite, so one
/// cell's interval is the same on every request.
pub fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The statistics of `pairs`, `None` when there are none.
pub fn paired_stats(pairs: &[Pair], seed: u64) -> Option<PairedStats> {
    if pairs.is_empty() {
        return None;
    }
    let mut s = PairedStats {
        pairs: pairs.len() as u64,
        zero_nodes: 0,
        geomean_ratio: None,
        ci95: None,
        median_ratio: None,
        faster: 0,
        slower: 0,
        equal: 0,
        gained: 0,
        lost: 0,
        mcnemar_p: 1.0,
    };
    let mut logs = Vec::with_capacity(pairs.len());
    for p in pairs {
        match p.nodes.cmp(&p.base_nodes) {
            std::cmp::Ordering::Less => s.faster += 1,
            std::cmp::Ordering::Greater => s.slower += 1,
            std::cmp::Ordering::Equal => s.equal += 1,
        }
        match (p.solved, p.base_solved) {
            (true, false) => s.gained += 1,
            (false, true) => s.lost += 1,
            _ => {}
        }
        if p.nodes == 0 || p.base_nodes == 0 {
            s.zero_nodes += 1;
        } else {
            logs.push((p.nodes as f64).ln() - (p.base_nodes as f64).ln());
        }
    }
    s.mcnemar_p = mcnemar_exact(s.gained, s.lost);
    if !logs.is_empty() {
        s.geomean_ratio = Some(mean(&logs).exp());
        s.ci95 = Some(bootstrap_ci(&logs, seed));
        let mut ratios: Vec<f64> = logs.iter().map(|l| l.exp()).collect();
        ratios.sort_by(f64::total_cmp);
        s.median_ratio = Some(median_sorted(&ratios));
    }
    Some(s)
}

/// Arithmetic mean of a non-empty slice (of log-ratios: its `exp` is their geometric mean).
pub(crate) fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Median of a sorted, non-empty slice (the mean of the middle two for an even length).
fn median_sorted(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Percentile bootstrap of the geometric mean: [`RESAMPLES`] resamples of the log-ratios
/// with replacement; the 2.5th and 97.5th percentiles (sorted means at indices 50 and 1949
/// of 2000), exponentiated. Shared with the speed ratios ([`crate::table::speed`]), so both
/// intervals of a table are made alike. `logs` must not be empty.
pub(crate) fn bootstrap_ci(logs: &[f64], seed: u64) -> [f64; 2] {
    let mut rng = SplitMix64(seed);
    let n = logs.len();
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| logs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let lo = RESAMPLES * 25 / 1000;
    let hi = RESAMPLES * 975 / 1000 - 1;
    [means[lo].exp(), means[hi].exp()]
}

/// McNemar's exact test: two-sided binomial p-value of `b` against `c` flips under p = 1/2,
/// `min(1, 2 * P(X <= min(b, c)))`, summed in log space so thousands of flips do not
/// underflow.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // ln P(X = 0) = -n ln 2; P(X = i + 1) = P(X = i) * (n - i) / (i + 1).
    let mut ln_p = -(n as f64) * std::f64::consts::LN_2;
    let mut total = ln_p.exp();
    for i in 0..k {
        ln_p += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        total += ln_p.exp();
    }
    (2.0 * total).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(nodes: u64, base_nodes: u64, solved: bool, base_solved: bool) -> Pair {
        Pair {
            nodes,
            base_nodes,
            solved,
            base_solved,
        }
    }

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b}");
    }

    #[test]
    fn mcnemar_matches_scipy_style_binomial() {
        // Expected with python3: from math import comb;
        // min(1, 2*sum(comb(n,i) for i in range(k+1))/2**n)
        close(mcnemar_exact(0, 0), 1.0, 0.0);
        close(mcnemar_exact(1, 0), 1.0, 0.0);
        close(mcnemar_exact(10, 2), 0.0385742187, 1e-9); // n=12, k=2: 2*79/4096
        close(mcnemar_exact(3, 3), 1.0, 0.0);
        close(mcnemar_exact(0, 8), 0.0078125, 1e-12); // 2/256
        close(mcnemar_exact(15, 5), 0.0413894653, 1e-9); // n=20, k=5: 2*21700/2**20
                                                         // 1500 vs 1400: python3 gives 0.06598734966518381 (exact, with big integers).
        close(mcnemar_exact(1500, 1400), 0.06598734966518381, 1e-9);
    }

    #[test]
    fn counts_geomean_and_median() {
        let pairs = [
            pair(50, 100, true, false),  // 0.5, gained
            pair(200, 100, false, true), // 2.0, lost
            pair(100, 100, true, true),  // 1.0
            pair(90, 100, false, false), // 0.9
            pair(0, 100, true, false),   // zero: no ratio, gained
        ];
        let s = paired_stats(&pairs, 7).expect("pairs");
        assert_eq!((s.pairs, s.zero_nodes), (5, 1));
        assert_eq!((s.faster, s.slower, s.equal), (3, 1, 1));
        assert_eq!((s.gained, s.lost), (2, 1));
        close(s.mcnemar_p, 1.0, 0.0);
        // python3: (0.5*2.0*1.0*0.9)**0.25 = 0.9740037464252967; median of
        // [0.5, 0.9, 1.0, 2.0] = 0.95.
        close(s.geomean_ratio.unwrap(), 0.9740037464252967, 1e-12);
        close(s.median_ratio.unwrap(), 0.95, 1e-12);
        let [lo, hi] = s.ci95.unwrap();
        assert!(lo <= s.geomean_ratio.unwrap() && s.geomean_ratio.unwrap() <= hi);
        // Same seed, same interval; nothing at all gives no statistics.
        assert_eq!(paired_stats(&pairs, 7), Some(s));
        assert_eq!(paired_stats(&[], 7), None);
        let zeros = paired_stats(&[pair(0, 0, false, false)], 1).unwrap();
        assert_eq!((zeros.zero_nodes, zeros.equal), (1, 1));
        assert_eq!(zeros.geomean_ratio, None);
    }

    #[test]
    fn bootstrap_matches_an_independent_python_run() {
        // Ratios 0.5 .. 1.4 in steps of 0.1 with seed 42. Expected by running this module's
        // SplitMix64 + multiply-shift index + percentile (indices 50 and 1949) re-implemented
        // in python3 (ints masked to 64 bits, math.log / math.exp), printed with repr().
        let pairs: Vec<Pair> = (5..15).map(|i| pair(i * 10, 100, false, false)).collect();
        let s = paired_stats(&pairs, 42).unwrap();
        let [lo, hi] = s.ci95.unwrap();
        close(lo, PY_LO, 1e-9);
        close(hi, PY_HI, 1e-9);
        // And the same interval is near the normal approximation exp(m +- 1.96 sd/sqrt(n))
        // of the log-ratios (python3 statistics.stdev): a sanity check on the method itself.
        close(lo, 0.7312, 0.03);
        close(hi, 1.1169, 0.03);
    }

    const PY_LO: f64 = 0.7372556346443357;
    const PY_HI: f64 = 1.0962609484597106;

    #[test]
    fn seeds_are_stable() {
        // python3: FNV-1a 64 of b"a" = 0xaf63dc4c8601ec8c.
        assert_eq!(seed_of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(seed_of("1/K=1/depth 5/a"), seed_of("1/K=1/depth 5/b"));
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // The published splitmix64 outputs for seed 0; any platform must produce these.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next(), 0x06C4_5D18_8009_454F);
        let mut rng = SplitMix64(99);
        for bound in [1u64, 2, 3, 7, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(rng.below_unbiased(bound) < bound);
            }
        }
    }
}
