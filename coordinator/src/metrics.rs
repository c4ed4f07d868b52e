//! What the coordinator tells Prometheus (`GET /metrics`, text format 0.0.4).
//!
//! Counters are bumped by the service where each event happens (never per store backend);
//! gauges that describe the database (jobs by state, workers alive, pool connections) are read
//! at scrape time, so they cost nothing between scrapes and are never stale. Each coordinator
//! owns its registry: several in one process (tests, a local run) never mix their figures.
//!
//! Metric names are part of the interface: `dashboards/grafana-sweep.json` queries them and
//! `tests/metrics.rs` checks that every one it queries is exported.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use prometheus::core::Collector;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::store::StoreGauges;

/// The content type of the text exposition format the scrape answers in.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// The states jobs are gauged in: waiting to be handed out (`queued`: fresh, given back, or
/// to be retried) and held by a worker's lease (`leased`). Each is exported on every scrape,
/// 0 when no job is in it, so a state that empties does not vanish from graphs and alerts.
/// Closed jobs (done, failed, cancelled) are not gauged: a sweep's progress and state show
/// them, and counting them would read every job.
pub const JOB_STATES: [&str; 2] = ["queued", "leased"];

/// Request latency buckets in seconds: a lease or heartbeat takes milliseconds, a table of a
/// big sweep or a source upload up to seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The coordinator's metrics: counters the service bumps, gauges filled at scrape time.
pub struct Metrics {
    registry: Registry,
    /// Lease calls answered (with or without jobs).
    pub lease_calls: IntCounter,
    /// Jobs handed out by lease calls.
    pub jobs_leased: IntCounter,
    /// Heartbeat calls answered.
    pub heartbeats: IntCounter,
    /// Result upload calls answered.
    pub result_uploads: IntCounter,
    /// Results newly stored by uploads (a failed try of a position counts as one; results
    /// already stored do not).
    pub results_accepted: IntCounter,
    /// Failed tries of positions (engine crash, hang, nonsense answer) in uploads for leases
    /// the worker still held.
    pub position_errors: IntCounter,
    /// Build failures reported by workers.
    pub build_failures: IntCounter,
    /// Source snapshots uploaded by submitters and stored.
    pub source_uploads: IntCounter,
    /// Bearer tokens looked up in the database: not answered from the caches of known and
    /// unknown tokens, nor refused for their form (see `service/auth.rs`).
    pub token_lookups: IntCounter,
    requests: HistogramVec,
    jobs: IntGaugeVec,
    workers_alive: IntGauge,
    cross_check_mismatches: IntGauge,
    pool_connections: IntGaugeVec,
    pool_max: IntGaugeVec,
}

impl Metrics {
    /// A fresh registry with every metric registered at zero.
    pub fn new() -> Self {
        let registry = Registry::new();
        // Registered in this order: the worker protocol's counters, the other counters, the
        // request latencies, the gauges read at scrape time.
        let protocol = ProtocolCounters::register(&registry);
        let callers = CallerCounters::register(&registry);
        let requests = register(&registry, request_histogram());
        let gauges = ScrapeGauges::register(&registry);
        Self {
            registry,
            lease_calls: protocol.lease_calls,
            jobs_leased: protocol.jobs_leased,
            heartbeats: protocol.heartbeats,
            result_uploads: protocol.result_uploads,
            results_accepted: protocol.results_accepted,
            position_errors: protocol.position_errors,
            build_failures: callers.build_failures,
            source_uploads: callers.source_uploads,
            token_lookups: callers.token_lookups,
            requests,
            jobs: gauges.jobs,
            workers_alive: gauges.workers_alive,
            cross_check_mismatches: gauges.cross_check_mismatches,
            pool_connections: gauges.pool_connections,
            pool_max: gauges.pool_max,
        }
    }

    /// Records one request. `route` must be the matched route template (or a fixed word for
    /// none), never the raw path: ids in paths would make a series per id.
    pub fn observe_request(
        &self,
        route: &str,
        method: &Method,
        status: StatusCode,
        took: Duration,
    ) {
        self.requests
            .with_label_values(&[route, method_label(method), status_class(status)])
            .observe(took.as_secs_f64());
    }

    /// The exposition text, with the gauges set from `gauges` (read from the store just now).
    pub fn render(&self, gauges: &StoreGauges) -> anyhow::Result<String> {
        for state in JOB_STATES {
            self.jobs.with_label_values(&[state]).set(0);
        }
        for (state, count) in &gauges.jobs_by_state {
            self.jobs.with_label_values(&[state.as_str()]).set(*count);
        }
        self.workers_alive.set(gauges.workers_alive);
        self.cross_check_mismatches
            .set(gauges.cross_check_mismatches);
        for pool in &gauges.pools {
            let in_use = i64::from(pool.size).saturating_sub(pool.idle as i64).max(0);
            self.pool_connections
                .with_label_values(&[pool.name, "in_use"])
                .set(in_use);
            self.pool_connections
                .with_label_values(&[pool.name, "idle"])
                .set(pool.idle as i64);
            self.pool_max
                .with_label_values(&[pool.name])
                .set(i64::from(pool.max));
        }
        let mut text = String::new();
        TextEncoder::new().encode_utf8(&self.registry.gather(), &mut text)?;
        Ok(text)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers `collector` with `registry`; returns it, to be kept and updated.
fn register<C: Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    registry
        .register(Box::new(collector.clone()))
        .expect("unique metric");
    collector
}

/// A counter named `name`, registered with `registry`.
fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    register(
        registry,
        IntCounter::new(name, help).expect("valid counter"),
    )
}

