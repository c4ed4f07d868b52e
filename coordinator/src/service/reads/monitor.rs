//! `/metrics` and the health check: who may scrape, the gauges read from the store at scrape
//! time, and whether the database answers.

use super::{ReadError, Reads};
use crate::service::auth::{Caller, Need};

impl Reads {
    /// The metrics in the Prometheus text format, with jobs by state, live workers (seen
    /// within a lease) and pool occupancy read now. Takes a read turn, so scrapes never
    /// starve the worker protocol of connections.
    pub async fn metrics_text(&self, caller: &Caller) -> Result<String, ReadError> {
        self.shared.auth.require(caller, Need::Metrics)?;
        let _turn = self.turn().await?;
        let gauges = self.shared.store.gauges(self.lease).await?;
        Ok(self.shared.metrics.render(&gauges)?)
    }

    /// Checks that the database answers (for `/healthz`: no caller, no turn).
    pub async fn ping(&self) -> Result<(), ReadError> {
        Ok(self.shared.store.ping().await?)
    }
}
