//! Counters and latency histograms shared by every simulated worker, and the final report.
//!
//! Everything is atomic (errors, rare, sit behind a mutex), so 10,000 tasks record their calls
//! without a lock on the hot path.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

/// The worker-protocol calls the generator makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `POST /api/v1/workers`.
    Register,
    /// `POST /api/v1/workers/{id}/lease`.
    Lease,
    /// `POST /api/v1/workers/{id}/heartbeat`.
    Heartbeat,
    /// `POST /api/v1/workers/{id}/results`.
    Results,
}

impl Call {
    /// Every call, in report order.
    pub const ALL: [Call; 4] = [Call::Register, Call::Lease, Call::Heartbeat, Call::Results];

    /// Name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Call::Register => "register",
            Call::Lease => "lease",
            Call::Heartbeat => "heartbeat",
            Call::Results => "results",
        }
    }
}

/// Sub-buckets per power of two (5 bits of mantissa: about 3 % resolution).
const SUB: usize = 32;
const SUB_BITS: u32 = 5;
const BUCKETS: usize = 64 * SUB;

/// A lock-free log-linear histogram of latencies in microseconds.
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // >= SUB_BITS
    let shift = exp - SUB_BITS;
    let mantissa = (us >> shift) as usize - SUB; // 0..SUB
    (shift as usize + 1) * SUB + mantissa
}

/// The largest value that falls in bucket `i`.
fn bucket_max(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let shift = (i / SUB - 1) as u32;
    let low = ((SUB + i % SUB) as u64) << shift;
    low + ((1u64 << shift) - 1)
}

impl Histogram {
    /// Records one latency.
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
    }

    /// The `q` quantile (0 to 1) in milliseconds, or 0 when nothing was recorded.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let target = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= target {
                return bucket_max(i) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// What happened to one kind of call.
#[derive(Debug, Default)]
pub struct CallStats {
    ok: AtomicU64,
    latency: Histogram,
    errors: Mutex<BTreeMap<String, u64>>,
}

/// Everything the simulated workers record.
#[derive(Debug, Default)]
pub struct Stats {
    calls: [CallStats; 4],
    /// Jobs received from lease calls.
    pub jobs_leased: AtomicU64,
    /// Lease calls that returned no job.
    pub empty_leases: AtomicU64,
    /// Results the coordinator newly stored (`accepted` of the acks).
    pub results_stored: AtomicU64,
    /// Results the coordinator already had (`duplicates` of the acks).
    pub duplicates: AtomicU64,
    /// Jobs a heartbeat or results ack called `lost` or `cancelled`.
    pub lost: AtomicU64,
    /// Leased jobs whose results could not be uploaded (left to expire on the coordinator).
    pub abandoned: AtomicU64,
}

impl Stats {
    fn of(&self, call: Call) -> &CallStats {
        &self.calls[call as usize]
    }

    /// Records a successful (2xx, well-formed) call and its latency.
    pub fn ok(&self, call: Call, latency: Duration) {
        let s = self.of(call);
        s.ok.fetch_add(1, Relaxed);
        s.latency.record(latency);
    }

    /// Records a failed call under `kind` (an HTTP status, `timeout`, `connect`, ...).
    pub fn error(&self, call: Call, kind: &str) {
        let mut errors = self.of(call).errors.lock().expect("error counts lock");
        *errors.entry(kind.to_string()).or_default() += 1;
    }

    /// The report over a run of `elapsed` that cost the generator `cpu_secs` of CPU (register
    /// calls are excluded from rates: they happen before the run starts).
    pub fn report(&self, settings: Settings, elapsed: Duration, cpu_secs: Option<f64>) -> Report {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let calls = Call::ALL
            .iter()
            .map(|&c| {
                let s = self.of(c);
                let ok = s.ok.load(Relaxed);
                CallReport {
                    call: c.name(),
                    ok,
                    per_sec: if c == Call::Register {
                        0.0
                    } else {
                        ok as f64 / secs
                    },
                    p50_ms: s.latency.quantile_ms(0.50),
                    p99_ms: s.latency.quantile_ms(0.99),
                    max_ms: s.latency.quantile_ms(1.0),
                    errors: s.errors.lock().expect("error counts lock").clone(),
                }
            })
            .collect::<Vec<_>>();
        let stored = self.results_stored.load(Relaxed);
        Report {
            lease_calls_per_sec: calls[Call::Lease as usize].per_sec,
            results_per_sec: stored as f64 / secs,
            settings,
            elapsed_secs: secs,
            cpu_secs,
            calls,
            jobs_leased: self.jobs_leased.load(Relaxed),
            empty_leases: self.empty_leases.load(Relaxed),
            results_stored: stored,
            duplicates: self.duplicates.load(Relaxed),
            lost: self.lost.load(Relaxed),
            abandoned: self.abandoned.load(Relaxed),
        }
    }
}

