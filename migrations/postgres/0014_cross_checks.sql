-- Cross-checks (issue 10 item 4): a sampled share of positions is measured a second time, on
-- another worker when there is one and in a fresh engine process, to catch nondeterministic
-- engines and bad machines. Planned at submission as jobs of their own kind, one position
-- each, after all the sweep's work; their measurements go to `cross_checks`, never into
-- `results`, so a check never changes the table's numbers.

-- 'work' (a chunk of positions, results in `results`) or 'check' (one position measured
-- again, its measurement in `cross_checks`). Existing jobs are all work.
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'work';

-- The queued-work pick (LEASE_FRESH, CLAIM_QUEUED) reads this index from its start and must
-- never walk past queued checks, which wait for their originals: work only. Replaces
-- `jobs_queued`.
CREATE INDEX jobs_queued_work ON jobs (id) WHERE state = 'queued' AND kind = 'work';
DROP INDEX jobs_queued;
-- The check pick (LEASE_CHECKS) walks open checks in id order, taken only when the work
-- picks found too few.
CREATE INDEX jobs_check_open ON jobs (id) WHERE kind = 'check' AND state IN ('queued', 'leased');

-- One measurement per checked (build, suite, position, limit), keyed like `results` (whose
-- row it re-measures): a re-sent upload stores nothing twice. Written under the check job's
-- lease, attempt-fenced like results.
CREATE TABLE cross_checks (
    build_id        BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id        BIGINT NOT NULL,
    position_index  INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    nodes_limit     BIGINT NOT NULL,
    sweep_id        BIGINT NOT NULL,
    job_id          BIGINT NOT NULL,
    attempt         INTEGER NOT NULL,
    worker_id       BIGINT NOT NULL,
    position_id     TEXT NOT NULL,
    nodes           BIGINT NOT NULL,
    bestmove        TEXT NOT NULL,
    reached_depth   INTEGER NOT NULL,
    time_ms         BIGINT NOT NULL,
    error           TEXT,
    -- Judged as the check is stored (its original exists by then and never changes), so the
    -- workers page counts a worker's checks and mismatches over these two indexes alone:
    -- who measured the original, and whether both succeeded and disagreed.
    original_worker_id  BIGINT,
    mismatch        BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, suite_id, position_index, depth)
);
CREATE INDEX cross_checks_sweep ON cross_checks (sweep_id);
CREATE INDEX cross_checks_worker ON cross_checks (worker_id);
CREATE INDEX cross_checks_original_worker ON cross_checks (original_worker_id);
-- The mismatches alone (few, one hopes): `/metrics` counts them at every scrape.
CREATE INDEX cross_checks_mismatch ON cross_checks (sweep_id) WHERE mismatch;
