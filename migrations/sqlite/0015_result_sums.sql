-- A sweep's table and progress kept summed as its results arrive (see the Postgres twin,
-- `0017_result_sums.sql`, for what each column sums). SQLite has one writer at a time, so a
-- row trigger sees every result stored before it and needs no locks; every cell has one row
-- (`shard` 0).
CREATE TABLE result_sums (
    sweep_id                   INTEGER NOT NULL,
    build_id                   INTEGER NOT NULL,
    suite_id                   INTEGER NOT NULL,
    depth                      INTEGER NOT NULL,
    nodes_limit                INTEGER NOT NULL,
    shard                      INTEGER NOT NULL,
    done                       INTEGER NOT NULL,
    errors                     INTEGER NOT NULL,
    reused                     INTEGER NOT NULL,
    nodes_hi                   INTEGER NOT NULL,
    nodes_lo                   INTEGER NOT NULL,
    solved                     INTEGER NOT NULL,
    compared                   INTEGER NOT NULL,
    compared_nodes_hi          INTEGER NOT NULL,
    compared_nodes_lo          INTEGER NOT NULL,
    compared_base_nodes_hi     INTEGER NOT NULL,
    compared_base_nodes_lo     INTEGER NOT NULL,
    compared_solved            INTEGER NOT NULL,
    compared_base_solved       INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, build_id, suite_id, depth, nodes_limit, shard)
);

-- A sweep's baseline build in one probe (see the twin).
CREATE INDEX builds_baseline ON builds (sweep_id) WHERE is_baseline;