/// How the run was set up, echoed in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Simulated workers.
    pub workers: usize,
    /// `lease` or `heartbeat-only`.
    pub mode: &'static str,
    /// `max_jobs` of each lease call.
    pub jobs_per_lease: u32,
    /// Requested run length in seconds.
    pub duration_secs: u64,
    /// Milliseconds each worker waits between its heartbeat and its upload (0: saturation).
    pub work_ms: u64,
}

/// One call type's figures.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    /// Call name.
    pub call: &'static str,
    /// Successful calls.
    pub ok: u64,
    /// Successful calls per second of the run (0 for `register`).
    pub per_sec: f64,
    /// Median latency of successful calls.
    pub p50_ms: f64,
    /// 99th percentile latency of successful calls.
    pub p99_ms: f64,
    /// Slowest successful call.
    pub max_ms: f64,
    /// Failed calls by HTTP status or transport failure.
    pub errors: BTreeMap<String, u64>,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Setup.
    pub settings: Settings,
    /// Seconds from the first lease or heartbeat to the last worker's stop.
    pub elapsed_secs: f64,
    /// CPU seconds (user + system) the generator spent in that time (Linux only).
    pub cpu_secs: Option<f64>,
    /// Successful lease calls per second.
    pub lease_calls_per_sec: f64,
    /// Results newly stored per second.
    pub results_per_sec: f64,
    /// Per call type.
    pub calls: Vec<CallReport>,
    /// Jobs received.
    pub jobs_leased: u64,
    /// Lease calls that returned nothing.
    pub empty_leases: u64,
    /// Results newly stored.
    pub results_stored: u64,
    /// Results the coordinator already had.
    pub duplicates: u64,
    /// Jobs reported lost or cancelled.
    pub lost: u64,
    /// Leased jobs whose upload failed for good (stranded until their lease expires).
    pub abandoned: u64,
}

/// CPU seconds (user + system) this process has used so far, from `/proc/self/stat`;
/// `None` where that file does not exist.
pub fn own_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is the first, utime and
    // stime the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux architecture the project runs on.
    Some(ticks as f64 / 100.0)
}

fn errors_text(errors: &BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return "0".to_string();
    }
    let parts: Vec<String> = errors.iter().map(|(k, n)| format!("{k}:{n}")).collect();
    parts.join(" ")
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.settings;
        write!(
            f,
            "{} workers, {} mode, {} jobs per lease, {} ms of work per lease, {:.1} s",
            s.workers, s.mode, s.jobs_per_lease, s.work_ms, self.elapsed_secs
        )?;
        match self.cpu_secs {
            Some(cpu) => writeln!(f, ", generator CPU {cpu:.1} s")?,
            None => writeln!(f)?,
        }
        writeln!(
            f,
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9}  errors",
            "call", "ok", "per s", "p50 ms", "p99 ms", "max ms"
        )?;
        for c in &self.calls {
            writeln!(
                f,
                "{:<10} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {}",
                c.call,
                c.ok,
                c.per_sec,
                c.p50_ms,
                c.p99_ms,
                c.max_ms,
                errors_text(&c.errors)
            )?;
        }
        writeln!(
            f,
            "lease calls/s {:.1}, results/s {:.1}; jobs leased {} (empty leases {}), results stored {}, duplicates {}, lost {}, abandoned {}",
            self.lease_calls_per_sec,
            self.results_per_sec,
            self.jobs_leased,
            self.empty_leases,
            self.results_stored,
            self.duplicates,
            self.lost,
            self.abandoned
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 31, 32, 33, 63, 64, 65, 1000, 1_000_000, u64::MAX] {
            let i = bucket_of(us);
            assert!(i >= last, "{us}");
            assert!(bucket_max(i) >= us, "{us}");
            // Within about 3 % above the value.
            assert!(bucket_max(i) as f64 <= us as f64 * 1.04 + 1.0, "{us}");
            last = i;
        }
        assert!(bucket_of(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles() {
        let h = Histogram::default();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let p50 = h.quantile_ms(0.5);
        let p99 = h.quantile_ms(0.99);
        assert!((50.0..=52.0).contains(&p50), "{p50}");
        assert!((99.0..=102.0).contains(&p99), "{p99}");
        assert_eq!(Histogram::default().quantile_ms(0.5), 0.0);
    }
}
