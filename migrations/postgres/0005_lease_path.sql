-- The lease path at scale (Postgres). Every protocol call must cost O(log n) in the size of
-- the queue: leasing picks by index order instead of scanning and sorting `jobs`.

-- Queued jobs in id order: the pick of `LEASE_FRESH` reads this index from its start.
CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued';
-- Leased jobs by expiry: expired leases are taken back oldest first.
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'leased';
-- Open jobs by build (failing a build closes them). Replaces `jobs_open`, an index of open
-- jobs by id that only the old, scanning lease used.
CREATE INDEX jobs_open_build ON jobs (build_id) WHERE state IN ('queued', 'leased');
DROP INDEX jobs_open;
-- A worker's own failed tries: leasing finds the jobs it should take last through these.
CREATE INDEX position_failures_worker ON position_failures (worker_id, job_id);

-- Foreign keys on `results`: an upload's insert paid five checks per row (38 of the 52 ms
-- of an 879-row insert). Kept: `build_id`, whose ON DELETE CASCADE removes a deleted
-- sweep's results. Dropped, because every value is copied from the job row the upload has
-- just locked and checked (whose own foreign keys already guarantee them): `job_id`,
-- `sweep_id` and `suite_id`; and `worker_id`, which is the checked holder of that job's
-- lease (workers are never deleted).
ALTER TABLE results
    DROP CONSTRAINT results_job_id_fkey,
    DROP CONSTRAINT results_sweep_id_fkey,
    DROP CONSTRAINT results_suite_id_fkey,
    DROP CONSTRAINT results_worker_id_fkey;

-- Foreign keys on `jobs`: three checks per row were more than half of the time a 257,000-job
-- sweep took to submit. Jobs are written once, by the submit transaction, with the ids of the
-- sweep, builds and suites that same transaction has just written or read, and nothing
-- deletes sweeps; so `sweep_id`, `build_id` and `suite_id` are dropped. (Deleting a sweep,
-- should it ever be added, must delete its jobs itself.)
ALTER TABLE jobs
    DROP CONSTRAINT jobs_sweep_id_fkey,
    DROP CONSTRAINT jobs_build_id_fkey,
    DROP CONSTRAINT jobs_suite_id_fkey;

-- Results stored per job, kept up to date by every insert of results: closing a finished
-- job compares it with `count` instead of counting its results (the one count per upload
-- was a third of the database's time per worker cycle).
ALTER TABLE jobs ADD COLUMN results_done INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET results_done = c.n
FROM (SELECT job_id, count(*)::int AS n FROM results GROUP BY job_id) c
WHERE c.job_id = jobs.id;

-- Which workers failed a build: a lease call checks this for every worker it serves.
CREATE INDEX build_failures_worker ON build_failures (worker_id);
