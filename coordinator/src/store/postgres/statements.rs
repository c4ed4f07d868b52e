//! The worker protocol's hot statements on Postgres, in one place so their plans can be
//! checked: every one must cost O(log n) in the size of the queue (an index-ordered pick or
//! a primary-key lookup, never a scan or sort of `jobs`). Public so the plan tests can
//! `EXPLAIN` exactly what production runs; `$n` parameters are listed with each.

/// Settings of a lease transaction: `synchronous_commit` off. Should Postgres itself crash,
/// a lease committed in its last moments may be lost, which only puts the jobs back in the
/// queue (the worker's reports then fail the lease check and the jobs are leased again:
/// nothing is lost or counted twice); a lease no longer waits for a disk flush.
///
/// (Generic plans would save the picks' planning, about half their cost, but on a big queue
/// Postgres' generic plan for [`LEASE_FRESH`] scans `jobs`: custom plans it is.)
pub const LEASE_SETTINGS: &str = "SELECT set_config('synchronous_commit', 'off', true)";

/// A lease statement: pick the jobs with `$pick` (a `picked` CTE that locks them), lease them
/// to worker `$1` for `$3` seconds from `$4` (now, from the store's clock), and return what a
/// lease needs.
macro_rules! lease {
    ($pick:expr) => {
        concat!(
            "WITH picked AS (",
            $pick,
            ")
UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, worker_id = $1,
       lease_expires_at = $4 + make_interval(secs => $3), updated_at = $4
FROM picked WHERE jobs.id = picked.id
RETURNING jobs.id, jobs.attempt, jobs.sweep_id, jobs.build_id, jobs.suite_id,
          jobs.first_index, jobs.count, jobs.depth, jobs.nodes_limit, jobs.results_done, jobs.kind"
        )
    };
}

/// The jobs (`j`, of sweep `s`) worker `$1` may take: never a build it failed to compile
/// (its toolchain would fail again), and a sweep without a source snapshot (a binary-only
/// engine) only when it reported that engine's binary.
macro_rules! takeable_by_worker {
    () => {
        "NOT EXISTS (SELECT 1 FROM build_failures bf
                      WHERE bf.build_id = j.build_id AND bf.worker_id = $1)
      AND (s.source_sha256 IS NOT NULL
           OR EXISTS (SELECT 1 FROM worker_engines we
                      WHERE we.worker_id = $1 AND we.engine = s.engine))"
    };
}

/// Leases up to `$2` queued work jobs to worker `$1` for `$3` seconds from `$4`, in id order (the
/// partial index `jobs_queued_work`: queued cross-checks, which wait for their originals, are
/// never walked past). The attempt bump fences any earlier holder.
///
/// Jobs this worker saw a position fail on are left out here and taken by [`LEASE_RETRIED`]
/// only when this found too few, so a retry lands on another worker when there is one.
/// Cancelled sweeps have no open jobs (cancelling closes them).
pub const LEASE_FRESH: &str = lease!(concat!(
    "SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
    WHERE j.state = 'queued' AND j.kind = 'work'
      AND NOT EXISTS (SELECT 1 FROM position_failures pf
                      WHERE pf.job_id = j.id AND pf.worker_id = $1)
      AND ",
    takeable_by_worker!(),
    "
    ORDER BY j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED"
));

/// Leases up to `$2` queued work jobs of the builds `$5` (an `int8[]`: those worker `$1` was
/// last leased, newest first; build affinity) for `$3` seconds from `$4`: the builds in that
/// order, each in id order (index `jobs_queued_build`); otherwise as [`LEASE_FRESH`]. Run
/// after [`LEASE_EXPIRED`] and before [`LEASE_FRESH`], for workers a claim serves one by one.
pub const LEASE_KNOWN: &str = lease!(concat!(
    "SELECT p.id FROM UNNEST($5::int8[]) WITH ORDINALITY AS kb(build, n)
    CROSS JOIN LATERAL (
        SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
        WHERE j.build_id = kb.build AND j.state = 'queued' AND j.kind = 'work'
          AND NOT EXISTS (SELECT 1 FROM position_failures pf
                          WHERE pf.job_id = j.id AND pf.worker_id = $1)
          AND ",
    takeable_by_worker!(),
    "
        ORDER BY j.id
        LIMIT $2
        FOR UPDATE OF j SKIP LOCKED) p
    ORDER BY kb.n, p.id
    LIMIT $2"
));

