//! Workers, written once for both backends: the liveness rule, a token's cap on live workers,
//! and the workers page (registered workers with what they hold and how fast they report).

use std::time::Duration;

use sweep_domain::wire::WorkerInfo;

use super::backend::Backend;
use super::clock::before;
use super::sql::{Columns, Reads, Value};
use super::{StoreError, StoreResult, WorkerCap};

/// The test "worker `alias` is live": seen after `since` (an SQL expression), and not stopped
/// since (its last heartbeat, `release`, sets `left_at`; any later mark as seen clears it).
/// Every liveness question asks it: the check pick, stalled builds, this page and the gauge.
pub(crate) fn live(alias: &str, since: &str) -> String {
    format!("{alias}.last_seen_at > {since} AND {alias}.left_at IS NULL")
}

/// The distinct tokens of the workers `alias` a query's rows count, as an aggregate: a
/// worker registered without a token is a token of its own. The rows must be distinct
/// workers (each build failure row is, each worker row is).
pub(crate) fn tokens_of(alias: &str) -> String {
    format!("(count(DISTINCT {alias}.token_id) + count(*) - count({alias}.token_id))")
}

/// The count of token `token` (an SQL parameter)'s live workers, seen after `since` (another):
/// what a registration under a [`WorkerCap`] asks, in its transaction, once the backend made
/// registrations of one token wait for each other. Live is the rule every liveness question
/// asks ([`live`]); index `workers_token_seen`.
pub(crate) fn token_live_workers(token: &str, since: &str) -> String {
    format!(
        "SELECT count(*) AS n FROM workers w WHERE w.token_id = {token} AND {}",
        live("w", since)
    )
}

/// Refuses a registration when its token holds `held` live workers and `cap` allows no more.
pub(crate) fn check_cap(held: i64, cap: WorkerCap) -> StoreResult<()> {
    if held >= i64::from(cap.max_live) {
        return Err(StoreError::TooManyWorkers {
            limit: cap.max_live,
            lease: cap.lease,
        });
    }
    Ok(())
}

/// Workers seen within `seen_within` that have not said they stopped (a `release`), most
/// recently seen first, at most `limit`. Jobs held are counted in one walk of the live
/// leases, recent results in one pass over an index (`results_created`), never once per
/// worker.
pub(crate) async fn workers<B: Backend>(
    db: &B,
    seen_within: Duration,
    limit: u32,
) -> StoreResult<Vec<WorkerInfo>> {
    let now = db.clock().now();
    let ago = |d: Duration| before(now, d);
    let rows = db
        .reader()
        .rows(
            &format!(
                "WITH held AS (
                 SELECT l.worker_id, count(*) AS n FROM leases l{}
                 WHERE l.expires_at > $1 AND ((l.closed >> u.key) & 1) = 0
                 GROUP BY l.worker_id),
             recent AS (
                 SELECT worker_id, count(*) AS n FROM results
                 WHERE created_at > $2 GROUP BY worker_id)
             SELECT w.id, w.name, w.host, w.cores, w.registered_at, w.last_seen_at,
                    coalesce(held.n, 0) AS jobs, coalesce(recent.n, 0) AS results
             FROM workers w
             LEFT JOIN held ON held.worker_id = w.id
             LEFT JOIN recent ON recent.worker_id = w.id
             WHERE {}
             ORDER BY w.last_seen_at DESC, w.id DESC
             LIMIT $4",
                B::lease_jobs("l"),
                live("w", "$3")
            ),
            &[
                Value::Time(now),
                Value::Time(ago(Duration::from_secs(60))),
                Value::Time(ago(seen_within)),
                Value::Int(limit.into()),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(WorkerInfo {
                id: r.int("id")?,
                name: r.text("name")?,
                host: r.text("host")?,
                cores: u32::try_from(r.int("cores")?).unwrap_or(0),
                jobs: r.count("jobs")?,
                results_last_minute: r.count("results")?,
                registered_at: r.time("registered_at")?,
                last_seen_at: r.time("last_seen_at")?,
                // Filled in by the service (`BackendCalls::worker_checks`).
                checks: 0,
                mismatches: 0,
            })
        })
        .collect()
}
