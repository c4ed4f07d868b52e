-- Cross-checks (issue 10 item 4; see the Postgres twin): jobs of kind 'check' measure one
-- position again in a fresh engine process; their measurements go to `cross_checks`, never
-- into `results`.
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'work';
-- The check pick walks open checks in id order.
CREATE INDEX jobs_check_open ON jobs (id) WHERE kind = 'check' AND state IN ('queued', 'leased');

CREATE TABLE cross_checks (
    build_id        INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id        INTEGER NOT NULL,
    position_index  INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    nodes_limit     INTEGER NOT NULL,
    sweep_id        INTEGER NOT NULL,
    job_id          INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    position_id     TEXT NOT NULL,
    nodes           INTEGER NOT NULL,
    bestmove        TEXT NOT NULL,
    reached_depth   INTEGER NOT NULL,
    time_ms         INTEGER NOT NULL,
    error           TEXT,
    -- Judged as the check is stored (its original exists by then and never changes), so the
    -- workers page counts a worker's checks and mismatches over these two indexes alone:
    -- who measured the original, and whether both succeeded and disagreed.
    original_worker_id  INTEGER,
    mismatch        BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (build_id, suite_id, position_index, depth)
);
CREATE INDEX cross_checks_sweep ON cross_checks (sweep_id);
CREATE INDEX cross_checks_worker ON cross_checks (worker_id);
CREATE INDEX cross_checks_original_worker ON cross_checks (original_worker_id);
-- The mismatches alone (few, one hopes): `/metrics` counts them at every scrape.
CREATE INDEX cross_checks_mismatch ON cross_checks (sweep_id) WHERE mismatch;
