//! The worker protocol's statements, written once for both databases: portable SQL with `$N`
//! markers, with the few things the dialects say differently filled in by the `Backend`
//! (an id list, a lease's jobs, row locks). In one place so every one can be planned on a
//! big queue (`coordinator/tests/pg_scale.rs` runs them all as Postgres renders them:
//! [`on_postgres`]): each must cost O(log n) in the size of the queue, an index-ordered walk
//! of as many entries as it returns or lookups by key, never a scan or sort of `jobs` or
//! `results`.

use crate::store::backend::Backend;
use crate::store::checks::{mark_sweep_originals_stored, ORIGINAL};
use crate::store::job::{JOB_COLUMNS, LEASE_COLUMNS};
use crate::store::workers::live;

/// Which jobs a pick may take for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Takeable {
    /// Any worker without particulars: jobs of source engines.
    Ordinary,
    /// Worker `$2`: not a build it failed, a binary-only engine's only when it has the binary.
    By(i64),
}

/// Whether worker `worker` (an SQL expression) may run the engine of sweep `sweep` (an alias):
/// any engine built from source, a binary-only one only if the worker reported its binary.
pub(crate) fn has_engine(sweep: &str, worker: &str) -> String {
    format!(
        "({sweep}.source_sha256 IS NOT NULL
          OR EXISTS (SELECT 1 FROM worker_engines we
                     WHERE we.worker_id = {worker} AND we.engine = {sweep}.engine))"
    )
}

impl Takeable {
    /// The condition on a job's build `build` of sweep `s`, with the worker as `$2`.
    fn condition(self, build: &str) -> String {
        match self {
            Takeable::Ordinary => "s.source_sha256 IS NOT NULL".to_string(),
            Takeable::By(_) => format!(
                "NOT EXISTS (SELECT 1 FROM build_failures bf
                             WHERE bf.build_id = {build} AND bf.worker_id = $2)
                 AND {}",
                has_engine("s", "$2")
            ),
        }
    }

    /// The worker to bind as `$2` (ordinary picks do not read it).
    pub fn worker(self) -> i64 {
        match self {
            Takeable::Ordinary => 0,
            Takeable::By(w) => w,
        }
    }
}

/// Which requeued jobs a pick takes, as to the worker's own failed tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retried {
    /// Any (an ordinary worker has none of its own).
    Any,
    /// Only jobs the worker saw no position fail on: a retry goes to another worker first.
    NotByIt,
    /// Only jobs it saw a position fail on: taken last, when nothing else is left.
    ByIt,
}

/// Takes up to `$1` requeued jobs `takeable` (worker `$2`), oldest first (index
/// `requeued_since`), out of `requeued`; returns each with the time it was put back.
pub(crate) fn take_requeued<B: Backend>(takeable: Takeable, retried: Retried) -> String {
    let own = "EXISTS (SELECT 1 FROM position_failures pf
                       WHERE pf.job_id = r.job_id AND pf.worker_id = $2)";
    let retried = match retried {
        Retried::Any => String::new(),
        Retried::NotByIt => format!(" AND NOT {own}"),
        Retried::ByIt => format!(" AND {own}"),
    };
    format!(
        "DELETE FROM requeued WHERE job_id IN (
             SELECT r.job_id FROM requeued r JOIN sweeps s ON s.id = r.sweep_id
             WHERE {}{retried}
             ORDER BY r.since, r.job_id
             LIMIT $1{})
         RETURNING job_id, since",
        takeable.condition("r.build_id"),
        B::skip_locked("r"),
    )
}

/// Puts the work jobs `$1` (a list) back in the queue as of `$2`, but a cancelled sweep's or
/// a failed build's; one already there stays as it is.
pub(crate) fn requeue<B: Backend>() -> String {
    format!(
        "INSERT INTO requeued (job_id, sweep_id, build_id, since)
         SELECT j.id, j.sweep_id, j.build_id, $2
         FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
         WHERE j.id {} AND NOT s.cancelled AND b.build_error IS NULL
         ON CONFLICT DO NOTHING",
        B::in_list("$1")
    )
}

/// Sets the cross-checks `$1` (a list) leased back to `queued`.
pub(crate) fn requeue_checks<B: Backend>() -> String {
    format!(
        "UPDATE jobs SET state = 'queued' WHERE state = 'leased' AND id {}",
        B::in_list("$1")
    )
}

