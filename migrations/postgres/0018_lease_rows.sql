-- Leases as rows (issue 14): the worker protocol's hot path writes no `jobs` row. Before this,
-- every job was written when it was leased (state, attempt, holder, expiry: a new row version
-- and four index entries) and again when it was done; `bench/pg-floor.sh` measured that this
-- schema could not store more than about 46,000 jobs/s on two cores whatever the batching,
-- against about 150,000 for a store that writes one row per lease call instead.
--
-- Now:
-- * a lease call writes one `leases` row naming the jobs it hands out (`jobs`), with a bit per
--   job (`closed`, bit i for jobs[i]) set once that job is no longer held (finished, given
--   back, put back in the queue). Its id is the lease's fence: what the worker protocol calls
--   the attempt, named by every heartbeat, upload and build failure. A row goes once every
--   bit is set, or when its expired jobs are put back in the queue (`requeued`); a report
--   naming a row that is gone, or a closed bit, is `lease_lost`;
-- * a sweep's work jobs are inserted build by build, so each build's are one range of ids
--   (`builds.first_job` to `last_job`); fresh work is handed out by a cursor per build
--   (`build_queue`): its range from `next_job` on, over the primary key; the row goes once
--   the build has none left;
-- * jobs to hand out again (an expired lease's, given back, finished with positions still
--   missing, a build that failed on one worker only) wait in `requeued`, oldest first;
-- * a work job is never written after its submission: it is complete when every position has
--   a result, and a sweep is open while a build without a build error misses results or a
--   cross-check is open. Cross-checks keep their state in `jobs` (they are a few per cent of
--   the jobs, and their pick waits for their originals).
CREATE TABLE leases (
    id          BIGSERIAL PRIMARY KEY,
    worker_id   BIGINT NOT NULL,
    jobs        BIGINT[] NOT NULL,
    closed      BIGINT NOT NULL DEFAULT 0,
    expires_at  TIMESTAMPTZ NOT NULL
);
-- Expired leases, oldest first: what a claim puts back in the queue.
CREATE INDEX leases_expiry ON leases (expires_at);

CREATE TABLE build_queue (
    build_id   BIGINT PRIMARY KEY,
    sweep_id   BIGINT NOT NULL,
    next_job   BIGINT NOT NULL,
    last_job   BIGINT NOT NULL,
    remaining  BIGINT NOT NULL
);
-- The head of the queue: the oldest sweep's builds, those with the most left first (so
-- builds handed out together stay level), then in build order.
CREATE INDEX build_queue_head ON build_queue (sweep_id, remaining DESC, build_id);

CREATE TABLE requeued (
    job_id    BIGINT PRIMARY KEY,
    sweep_id  BIGINT NOT NULL,
    build_id  BIGINT NOT NULL,
    since     TIMESTAMPTZ NOT NULL
);
CREATE INDEX requeued_since ON requeued (since, job_id);
CREATE INDEX requeued_sweep ON requeued (sweep_id);
CREATE INDEX requeued_build ON requeued (build_id);

-- Set by the first lease of one of the sweep's jobs (once per sweep, not per job).
ALTER TABLE sweeps ADD COLUMN started BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE sweeps SET started = TRUE
WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = sweeps.id AND j.attempt > 0);

-- Lease ids, not per-job counters, are the attempts now: 64 bits.
ALTER TABLE results ALTER COLUMN attempt TYPE BIGINT;
ALTER TABLE position_failures ALTER COLUMN attempt TYPE BIGINT;
ALTER TABLE cross_checks ALTER COLUMN attempt TYPE BIGINT;

-- `jobs.results_done` is no longer kept up to date by uploads: it now counts the results a
-- job took from earlier sweeps at its submission (and, for jobs of earlier versions, what
-- they had when this ran). A claim looks for the positions already measured only of such
-- jobs and of jobs handed out again: a fresh job has none.
--
-- What was leased when this migration ran goes back to the queue: the holders' next calls
-- are answered `lease_lost` and nothing they stored is lost. Work jobs keep `queued` from
-- now on (`done` only for jobs a new sweep completes with earlier results at submission).
UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL
WHERE state = 'leased';
ALTER TABLE builds ADD COLUMN first_job BIGINT, ADD COLUMN last_job BIGINT;
UPDATE builds SET first_job = r.lo, last_job = r.hi
FROM (SELECT build_id, min(id) AS lo, max(id) AS hi FROM jobs WHERE kind = 'work'
      GROUP BY build_id) r
WHERE r.build_id = builds.id;
-- (Sweeps of earlier versions were queued round-robin over their builds: their cursors walk
-- ranges shared with their other builds, which costs more but reads the same.)
INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
SELECT j.build_id, j.sweep_id, min(j.id), max(b.last_job), count(*)
FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
WHERE j.kind = 'work' AND j.state = 'queued' AND NOT s.cancelled AND b.build_error IS NULL
GROUP BY j.build_id, j.sweep_id;

-- Indexes of job states the hot path no longer writes, which only cost submissions now:
-- the queue walks by id and by build (the cursors walk builds' ranges of the primary key;
-- `jobs_queued_build`, entries written in 257 places at once by a big submission, was half
-- of its time), lease expiry (on `leases` now), open jobs by build and re-queued jobs (both
-- in `requeued` now).
DROP INDEX jobs_queued_work;
DROP INDEX jobs_queued_build;
DROP INDEX jobs_lease_expiry;
DROP INDEX jobs_open_build;
DROP INDEX jobs_requeued;
-- Open cross-checks of a sweep (whether it is still open), without walking its work jobs,
-- which stay `queued` in `jobs_sweep`.
CREATE INDEX jobs_check_sweep ON jobs (sweep_id) WHERE kind = 'check' AND state IN ('queued', 'leased');
-- Jobs by sweep: only cross-checks are looked up that way now (a sweep's planned checks);
-- work jobs are found through their builds' ranges of ids. One index less to write per job:
-- a fifth of a 250,000-job submission's time.
DROP INDEX jobs_sweep;
CREATE INDEX jobs_checks ON jobs (sweep_id) WHERE kind = 'check';
-- Work jobs' states are no longer written (see above): those of earlier versions that a
-- failed build or a cancel closed read `queued` again, as every work job does; a failed
-- build's are handed out again only when it is retried, a cancelled sweep's never.
UPDATE jobs SET state = 'queued' WHERE kind = 'work' AND state IN ('failed', 'cancelled');
