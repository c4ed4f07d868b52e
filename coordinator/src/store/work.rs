//! Closing a sweep's or a build's open work (a sweep cancelled, a build failed or retried):
//! its cursors and requeued jobs go, its open cross-checks take a state. Jobs held by leases
//! are left to them: the lease check says what becomes of their reports.

use super::backend::Backend;
use super::sql::{Tx, Value};
use super::StoreResult;

/// Where work is closed: a whole sweep (cancelled), or one build (failed).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    /// Every build of the sweep.
    Sweep(i64),
    /// One build.
    Build(i64),
}

/// Closes the open work of `scope`: its cursors and its jobs waiting to be handed out again
/// go, its open cross-checks and speed jobs (a baseline's: all of its sweep's) take
/// `check_state`. Jobs held by leases are left to them (the
/// lease check says what becomes of their reports).
pub(crate) async fn close_work<B: Backend>(
    tx: &mut B::Tx,
    scope: Scope,
    check_state: &str,
) -> StoreResult<()> {
    let (column, id) = match scope {
        Scope::Sweep(id) => ("sweep_id", id),
        Scope::Build(id) => ("build_id", id),
    };
    let id = Value::Int(id);
    tx.execute(
        &format!("DELETE FROM build_queue WHERE {column} = $1"),
        &[id],
    )
    .await?;
    tx.execute(&format!("DELETE FROM requeued WHERE {column} = $1"), &[id])
        .await?;
    tx.execute(
        &format!(
            "UPDATE jobs SET state = $2
             WHERE {column} = $1 AND kind <> 'work' AND state IN ('queued', 'leased')"
        ),
        &[id, Value::Text(check_state)],
    )
    .await?;
    if let Scope::Build(_) = scope {
        // Without its baseline, no speed job of the sweep can time anything.
        tx.execute(
            "UPDATE jobs SET state = $2
             WHERE kind = 'speed' AND state IN ('queued', 'leased')
               AND sweep_id = (SELECT b.sweep_id FROM builds b WHERE b.id = $1 AND b.is_baseline)",
            &[id, Value::Text(check_state)],
        )
        .await?;
    }
    Ok(())
}
