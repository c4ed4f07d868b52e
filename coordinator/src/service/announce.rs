//! Announcing ended sweeps: every few seconds the coordinator looks at the sweeps not
//! announced yet, and for each that has ended, claims it in the store (so of several
//! coordinators on one database exactly one announces it) and hands its events to an
//! [`EventSink`] (the webhooks, `crate::webhooks`), which delivers them on its own time.
//!
//! Sweeps are claimed whether or not any receiver is configured: a coordinator started later
//! with `--webhook` announces the sweeps that end from then on, not the history.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use sweep_domain::wire::{SweepEvent, SweepState};
use tokio_util::sync::CancellationToken;

use super::Service;
use crate::store::{Store, StoreResult};

/// How often the coordinator looks for sweeps that ended.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(2);
/// Sweeps not announced yet that one look reads at most (the oldest first).
const LOOKS_AT: u32 = 1000;
/// Mismatching cross-checks an event lists at most.
const MISMATCHES_LISTED: u32 = 100;

/// Where announced events go. Sending must not wait for a receiver.
pub trait EventSink: Send + Sync {
    /// Takes `event` for delivery.
    fn send(&self, event: SweepEvent);
}

impl Service {
    /// Announces sweeps as they end until `stop` fires (see the module doc).
    pub async fn announce_ended_sweeps(&self, sink: Arc<dyn EventSink>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(ANNOUNCE_EVERY) => {}
            }
            if let Err(e) = announce_once(self.0.shared.store.as_ref(), sink.as_ref()).await {
                tracing::warn!(error = %e, "looking for ended sweeps to announce failed");
            }
        }
    }
}

/// One look: every ended sweep not announced yet is claimed and its events sent.
async fn announce_once(store: &dyn Store, sink: &dyn EventSink) -> StoreResult<()> {
    for sweep in store.sweeps_to_announce(LOOKS_AT).await? {
        let id = sweep.id;
        if !sweep.state.is_final() {
            continue;
        }
        // Read before the claim: a read that fails then leaves the sweep to the next look.
        let cross_checks = store.cross_checks(id, MISMATCHES_LISTED).await?;
        if !store.claim_announcement(id).await? {
            continue;
        }
        for event in events_of(&sweep.state, cross_checks.mismatches) {
            tracing::info!(sweep_id = id, event, "sweep ended: announcing");
            sink.send(SweepEvent {
                event: event.to_string(),
                delivery: format!("sweep-{id}-{event}"),
                at: Utc::now(),
                sweep: sweep.clone(),
                cross_checks: cross_checks.clone(),
            });
        }
    }
    Ok(())
}

/// The events a sweep that ended in `state` with `mismatches` mismatching checks gets.
fn events_of(state: &SweepState, mismatches: u64) -> Vec<&'static str> {
    let mut events = vec![match state {
        SweepState::Failed => "sweep.failed",
        _ => "sweep.finished",
    }];
    if mismatches > 0 {
        events.push("crosscheck.mismatch");
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_sweep_is_announced_as_failed_and_mismatches_beside() {
        assert_eq!(events_of(&SweepState::Done, 0), ["sweep.finished"]);
        assert_eq!(events_of(&SweepState::Cancelled, 0), ["sweep.finished"]);
        assert_eq!(events_of(&SweepState::Failed, 0), ["sweep.failed"]);
        assert_eq!(
            events_of(&SweepState::DoneWithErrors, 2),
            ["sweep.finished", "crosscheck.mismatch"]
        );
    }
}
