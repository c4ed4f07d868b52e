//! The worker protocol's statements only Postgres has (its multi-row forms), in one place so
//! their plans can be checked: every one must cost O(log n) in the size of the queue (an
//! index-ordered walk of as many entries as it returns, or primary-key lookups; never a scan
//! or sort of `jobs` or `results`). Public so the plan tests can `EXPLAIN` exactly what
//! production runs; `$n` parameters are listed with each. The statements the worker queue
//! writes once for both databases are listed as Postgres renders them by
//! `crate::queue::statements::on_postgres`.

use std::sync::LazyLock;

use crate::store::job::JOB_COLUMNS;

/// How a worker protocol transaction begins: with no sequential scans. Every statement of
/// the protocol is a lookup by key or an index-ordered walk; a plan made with the statistics
/// of a nearly empty table (a new database, or one whose autovacuum has not run yet) would
/// scan the table once it has grown, on every call. Sent with `BEGIN` as one simple query: a
/// round trip, not two.
pub const HOT_BEGIN: &str = "BEGIN; SET LOCAL enable_seqscan = off";

/// How a claim's transaction begins: as [`HOT_BEGIN`], and with `synchronous_commit` off.
/// Should Postgres itself crash, a claim committed in its last moments may be lost, which
/// only puts its jobs back in the queue (the workers' reports then name a lease that does not
/// exist and are refused, and the jobs are handed out again: nothing is lost or counted
/// twice); a claim no longer waits for a disk flush.
pub const CLAIM_BEGIN: &str =
    "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL synchronous_commit = off";

/// For each `(build, n)` of the arrays `$1` and `$2` (`int8[]`): locks the build's cursor
/// (`build_queue`), skipping one another claim holds, and reads up to `n` queued work jobs
/// from its next job to its last (a walk of the primary key), in id order: a claim's first
/// jobs of a build in one round trip. One row per job ([`JOB_COLUMNS`]), and one with a
/// null `id` for a cursor with no queued job left; each with the cursor as `cursor_build`,
/// `next_job`, `last_job`, `remaining`.
pub static LOCK_CURSORS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH c AS (
    SELECT bq.build_id AS cursor_build, bq.next_job, bq.last_job, bq.remaining, t.n
    FROM UNNEST($1::int8[], $2::int8[]) AS t(build, n)
    JOIN build_queue bq ON bq.build_id = t.build
    ORDER BY bq.build_id
    FOR UPDATE OF bq SKIP LOCKED)
SELECT c.cursor_build, c.next_job, c.last_job, c.remaining, p.*
FROM c LEFT JOIN LATERAL (
    SELECT {JOB_COLUMNS} FROM jobs j
    WHERE j.id >= c.next_job AND j.id <= c.last_job AND j.build_id = c.cursor_build
      AND j.state = 'queued' AND j.kind = 'work'
    ORDER BY j.id
    LIMIT c.n) p ON TRUE"
    )
});

/// For each `(build, after, last, n)` of the arrays `$1` to `$4` (`int8[]`): up to `n`
/// queued work jobs of the build with ids from `after` to `last` (its range), in id order (a
/// walk of the primary key): more of a locked cursor's jobs ([`JOB_COLUMNS`]).
pub static JOBS_AFTER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
SELECT p.*
FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int8[]) AS t(build, after, last, n)
CROSS JOIN LATERAL (
    SELECT {JOB_COLUMNS} FROM jobs j
    WHERE j.id >= t.after AND j.id <= t.last AND j.build_id = t.build
      AND j.state = 'queued' AND j.kind = 'work'
    ORDER BY j.id
    LIMIT t.n) p"
    )
});

/// Sets each cursor `$1` (builds, `int8[]`) to its next job `$2` and the jobs it has left
/// `$3`.
pub const SET_CURSORS: &str = "
UPDATE build_queue SET next_job = t.next, remaining = t.remaining
FROM UNNEST($1::int8[], $2::int8[], $3::int8[]) AS t(build, next, remaining)
WHERE build_queue.build_id = t.build";

/// Inserts one lease row per element of `$1` (workers, `int8[]`), `$2` (their jobs, each an
/// array literal, `text[]`) and `$3` (expiries, `timestamptz[]`); returns each row's id with
/// its first job (which tells the rows of one claim apart: each job goes to one lease).
pub const INSERT_LEASES: &str = "
INSERT INTO leases (worker_id, jobs, expires_at)
SELECT t.worker, t.jobs::int8[], t.expires
FROM UNNEST($1::int8[], $2::text[], $3::timestamptz[]) AS t(worker, jobs, expires)
RETURNING id, jobs[1] AS first";

/// Sets each lease row `$1` (`int8[]`) to the bits `$2` and the expiry `$3`.
pub const SET_LEASES: &str = "
UPDATE leases SET closed = t.closed, expires_at = t.expires
FROM UNNEST($1::int8[], $2::int8[], $3::timestamptz[]) AS t(id, closed, expires)
WHERE leases.id = t.id";

/// Inserts the results of uploads served together (one row per array element, every job of
/// every upload at once; `$1` to `$15` are what results and cross-checks share, see
/// `hot::Measured`), ignoring positions that already have one; returns the job of each
/// row inserted.
pub const INSERT_RESULTS: &str = "
INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                     worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                     reached_depth, time_ms, error, nodes_limit, counters)
SELECT t.build, t.suite, t.idx, t.depth, t.sweep, t.job, t.attempt, t.worker, t.pid, t.nodes,
       t.bm, t.solved, t.cp, t.mate, t.rd, t.ms, t.err, t.nl, t.counters::jsonb
FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int8[], $7::int8[],
            $8::int8[], $9::int8[], $10::text[], $11::int8[], $12::text[], $13::int4[],
            $14::int8[], $15::text[], $16::bool[], $17::int4[], $18::int4[], $19::text[])
     AS t(worker, build, suite, idx, depth, nl, sweep, job, attempt, pid, nodes, bm, rd, ms,
          err, solved, cp, mate, counters)
ON CONFLICT DO NOTHING
RETURNING job_id";

/// Inserts the measurements of cross-checks of uploads served together (`$1` to `$15` as in
/// [`INSERT_RESULTS`]), each with its original's worker and whether it mismatches the
/// original (both without error, nodes or move differ); ignores positions already checked;
/// returns the job of each row inserted.
pub const INSERT_CHECKS: &str = "
INSERT INTO cross_checks (build_id, suite_id, position_index, depth, nodes_limit, sweep_id,
                          job_id, attempt, worker_id, position_id, nodes, bestmove,
                          reached_depth, time_ms, error, original_worker_id, mismatch)
SELECT t.build, t.suite, t.idx, t.depth, t.nl, t.sweep, t.job, t.attempt, t.worker, t.pid,
       t.nodes, t.bm, t.rd, t.ms, t.err, r.worker_id,
       COALESCE(r.error IS NULL AND t.err IS NULL
                AND (r.nodes <> t.nodes OR r.bestmove <> t.bm), FALSE)
FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int8[], $7::int8[],
            $8::int8[], $9::int8[], $10::text[], $11::int8[], $12::text[], $13::int4[],
            $14::int8[], $15::text[])
     AS t(worker, build, suite, idx, depth, nl, sweep, job, attempt, pid, nodes, bm, rd, ms, err)
LEFT JOIN results r ON r.build_id = t.build AND r.suite_id = t.suite
                   AND r.position_index = t.idx AND r.depth = t.depth
ON CONFLICT DO NOTHING
RETURNING job_id";