/// The builds at the head of the queue (index `build_queue_head`: the oldest sweep's, those
/// with the most jobs left first, so builds dealt together stay level, then in build order)
/// `takeable` (worker `$2`), at most `$1`, in queue order.
pub(crate) fn head_builds(takeable: Takeable) -> String {
    format!(
        "SELECT bq.build_id FROM build_queue bq JOIN sweeps s ON s.id = bq.sweep_id
         WHERE {} ORDER BY bq.sweep_id, bq.remaining DESC, bq.build_id LIMIT $1",
        takeable.condition("bq.build_id")
    )
}

/// The builds of sweep `$3` with fresh work `takeable` (worker `$2`), at most `$1`, those
/// with the most left first: the head of that sweep's queue.
pub(crate) fn head_builds_of(takeable: Takeable) -> String {
    format!(
        "SELECT bq.build_id FROM build_queue bq JOIN sweeps s ON s.id = bq.sweep_id
         WHERE bq.sweep_id = $3 AND {} ORDER BY bq.remaining DESC, bq.build_id LIMIT $1",
        takeable.condition("bq.build_id")
    )
}

/// The sweeps with fresh work (a cursor), with what weighs their share: their submitter and
/// priority.
pub(crate) fn sweeps_with_work() -> String {
    "SELECT s.id, s.submitter, s.priority FROM sweeps s
     WHERE s.id IN (SELECT bq.sweep_id FROM build_queue bq) AND NOT s.cancelled"
        .to_string()
}

/// The sweeps with cross-checks ready to take (their originals stored), with what weighs
/// their share: a probe per sweep of its open checks (index `jobs_check_sweep`). Kept apart
/// from [`sweeps_with_work`]: joined to it by `OR`, Postgres read the whole of
/// `build_queue_head` (an index every cursor move adds to) on each call, 300 ms under load.
pub(crate) fn sweeps_with_checks() -> String {
    "SELECT s.id, s.submitter, s.priority FROM sweeps s
     WHERE NOT s.cancelled
       AND EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = s.id AND j.kind = 'check'
                     AND j.state = 'queued' AND j.original_stored)"
        .to_string()
}

/// The sweeps whose work is done with a speed job waiting, with what weighs their share: so
/// a sweep's speed jobs get workers by its share while other sweeps keep every worker busy
/// (see `Claim::speed_of`). A probe per sweep of its open speed jobs (index
/// `jobs_speed_open`), the work tested only for those.
pub(crate) fn sweeps_with_speed() -> String {
    format!(
        "SELECT s.id, s.submitter, s.priority FROM sweeps s
         WHERE NOT s.cancelled
           AND EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = s.id AND j.kind = 'speed'
                         AND j.state = 'queued')
           AND NOT {}",
        crate::store::sql::work_open!()
    )
}

/// Of the builds `$1` (a list), those with fresh work `takeable` (worker `$2`).
pub(crate) fn takeable_builds<B: Backend>(takeable: Takeable) -> String {
    format!(
        "SELECT bq.build_id FROM build_queue bq JOIN sweeps s ON s.id = bq.sweep_id
         WHERE bq.build_id {} AND {}",
        B::in_list("$1"),
        takeable.condition("bq.build_id")
    )
}

/// Deletes the cursors of the builds `$1` (a list): they have no fresh work left.
pub(crate) fn delete_cursors<B: Backend>() -> String {
    format!(
        "DELETE FROM build_queue WHERE build_id {}",
        B::in_list("$1")
    )
}

/// The jobs `$1` (a list): what never changes after their submission (see `JobRow`).
pub(crate) fn jobs<B: Backend>() -> String {
    format!(
        "SELECT {JOB_COLUMNS} FROM jobs j WHERE j.id {}",
        B::in_list("$1")
    )
}

/// Of the builds `$1` (a list): whether each failed, and whether its sweep was cancelled.
pub(crate) fn build_flags<B: Backend>() -> String {
    format!(
        "SELECT b.id, b.build_error IS NOT NULL AS build_failed, s.cancelled
         FROM builds b JOIN sweeps s ON s.id = b.sweep_id WHERE b.id {}",
        B::in_list("$1")
    )
}

/// The lease rows `$1` (a list), in id order; `lock`: locked for the transaction.
pub(crate) fn leases<B: Backend>(lock: bool) -> String {
    format!(
        "SELECT {LEASE_COLUMNS} FROM leases l WHERE l.id {} ORDER BY l.id{}",
        B::in_list("$1"),
        if lock {
            B::lock_rows("l")
        } else {
            String::new()
        }
    )
}