CREATE TRIGGER results_summed AFTER INSERT ON results
BEGIN
    INSERT INTO result_sums
    -- The new result, paired with the baseline's valid result at its position if any (the
    -- baseline's own result pairs with itself).
    SELECT NEW.sweep_id, NEW.build_id, NEW.suite_id, NEW.depth, NEW.nodes_limit, 0,
           1,
           NEW.error IS NOT NULL,
           NEW.origin_sweep_id IS NOT NULL,
           CASE WHEN NEW.error IS NULL THEN NEW.nodes >> 32 ELSE 0 END,
           CASE WHEN NEW.error IS NULL THEN NEW.nodes & 4294967295 ELSE 0 END,
           NEW.error IS NULL AND NEW.solved,
           NEW.error IS NULL AND base.nodes IS NOT NULL,
           CASE WHEN NEW.error IS NULL AND base.nodes IS NOT NULL THEN NEW.nodes >> 32 ELSE 0 END,
           CASE WHEN NEW.error IS NULL AND base.nodes IS NOT NULL THEN NEW.nodes & 4294967295
                ELSE 0 END,
           CASE WHEN NEW.error IS NULL THEN COALESCE(base.nodes >> 32, 0) ELSE 0 END,
           CASE WHEN NEW.error IS NULL THEN COALESCE(base.nodes & 4294967295, 0) ELSE 0 END,
           NEW.error IS NULL AND base.nodes IS NOT NULL AND NEW.solved,
           NEW.error IS NULL AND COALESCE(base.solved, 0)
    FROM (SELECT 1) one
    LEFT JOIN (SELECT r.nodes, r.solved
               FROM builds bb JOIN results r ON r.build_id = bb.id
               WHERE bb.sweep_id = NEW.sweep_id AND bb.is_baseline
                 AND r.suite_id = NEW.suite_id AND r.position_index = NEW.position_index
                 AND r.depth = NEW.depth AND r.nodes_limit = NEW.nodes_limit
                 AND r.error IS NULL) base ON true
    UNION ALL
    -- A new valid baseline result: the other builds' valid results stored at its position
    -- pair with it from now on (each in its own cell, none in the new result's).
    SELECT r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit, 0,
           0, 0, 0, 0, 0, 0,
           1,
           r.nodes >> 32, r.nodes & 4294967295,
           NEW.nodes >> 32, NEW.nodes & 4294967295,
           r.solved, NEW.solved
    FROM builds ob JOIN results r ON r.build_id = ob.id
    WHERE ob.sweep_id = NEW.sweep_id AND ob.id <> NEW.build_id
      AND r.suite_id = NEW.suite_id AND r.position_index = NEW.position_index
      AND r.depth = NEW.depth AND r.nodes_limit = NEW.nodes_limit AND r.error IS NULL
      AND NEW.error IS NULL
      AND (SELECT is_baseline FROM builds WHERE id = NEW.build_id)
    ON CONFLICT (sweep_id, build_id, suite_id, depth, nodes_limit, shard) DO UPDATE SET
        done = done + excluded.done,
        errors = errors + excluded.errors,
        reused = reused + excluded.reused,
        nodes_hi = nodes_hi + excluded.nodes_hi,
        nodes_lo = nodes_lo + excluded.nodes_lo,
        solved = solved + excluded.solved,
        compared = compared + excluded.compared,
        compared_nodes_hi = compared_nodes_hi + excluded.compared_nodes_hi,
        compared_nodes_lo = compared_nodes_lo + excluded.compared_nodes_lo,
        compared_base_nodes_hi = compared_base_nodes_hi + excluded.compared_base_nodes_hi,
        compared_base_nodes_lo = compared_base_nodes_lo + excluded.compared_base_nodes_lo,
        compared_solved = compared_solved + excluded.compared_solved,
        compared_base_solved = compared_base_solved + excluded.compared_base_solved;
END;

-- The results stored before this migration, summed as the table's read summed them.
INSERT INTO result_sums
SELECT r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit, 0,
       count(*), count(r.error), count(r.origin_sweep_id),
       COALESCE(sum(r.nodes >> 32) FILTER (WHERE r.error IS NULL), 0),
       COALESCE(sum(r.nodes & 4294967295) FILTER (WHERE r.error IS NULL), 0),
       count(*) FILTER (WHERE r.error IS NULL AND r.solved),
       count(base.nodes) FILTER (WHERE r.error IS NULL),
       COALESCE(sum(r.nodes >> 32) FILTER (WHERE r.error IS NULL AND base.nodes IS NOT NULL), 0),
       COALESCE(sum(r.nodes & 4294967295)
                FILTER (WHERE r.error IS NULL AND base.nodes IS NOT NULL), 0),
       COALESCE(sum(base.nodes >> 32) FILTER (WHERE r.error IS NULL), 0),
       COALESCE(sum(base.nodes & 4294967295) FILTER (WHERE r.error IS NULL), 0),
       count(*) FILTER (WHERE r.error IS NULL AND base.nodes IS NOT NULL AND r.solved),
       count(*) FILTER (WHERE r.error IS NULL AND base.solved)
FROM results r
LEFT JOIN builds bb ON bb.sweep_id = r.sweep_id AND bb.is_baseline
LEFT JOIN results base ON base.build_id = bb.id AND base.suite_id = r.suite_id
                      AND base.position_index = r.position_index AND base.depth = r.depth
                      AND base.nodes_limit = r.nodes_limit AND base.error IS NULL
WHERE true
GROUP BY r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit;

-- A sweep's jobs and positions, which never change after its submission (see the twin).
ALTER TABLE sweeps ADD COLUMN job_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN position_count INTEGER NOT NULL DEFAULT 0;
UPDATE sweeps SET
    job_count = (SELECT count(*) FROM jobs j WHERE j.sweep_id = sweeps.id),
    position_count = (SELECT COALESCE(sum(j.count), 0) FROM jobs j
                      WHERE j.sweep_id = sweeps.id AND j.kind = 'work');

CREATE INDEX jobs_requeued ON jobs (sweep_id) WHERE state = 'queued' AND attempt > 0;

-- Results stay as written (see the twin): an update or delete is refused.
CREATE TRIGGER results_no_update BEFORE UPDATE ON results
BEGIN
    SELECT RAISE(ABORT, 'results are append-only (result_sums is kept from inserts): UPDATE refused');
END;
CREATE TRIGGER results_no_delete BEFORE DELETE ON results
BEGIN
    SELECT RAISE(ABORT, 'results are append-only (result_sums is kept from inserts): DELETE refused');
END;
