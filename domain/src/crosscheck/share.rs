//! The config side of cross-checks: the share and minimum a config asks for, and how many
//! checks they make. Apart from the rest of [`crate::crosscheck`] because a spec validates
//! them while the planning of the checks builds on the spec's plan.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Share of positions checked when a config does not say (2 %).
pub const DEFAULT_SHARE: f64 = 0.02;
/// Least number of positions checked per build and suite when checks are on (capped at the
/// suite's size).
pub const DEFAULT_MIN: u32 = 3;
/// Most `cross_check_min` a config may ask for (a suite has at most this many positions
/// checked by the minimum alone).
pub const MAX_MIN: u32 = 10_000;

/// A share of positions, `0.0..=1.0` once validated. Compared bit for bit (a validated share
/// is never NaN), so the config and spec types stay `Eq`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
pub struct Share(pub f64);

impl Eq for Share {}

impl Default for Share {
    fn default() -> Self {
        Share(DEFAULT_SHARE)
    }
}

impl Share {
    /// Whether this is the default share (left out of a stored spec, so specs stored before
    /// cross-checks existed keep their identity).
    pub fn is_default(&self) -> bool {
        self.0.to_bits() == DEFAULT_SHARE.to_bits()
    }
}

/// The `cross_check_min` default, for serde.
pub fn default_min() -> u32 {
    DEFAULT_MIN
}

/// Whether `min` is the default (left out of a stored spec).
pub fn is_default_min(min: &u32) -> bool {
    *min == DEFAULT_MIN
}

/// How many positions of a suite of `size` are checked: `share` of them rounded up, at least
/// `min`, at most `size`; none when `share` is 0 (checks off).
pub fn count(size: usize, share: f64, min: u32) -> usize {
    if share <= 0.0 || size == 0 || share.is_nan() {
        return 0;
    }
    let by_share = (share.min(1.0) * size as f64).ceil() as usize;
    by_share.max(min as usize).min(size)
}

/// How many checks a sweep plans, without listing them (for validation's job bound).
pub fn planned(share: f64, min: u32, builds: usize, suite_sizes: &[usize], limits: usize) -> usize {
    let per_build: usize = suite_sizes.iter().map(|&n| count(n, share, min)).sum();
    per_build * builds * limits
}