/// Up to `$2` lease rows that expired before `$1`, oldest first (index `leases_expiry`),
/// locked, skipping those another transaction holds.
pub(crate) fn expired<B: Backend>() -> String {
    format!(
        "SELECT {LEASE_COLUMNS} FROM leases l WHERE l.expires_at < $1
         ORDER BY l.expires_at LIMIT $2{}",
        B::skip_locked("l")
    )
}

/// Deletes the lease rows `$1` (a list).
pub(crate) fn delete_leases<B: Backend>() -> String {
    format!("DELETE FROM leases WHERE id {}", B::in_list("$1"))
}

/// Renews the lease rows `$1` (a list) until `$2`; returns those still there, with their bits.
pub(crate) fn renew<B: Backend>() -> String {
    format!(
        "UPDATE leases SET expires_at = $2 WHERE id {} RETURNING id, closed",
        B::in_list("$1")
    )
}

/// Of the workers `$1` (a list), those a claim treats one by one: they failed a build or a
/// position, or reported binary-only engines.
pub(crate) fn particular_workers<B: Backend>() -> String {
    let any = B::in_list("$1");
    format!(
        "SELECT worker_id FROM build_failures WHERE worker_id {any}
         UNION SELECT worker_id FROM position_failures WHERE worker_id {any}
         UNION SELECT worker_id FROM worker_engines WHERE worker_id {any}"
    )
}

/// Marks the workers `$1` (a list) seen at `$2`, live again if they had left; returns those
/// marked (the registered ones).
pub(crate) fn touch<B: Backend>() -> String {
    format!(
        "UPDATE workers SET last_seen_at = $2, left_at = NULL WHERE id {} RETURNING id",
        B::in_list("$1")
    )
}

/// Marks the sweeps `$1` (a list) started.
pub(crate) fn mark_started<B: Backend>() -> String {
    format!(
        "UPDATE sweeps SET started = TRUE WHERE NOT started AND id {}",
        B::in_list("$1")
    )
}

/// Whether worker `worker` (an SQL expression) may run the engine of check `j`'s sweep, read
/// per check (see [`pick_checks`]).
fn runs_engine(worker: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM sweeps s WHERE s.id = j.sweep_id AND {})",
        has_engine("s", worker)
    )
}

/// Takes up to `$2` open cross-checks whose original is stored (index `jobs_check_ready`, id
/// order) worker `$1` may take now, workers seen after `$3` that have not left counting as
/// live: each is set `leased`, or `done` when its original result is an error (see
/// `protocol::checks`); returns each one's id and new state. One statement, where a pick and
/// an update per state were up to three round trips (Postgres' own time is the same: the
/// update of the rows picked is half of it, `bench/RESULTS.md`, session 22). Nothing is
/// joined to the checks walked: the sweep and the original are read per
/// check, so the walk stops at the `$2`th check taken. (With joins, Postgres hashed all of
/// `results`, or all checks ready, on every call.)
///
/// Who may check whom goes by token, not by worker: one token can register any number of
/// workers, so a worker of the original's token is no second opinion. A worker of that token
/// takes the check only when no live worker of another token could, and the original's own
/// worker only when no other live worker could at all.
///
/// With `of_sweep`, only the checks of sweep `$4` (the one the worker's share sends it to).
pub(crate) fn pick_checks<B: Backend>(of_sweep: bool) -> String {
    format!(
        "UPDATE jobs AS u
         SET state = CASE WHEN p.original_failed THEN 'done' ELSE 'leased' END
         FROM (
           SELECT j.id AS pick, (SELECT r.error IS NOT NULL {ORIGINAL}) AS original_failed
           FROM jobs j
           WHERE j.kind = 'check' AND j.state = 'queued' AND j.original_stored{of}
             AND NOT (SELECT s.cancelled FROM sweeps s WHERE s.id = j.sweep_id)
             AND ((SELECT r.error IS NOT NULL {ORIGINAL}) OR (
                 NOT EXISTS (SELECT 1 FROM build_failures bf
                             WHERE bf.build_id = j.build_id AND bf.worker_id = $1)
                 AND {mine}
                 AND (NOT {kin} OR NOT EXISTS (
                     SELECT 1 FROM workers w
                     WHERE w.id <> $1 AND {live}
                       AND (j.original_worker = $1 OR NOT {sibling})
                       AND NOT EXISTS (SELECT 1 FROM build_failures bw
                                       WHERE bw.build_id = j.build_id AND bw.worker_id = w.id)
                       AND {theirs}))))
           ORDER BY j.id
           LIMIT $2{}
         ) AS p
         WHERE u.id = p.pick
         RETURNING id, state",
        B::skip_locked("j"),
        of = if of_sweep { " AND j.sweep_id = $4" } else { "" },
        mine = runs_engine("$1"),
        theirs = runs_engine("w.id"),
        live = live("w", "$3"),
        kin = original_kin(),
        sibling = sibling_of_picker("w"),
    )
}

