//! The `/metrics` use case: who may scrape, and the gauges read from the store at scrape time.

use super::auth::Need;
use super::{Caller, Service, ServiceError};
use crate::metrics::Metrics;

impl Service {
    /// The counters this service bumps, for the HTTP layer's request latencies.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The metrics in the Prometheus text format, with jobs by state, live workers (seen
    /// within a lease) and pool occupancy read now. Takes a read turn, so scrapes never
    /// starve the worker protocol of connections.
    pub async fn metrics_text(&self, caller: &Caller) -> Result<String, ServiceError> {
        self.auth.require(caller, Need::Metrics)?;
        let _turn = self.read_turn().await?;
        let gauges = self.store.gauges(self.leases.lease).await?;
        Ok(self.metrics.render(&gauges)?)
    }
}