/// Leases up to `$2` jobs whose lease expired before `$4` (their holder went quiet) to worker
/// `$1` for `$3` seconds, oldest expiry first (the partial index `jobs_lease_expiry`); otherwise as
/// [`LEASE_FRESH`]. Taken back right here, so no reaper is needed; the attempt bump fences
/// the old holder. Run before [`LEASE_FRESH`]: a dead worker's jobs are redone first.
/// Work only: an expired cross-check is taken back by [`LEASE_CHECKS`].
pub const LEASE_EXPIRED: &str = lease!(concat!(
    "SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
    WHERE j.state = 'leased' AND j.lease_expires_at < $4 AND j.kind = 'work'
      AND NOT EXISTS (SELECT 1 FROM position_failures pf
                      WHERE pf.job_id = j.id AND pf.worker_id = $1)
      AND ",
    takeable_by_worker!(),
    "
    ORDER BY j.lease_expires_at
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED"
));

/// Leases up to `$2` jobs worker `$1` saw a position fail on (found through its own
/// failures, index `position_failures_worker`), for `$3` seconds from `$4`; otherwise as
/// [`LEASE_FRESH`].
pub const LEASE_RETRIED: &str = lease!(concat!(
    "SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
    WHERE j.id IN (SELECT pf.job_id FROM position_failures pf WHERE pf.worker_id = $1)
      AND (j.state = 'queued' OR (j.state = 'leased' AND j.lease_expires_at < $4))
      AND ",
    takeable_by_worker!(),
    "
    ORDER BY j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED"
));

/// Up to `$2` open cross-checks (index `jobs_check_open`, id order) that worker `$1` may
/// take now, locked, each with whether its original result is an error: a check is taken
/// only once its original result exists, and not by the worker that measured the original
/// unless no other live worker (seen within `$3` seconds before `$4`, now) could take it. One whose original
/// is an error is picked whoever asks, to be closed (there is nothing to compare). Run only
/// when the work picks found too few, so the open checks it walks past (originals missing)
/// are those of work in flight, or of sweeps whose work this worker cannot take (a
/// binary-only engine it lacks, a build it failed): a small share of those positions.
pub const LEASE_CHECKS: &str = concat!(
    "SELECT j.id, r.error IS NOT NULL AS original_failed
FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
JOIN results r ON r.build_id = j.build_id AND r.suite_id = j.suite_id
              AND r.position_index = j.first_index AND r.depth = j.depth
WHERE j.kind = 'check' AND j.state IN ('queued', 'leased')
  AND (j.state = 'queued' OR j.lease_expires_at < $4)
  AND (r.error IS NOT NULL OR (",
    takeable_by_worker!(),
    "
      AND (r.worker_id <> $1 OR NOT EXISTS (
          SELECT 1 FROM workers w
          WHERE w.id <> $1 AND w.last_seen_at > $4 - make_interval(secs => $3)
            AND NOT EXISTS (SELECT 1 FROM build_failures bw
                            WHERE bw.build_id = j.build_id AND bw.worker_id = w.id)
            AND (s.source_sha256 IS NOT NULL
                 OR EXISTS (SELECT 1 FROM worker_engines ew
                            WHERE ew.worker_id = w.id AND ew.engine = s.engine))))))
ORDER BY j.id
LIMIT $2
FOR UPDATE OF j SKIP LOCKED"
);

/// Positions already measured by the cross-checks `$1` (an `int8[]`): what a re-leased check
/// leaves out.
pub const DONE_CHECKS: &str =
    "SELECT job_id, position_index FROM cross_checks WHERE job_id = ANY($1::int8[])";

/// Positions that already have a result, of the jobs `$1` (an `int8[]`): what a re-leased
/// job leaves out.
pub const DONE_POSITIONS: &str =
    "SELECT job_id, position_index FROM results WHERE job_id = ANY($1::int8[])";

/// Locks the jobs `$1` (an `int8[]`) in id order, so two calls about overlapping jobs never
/// deadlock, and reads what the lease check and the result check need.
pub const LOCK_JOBS: &str = "
SELECT j.id, j.state, j.worker_id, j.attempt, j.build_id, j.suite_id, j.first_index, j.count,
       j.sweep_id, s.cancelled, j.depth, j.nodes_limit, j.results_done, j.kind = 'check' AS is_check
FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
WHERE j.id = ANY($1::int8[])
ORDER BY j.id
FOR UPDATE OF j";

/// Reads (without locking) what a heartbeat checks of the jobs `$1` (an `int8[]`), and
/// whether each lease is due for renewal: less than two thirds of a `$2`-second lease left
/// at `$3` (now).
/// A heartbeat comes every few seconds, so most find their leases not due and write nothing.
pub const READ_LEASES: &str = "
SELECT j.id, j.state, j.worker_id, j.attempt, j.build_id, j.suite_id, j.first_index, j.count,
       j.sweep_id, s.cancelled, j.depth, j.nodes_limit, j.kind = 'check' AS is_check,
       j.lease_expires_at IS NULL
           OR j.lease_expires_at < $3 + make_interval(secs => $2 * 2.0 / 3.0) AS due
FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
WHERE j.id = ANY($1::int8[])";

/// Renews for `$4` seconds from `$5` (now) the leases of the jobs `$1` (an `int8[]`, ascending,
/// so rows are locked in the order every call locks them) that the workers `$3` (an `int8[]`,
/// one per job) still hold at the attempts `$2`: the heartbeats served together, in one
/// statement. Returns each job renewed with its worker. The conditions are the lease check
/// itself, so a job taken by someone else since it was read is simply not renewed.
pub const RENEW: &str = "
UPDATE jobs SET lease_expires_at = $5 + make_interval(secs => $4), updated_at = $5
FROM UNNEST($1::int8[], $2::int4[], $3::int8[]) AS t(id, attempt, worker)
WHERE jobs.id = t.id AND jobs.attempt = t.attempt AND jobs.worker_id = t.worker
  AND jobs.state = 'leased'
RETURNING jobs.id, jobs.worker_id";

/// Gives back the leases of the jobs `$1` (an `int8[]`, ascending, locked in the order every
/// call locks them) that worker `$3` still holds at the attempts `$2`: queued again with no
/// holder, as of `$4` (now). Returns the jobs released, with the attempt each was released at.
pub const RELEASE: &str = "
UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL, updated_at = $4
FROM UNNEST($1::int8[], $2::int4[]) AS t(id, attempt)
WHERE jobs.id = t.id AND jobs.attempt = t.attempt AND jobs.worker_id = $3
  AND jobs.state = 'leased'
RETURNING jobs.id, jobs.attempt";

/// For each job of `$1` (an `int8[]`): adds the results just stored (`$2`, an `int4[]`) to
/// its count and, where `$3` (a `text[]`) names a state (not null), sets it and renews the
/// lease for `$4` seconds from `$5` (now). One statement for all jobs of an upload.
pub const SET_STATES: &str = "
UPDATE jobs SET results_done = jobs.results_done + t.added,
       state = COALESCE(t.state, jobs.state),
       lease_expires_at = CASE WHEN t.state IS NULL THEN jobs.lease_expires_at
                               ELSE $5 + make_interval(secs => $4) END,
       updated_at = $5
FROM UNNEST($1::int8[], $2::int4[], $3::text[]) AS t(id, added, state)
WHERE jobs.id = t.id";

/// Inserts the results of uploads served together (one row per array element, every job of
/// every upload at once; `$1` to `$15` are what results and cross-checks share, see
/// `columns::Measured`), ignoring positions that already have one; returns the job of each
/// row inserted.
pub const INSERT_RESULTS: &str = "
INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                     worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                     reached_depth, time_ms, error, nodes_limit, counters)
SELECT t.build, t.suite, t.idx, t.depth, t.sweep, t.job, t.attempt, t.worker, t.pid, t.nodes,
       t.bm, t.solved, t.cp, t.mate, t.rd, t.ms, t.err, t.nl, t.counters::jsonb
FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int8[], $7::int8[],
            $8::int8[], $9::int4[], $10::text[], $11::int8[], $12::text[], $13::int4[],
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
            $8::int8[], $9::int4[], $10::text[], $11::int8[], $12::text[], $13::int4[],
            $14::int8[], $15::text[])
     AS t(worker, build, suite, idx, depth, nl, sweep, job, attempt, pid, nodes, bm, rd, ms, err)