/// The token of worker `$1`, the one asking (null when it registered without one).
const PICKER_TOKEN: &str = "(SELECT pw.token_id FROM workers pw WHERE pw.id = $1)";

/// Whether worker `$1` is of the token of the worker that measured check `j`'s original: that
/// worker itself, or another registered with the same token. A worker registered without a
/// token is a token of its own.
fn original_kin() -> String {
    format!(
        "(j.original_worker = $1 OR EXISTS (
             SELECT 1 FROM workers ow
             WHERE ow.id = j.original_worker AND ow.token_id = {PICKER_TOKEN}))"
    )
}

/// Whether worker `alias` (not `$1`) was registered with the token of worker `$1`. Asked only
/// where `$1` is of the original's token (see [`pick_checks`]), so it says whether `alias`
/// is of the original's token too, without probing the original again.
fn sibling_of_picker(alias: &str) -> String {
    format!("coalesce({alias}.token_id = {PICKER_TOKEN}, FALSE)")
}

/// Marks takeable the cross-checks whose original result is stored now, of the positions of
/// the work jobs `$1` (a list), with the worker that measured it: index `jobs_check_waiting`
/// by each job's build, suite, depth and range of positions, then `results_pkey`.
pub(crate) fn mark_originals_stored<B: Backend>() -> String {
    format!(
        "UPDATE jobs AS j
         SET original_stored = TRUE, original_worker = (SELECT r.worker_id {ORIGINAL})
         FROM jobs w
         WHERE w.id {} AND j.build_id = w.build_id AND j.suite_id = w.suite_id
           AND j.depth = w.depth AND j.first_index >= w.first_index
           AND j.first_index < w.first_index + w.count
           AND j.kind = 'check' AND NOT j.original_stored
           AND (SELECT TRUE {ORIGINAL})",
        B::in_list("$1")
    )
}

/// Sets the state of the cross-checks `$1` (a list) to `$2`.
pub(crate) fn set_check_state<B: Backend>() -> String {
    format!(
        "UPDATE jobs SET state = $2 WHERE kind <> 'work' AND id {}",
        B::in_list("$1")
    )
}

/// Whether a speed job waits (index `jobs_speed_queued`): most claims stop here.
pub(crate) fn speed_waiting() -> String {
    "SELECT 1 AS one FROM jobs WHERE kind = 'speed' AND state = 'queued' LIMIT 1".to_string()
}

/// Whether worker `$1` holds a lease row. Not planned for the hot path (no index on
/// `leases.worker_id`, which every lease call would pay for): it runs only while a speed job
/// waits, for asks a claim dealt nothing.
pub(crate) fn holds_leases() -> String {
    "SELECT 1 AS one FROM leases WHERE worker_id = $1 LIMIT 1".to_string()
}

/// Takes the oldest waiting speed job worker `$1` may run (index `jobs_speed_queued`): its
/// sweep not cancelled, the sweep's work done (its speed job times builds already measured,
/// and runs after them), the engine one the worker has, neither its build nor the baseline
/// failed, nor failed on this worker. Sets it `leased`; returns its id. With `of_sweep`, only
/// of sweep `$2`.
pub(crate) fn pick_speed<B: Backend>(of_sweep: bool) -> String {
    format!(
        "UPDATE jobs SET state = 'leased'
         WHERE id = (
           SELECT j.id FROM jobs j
           WHERE j.kind = 'speed' AND j.state = 'queued'{of}
             AND EXISTS (SELECT 1 FROM sweeps s WHERE s.id = j.sweep_id AND NOT s.cancelled
                           AND {engine} AND NOT {open})
             AND NOT EXISTS (SELECT 1 FROM builds b
                             WHERE b.sweep_id = j.sweep_id AND (b.id = j.build_id OR b.is_baseline)
                               AND (b.build_error IS NOT NULL OR EXISTS (
                                   SELECT 1 FROM build_failures bf
                                   WHERE bf.build_id = b.id AND bf.worker_id = $1)))
           ORDER BY j.id
           LIMIT 1{}
         )
         RETURNING id",
        B::skip_locked("j"),
        of = if of_sweep { " AND j.sweep_id = $2" } else { "" },
        engine = has_engine("s", "$1"),
        open = crate::store::sql::work_open!(),
    )
}