/// The worker protocol's counters: lease calls, heartbeats, uploads and what they carry.
struct ProtocolCounters {
    lease_calls: IntCounter,
    jobs_leased: IntCounter,
    heartbeats: IntCounter,
    result_uploads: IntCounter,
    results_accepted: IntCounter,
    position_errors: IntCounter,
}

impl ProtocolCounters {
    fn register(registry: &Registry) -> Self {
        Self {
            lease_calls: counter(registry, "sweep_lease_calls_total", "Lease calls answered."),
            jobs_leased: counter(registry, "sweep_jobs_leased_total", "Jobs handed out to workers."),
            heartbeats: counter(registry, "sweep_heartbeats_total", "Worker heartbeat calls answered."),
            result_uploads: counter(
                registry,
                "sweep_result_uploads_total",
                "Result upload calls answered.",
            ),
            results_accepted: counter(
                registry,
                "sweep_results_accepted_total",
                "Results newly stored (a failed try of a position counts as one; so does a cross-check's measurement).",
            ),
            position_errors: counter(
                registry,
                "sweep_position_errors_total",
                "Failed tries of positions reported for held leases.",
            ),
        }
    }
}

/// The other counters: build failures workers report, source uploads of submitters, and
/// bearer tokens looked up for any caller.
struct CallerCounters {
    build_failures: IntCounter,
    source_uploads: IntCounter,
    token_lookups: IntCounter,
}

impl CallerCounters {
    fn register(registry: &Registry) -> Self {
        Self {
            build_failures: counter(
                registry,
                "sweep_build_failures_total",
                "Build failures reported by workers.",
            ),
            source_uploads: counter(
                registry,
                "sweep_source_uploads_total",
                "Source snapshots uploaded and stored.",
            ),
            token_lookups: counter(
                registry,
                "sweep_token_lookups_total",
                "Bearer tokens looked up in the database (not answered from a cache).",
            ),
        }
    }
}

/// Request latency by route template, method and status class.
fn request_histogram() -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(
            "sweep_http_request_duration_seconds",
            "HTTP request latency by route template, method and status class.",
        )
        .buckets(LATENCY_BUCKETS.to_vec()),
        &["route", "method", "status"],
    )
    .expect("valid histogram")
}

/// The gauges set at scrape time from what the store reads: jobs by state, live workers,
/// cross-check mismatches, and the database pools.
struct ScrapeGauges {
    jobs: IntGaugeVec,
    workers_alive: IntGauge,
    cross_check_mismatches: IntGauge,
    pool_connections: IntGaugeVec,
    pool_max: IntGaugeVec,
}

impl ScrapeGauges {
    fn register(registry: &Registry) -> Self {
        let jobs = IntGaugeVec::new(
            Opts::new(
                "sweep_jobs",
                "Jobs waiting to be handed out (queued) and held (leased).",
            ),
            &["state"],
        )
        .expect("valid gauge");
        let workers_alive = IntGauge::new(
            "sweep_workers_alive",
            "Workers seen within the last lease period that have not stopped since.",
        )
        .expect("valid gauge");
        let cross_check_mismatches = IntGauge::new(
            "sweep_cross_check_mismatches",
            "Cross-checks stored whose nodes or best move differ from the result they re-measured (all sweeps).",
        )
        .expect("valid gauge");
        let pool_connections = IntGaugeVec::new(
            Opts::new(
                "sweep_db_pool_connections",
                "Database pool connections, in use or idle.",
            ),
            &["pool", "state"],
        )
        .expect("valid gauge");
        let pool_max = IntGaugeVec::new(
            Opts::new(
                "sweep_db_pool_max_connections",
                "Database pool connections at most.",
            ),
            &["pool"],
        )
        .expect("valid gauge");
        Self {
            jobs: register(registry, jobs),
            workers_alive: register(registry, workers_alive),
            cross_check_mismatches: register(registry, cross_check_mismatches),
            pool_connections: register(registry, pool_connections),
            pool_max: register(registry, pool_max),
        }
    }
}

/// The method as a label: the usual ones by name, anything else as `other`, so a client
/// inventing methods cannot add series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::HEAD => "HEAD",
        Method::DELETE => "DELETE",
        _ => "other",
    }
}

/// `2xx`, `4xx`, ...: the class is what dashboards and alerts ask about.
fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PoolGauge;

    #[test]
    fn gauges_and_counters_are_rendered() {
        let m = Metrics::new();
        m.jobs_leased.inc_by(3);
        m.observe_request(
            "/api/v1/workers/{id}/lease",
            &Method::POST,
            StatusCode::OK,
            Duration::from_millis(3),
        );
        m.observe_request(
            "/x",
            &Method::from_bytes(b"BREW").unwrap(),
            StatusCode::IM_A_TEAPOT,
            Duration::from_millis(1),
        );
        let text = m
            .render(&StoreGauges {
                jobs_by_state: vec![("leased".into(), 7)],
                workers_alive: 2,
                cross_check_mismatches: 4,
                pools: vec![PoolGauge {
                    name: "main",
                    size: 5,
                    idle: 3,
                    max: 16,
                }],
            })
            .unwrap();
        for line in [
            "sweep_jobs_leased_total 3",
            "sweep_jobs{state=\"leased\"} 7",
            "sweep_jobs{state=\"queued\"} 0",
            "sweep_workers_alive 2",
            "sweep_cross_check_mismatches 4",
            "sweep_db_pool_connections{pool=\"main\",state=\"in_use\"} 2",
            "sweep_db_pool_connections{pool=\"main\",state=\"idle\"} 3",
            "sweep_db_pool_max_connections{pool=\"main\"} 16",
            "sweep_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/workers/{id}/lease\",status=\"2xx\"} 1",
            "sweep_http_request_duration_seconds_count{method=\"other\",route=\"/x\",status=\"4xx\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
