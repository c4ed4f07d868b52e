//! The store's clock. Every time the protocol's rules depend on (when a lease expires, when a
//! worker was last seen, which workers are live) is read from one [`Clock`] and bound into
//! the statements, on both backends, so a test moves time forward instead of sleeping until
//! a lease expires. Production uses the system clock. Times that only record when a row was
//! written (a sweep's or a result's `created_at` on Postgres) keep the database's default.
//!
//! Several coordinators sharing one database each read their own system clock: their clocks
//! must agree to well within a lease (NTP does), as a lease written by one is judged by all.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The system clock, plus an offset that only tests move ([`Clock::advance`]). Clones share
/// the offset, so a test's handle moves the store's clock.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// Milliseconds added to the system clock.
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Now.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Now, in unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }

    /// Moves this clock (and every clone of it) forward by `by`, as if that much time passed.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// `d` before `now`; an absurd span reaches back to 1970, which every backend can store.
pub(crate) fn before(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// `d` after `now` (a lease's expiry); an absurd span saturates at the latest time every
/// backend can store (year 9999).
pub(crate) fn after(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    let latest = DateTime::from_timestamp(253_402_300_799, 0).unwrap_or(now);
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .map_or(latest, |t| t.min(latest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_a_clone_moves_the_original() {
        let clock = Clock::default();
        let before = clock.now();
        clock.clone().advance(Duration::from_secs(3600));
        let moved = clock.now() - before;
        assert!(moved >= chrono::Duration::seconds(3600), "{moved}");
        assert!(moved < chrono::Duration::seconds(3660), "{moved}");
    }
}