LEFT JOIN results r ON r.build_id = t.build AND r.suite_id = t.suite
                   AND r.position_index = t.idx AND r.depth = t.depth
ON CONFLICT DO NOTHING
RETURNING job_id";

/// Marks worker `$1` seen at `$2` (now).
pub const MARK_SEEN: &str = "UPDATE workers SET last_seen_at = $2 WHERE id = $1";

/// Marks the workers `$1` (an `int8[]`, ascending; one for a lease call, every heartbeat's
/// served together for heartbeats) seen at `$2` (now); returns those marked (a worker not
/// returned is not registered).
pub const MARK_SEEN_MANY: &str =
    "UPDATE workers SET last_seen_at = $2 WHERE id = ANY($1::int8[]) RETURNING id";

/// Of the workers `$1` (an `int8[]`), those a lease must treat one by one: they failed a
/// build or a position (their jobs are chosen around those), or reported binary-only engines
/// (they may take those sweeps' jobs). All others take any job of a source engine, in queue
/// order, so one claim serves many of them at once ([`CLAIM_EXPIRED`], [`CLAIM_QUEUED`]).
pub const PARTICULAR_WORKERS: &str = "
SELECT worker_id FROM build_failures WHERE worker_id = ANY($1::int8[])
UNION SELECT worker_id FROM position_failures WHERE worker_id = ANY($1::int8[])
UNION SELECT worker_id FROM worker_engines WHERE worker_id = ANY($1::int8[])";

/// Locks up to `$1` work jobs of source engines whose lease expired before `$2` (now), oldest
/// expiry first,
/// for a claim shared by several lease calls (see [`ASSIGN`]).
pub const CLAIM_EXPIRED: &str = "
SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
WHERE j.state = 'leased' AND j.lease_expires_at < $2 AND s.source_sha256 IS NOT NULL
  AND j.kind = 'work'
ORDER BY j.lease_expires_at
LIMIT $1
FOR UPDATE OF j SKIP LOCKED";

/// Locks up to `$1` queued work jobs of source engines in id order (index
/// `jobs_queued_work`), for a claim shared by several lease calls (see [`ASSIGN`]).
pub const CLAIM_QUEUED: &str = "
SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
WHERE j.state = 'queued' AND j.kind = 'work' AND s.source_sha256 IS NOT NULL
ORDER BY j.id
LIMIT $1
FOR UPDATE OF j SKIP LOCKED";

/// Leases each claimed job `$1` (an `int8[]`) to the worker at the same place in `$2` for the
/// seconds in `$3` from `$4` (now): one statement for every lease call of a claim.
pub const ASSIGN: &str = "
UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, worker_id = t.w,
       lease_expires_at = $4 + make_interval(secs => t.secs), updated_at = $4
FROM UNNEST($1::int8[], $2::int8[], $3::float8[]) AS t(id, w, secs)
WHERE jobs.id = t.id
RETURNING jobs.id, jobs.attempt, jobs.sweep_id, jobs.build_id, jobs.suite_id,
          jobs.first_index, jobs.count, jobs.depth, jobs.nodes_limit, jobs.results_done, jobs.kind";

/// For each pair at the same place in `$1` (builds, an `int8[]`) and `$2` (how many, an
/// `int4[]`): locks up to that many queued work jobs of the build, of a source engine, in id
/// order (index `jobs_queued_build`); returns each job with its place (1-based) in the
/// arrays. What build affinity picks from: the builds a worker already has.
pub const CLAIM_OF_BUILDS: &str = "
SELECT t.n, p.id FROM UNNEST($1::int8[], $2::int4[]) WITH ORDINALITY AS t(build, room, n)
CROSS JOIN LATERAL (
    SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
    WHERE j.build_id = t.build AND j.state = 'queued' AND j.kind = 'work'
      AND s.source_sha256 IS NOT NULL
    ORDER BY j.id
    LIMIT t.room
    FOR UPDATE OF j SKIP LOCKED) p";

/// The builds of the first `$1` queued work jobs of source engines, in queue order (one row
/// per job: the caller keeps each build's first): where a worker without builds (or whose
/// builds ran out) starts.
pub const HEAD_BUILDS: &str = "
SELECT j.build_id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
WHERE j.state = 'queued' AND j.kind = 'work' AND s.source_sha256 IS NOT NULL
ORDER BY j.id
LIMIT $1";
