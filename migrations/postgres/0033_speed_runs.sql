-- Speed jobs (issue 49, `[speed]`): one job per variant (`jobs.kind = 'speed'`, its state kept
-- in `jobs` as a cross-check's is), run by one worker that runs nothing else meanwhile: pairs
-- of fresh engine processes, the baseline then the variant, over the job's positions. Each
-- pair is a row; a job that ended short has one more row, with the error and no figures.
-- Written once, by the upload that finishes the job (a job has one holder at a time).
CREATE TABLE speed_runs (
    job_id        BIGINT NOT NULL,
    pair          INTEGER NOT NULL,
    sweep_id      BIGINT NOT NULL,
    build_id      BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    worker_id     BIGINT NOT NULL,
    attempt       BIGINT NOT NULL,
    base_cpu_us   BIGINT,
    base_wall_us  BIGINT,
    base_nodes    BIGINT,
    test_cpu_us   BIGINT,
    test_wall_us  BIGINT,
    test_nodes    BIGINT,
    error         TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, pair)
);
CREATE INDEX speed_runs_sweep ON speed_runs (sweep_id);
-- A sweep is open while a speed job of it is; and the pick of a waiting speed job.
CREATE INDEX jobs_speed_open ON jobs (sweep_id) WHERE kind = 'speed' AND state IN ('queued', 'leased');
CREATE INDEX jobs_speed_queued ON jobs (id) WHERE kind = 'speed' AND state = 'queued';