/// The positions of the jobs `$1` (a list) measured in `table` (`results` or
/// `cross_checks`), by job: each job's range of its table's primary key.
pub(crate) fn measured_positions<B: Backend>(table: &str) -> String {
    format!(
        "SELECT j.id AS job_id, m.position_index FROM jobs j
         JOIN {table} m ON m.build_id = j.build_id AND m.suite_id = j.suite_id
                       AND m.position_index >= j.first_index
                       AND m.position_index < j.first_index + j.count
                       AND m.depth = j.depth AND m.nodes_limit = j.nodes_limit
         WHERE j.id {}",
        B::in_list("$1")
    )
}

/// How many positions of the jobs `$1` (a list) are measured in `table`, by job (as
/// [`measured_positions`]).
pub(crate) fn measured_counts<B: Backend>(table: &str) -> String {
    format!(
        "SELECT j.id AS job_id, count(*) AS n FROM jobs j
         JOIN {table} m ON m.build_id = j.build_id AND m.suite_id = j.suite_id
                       AND m.position_index >= j.first_index
                       AND m.position_index < j.first_index + j.count
                       AND m.depth = j.depth AND m.nodes_limit = j.nodes_limit
         WHERE j.id {} GROUP BY j.id",
        B::in_list("$1")
    )
}

/// Every statement here as Postgres runs it, by name, for the plan tests (both forms of those
/// that depend on the worker: as an ordinary one and as a particular one).
pub fn on_postgres() -> Vec<(&'static str, String)> {
    all::<crate::store::postgres::PgStore>()
}

/// Every statement here, by name, for the plan tests (the two forms that depend on the
/// worker: as an ordinary one and as a particular one).
fn all<B: Backend>() -> Vec<(&'static str, String)> {
    let by = Takeable::By(0);
    vec![
        (
            "take_requeued",
            take_requeued::<B>(Takeable::Ordinary, Retried::Any),
        ),
        ("take_requeued_by", take_requeued::<B>(by, Retried::NotByIt)),
        ("requeue", requeue::<B>()),
        ("requeue_checks", requeue_checks::<B>()),
        ("head_builds", head_builds(Takeable::Ordinary)),
        ("head_builds_by", head_builds(by)),
        ("head_builds_of", head_builds_of(Takeable::Ordinary)),
        ("sweeps_with_work", sweeps_with_work()),
        ("sweeps_with_checks", sweeps_with_checks()),
        ("takeable_builds", takeable_builds::<B>(by)),
        ("delete_cursors", delete_cursors::<B>()),
        ("jobs", jobs::<B>()),
        ("build_flags", build_flags::<B>()),
        ("leases", leases::<B>(true)),
        ("expired", expired::<B>()),
        ("delete_leases", delete_leases::<B>()),
        ("renew", renew::<B>()),
        ("particular_workers", particular_workers::<B>()),
        ("touch", touch::<B>()),
        ("mark_started", mark_started::<B>()),
        ("pick_checks", pick_checks::<B>(false)),
        ("pick_checks_of", pick_checks::<B>(true)),
        ("mark_originals_stored", mark_originals_stored::<B>()),
        ("mark_sweep_originals_stored", mark_sweep_originals_stored()),
        ("set_check_state", set_check_state::<B>()),
        ("speed_waiting", speed_waiting()),
        ("pick_speed", pick_speed::<B>(false)),
        ("pick_speed_of", pick_speed::<B>(true)),
        ("sweeps_with_speed", sweeps_with_speed()),
        ("measured_positions", measured_positions::<B>("results")),
        ("measured_counts", measured_counts::<B>("results")),
        ("measured_checks", measured_positions::<B>("cross_checks")),
    ]
}
