-- Leases as rows (see migrations/postgres/0018_lease_rows.sql, the twin, for why and how):
-- one `leases` row per lease call naming its jobs (`jobs`, a JSON array; `closed`, a bit per
-- job no longer held), a cursor per build over its fresh jobs (`build_queue`), jobs to hand
-- out again (`requeued`), and work jobs never written after their submission. Attempts were
-- 64-bit integers here already.
CREATE TABLE leases (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    worker_id   INTEGER NOT NULL,
    jobs        TEXT NOT NULL,
    closed      INTEGER NOT NULL DEFAULT 0,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX leases_expiry ON leases (expires_at);

CREATE TABLE build_queue (
    build_id   INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL,
    next_job   INTEGER NOT NULL,
    last_job   INTEGER NOT NULL,
    remaining  INTEGER NOT NULL
);
CREATE INDEX build_queue_head ON build_queue (sweep_id, remaining DESC, build_id);

CREATE TABLE requeued (
    job_id    INTEGER PRIMARY KEY,
    sweep_id  INTEGER NOT NULL,
    build_id  INTEGER NOT NULL,
    since     INTEGER NOT NULL
);
CREATE INDEX requeued_since ON requeued (since, job_id);
CREATE INDEX requeued_sweep ON requeued (sweep_id);
CREATE INDEX requeued_build ON requeued (build_id);

ALTER TABLE sweeps ADD COLUMN started BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE sweeps SET started = TRUE
WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = sweeps.id AND j.attempt > 0);

-- Results a job took from earlier sweeps at its submission (Postgres has had this column
-- since 0005; it is no longer kept up to date by uploads on either): a claim looks for the
-- positions already measured only of such jobs and of jobs handed out again.
ALTER TABLE jobs ADD COLUMN results_done INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET results_done = (SELECT count(*) FROM results r WHERE r.job_id = jobs.id)
WHERE attempt > 0 OR state = 'done';
-- A job's results are found by the primary key (build, suite, its positions, depth).
DROP INDEX results_job;

-- What was leased goes back to the queue (see the twin).
UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL
WHERE state = 'leased';
ALTER TABLE builds ADD COLUMN first_job INTEGER;
ALTER TABLE builds ADD COLUMN last_job INTEGER;
UPDATE builds SET
    first_job = (SELECT min(j.id) FROM jobs j WHERE j.build_id = builds.id AND j.kind = 'work'),
    last_job = (SELECT max(j.id) FROM jobs j WHERE j.build_id = builds.id AND j.kind = 'work');
INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
SELECT j.build_id, j.sweep_id, min(j.id), max(b.last_job), count(*)
FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
WHERE j.kind = 'work' AND j.state = 'queued' AND NOT s.cancelled AND b.build_error IS NULL
GROUP BY j.build_id, j.sweep_id;

DROP INDEX jobs_open;
DROP INDEX jobs_lease_expiry;
DROP INDEX jobs_requeued;
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
