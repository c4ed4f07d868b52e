-- A sweep's table and progress kept summed as its results arrive, so reading them costs a
-- few hundred rows whatever the sweep's size: summing 250,000 results on every read of a
-- running sweep's table took 150-200 ms, and counting them for its progress 40-80 ms more.
--
-- `result_sums` holds, per cell (build, suite, limit), what the table sums over the cell's
-- results (see `sweep_domain::table::sums_of`): results, errors, reused, nodes and solved of
-- the valid ones, and the same over the positions where the baseline has a valid result too.
-- Node sums are kept as 32-bit halves (`nodes_hi` of `nodes >> 32`, `nodes_lo` of the low
-- 32 bits), which no count of results this side of 2^31 per cell can overflow on either
-- backend. Each cell has up to 16 rows (`shard`, from the writing connection), summed on
-- read: two uploads stored at once add to different rows and do not wait for each other.
--
-- Written by the database itself, on every insert into `results` (uploads, reused results,
-- anything later), so no writer can forget it; results are never updated or deleted. A pair
-- (a result, the baseline's at its position) is counted by whichever of the two inserts comes
-- second. Two transactions inserting the two at once would each miss the other, so an insert
-- first takes, per position, a transaction lock: shared for other builds' results (which
-- never wait for each other), exclusive where it holds the baseline's; in key order, so two
-- inserts cannot wait for each other in a circle. Only then does it look for partners, in a
-- statement that sees what the lock's holder committed.
CREATE TABLE result_sums (
    sweep_id                   BIGINT NOT NULL,
    build_id                   BIGINT NOT NULL,
    suite_id                   BIGINT NOT NULL,
    depth                      INTEGER NOT NULL,
    nodes_limit                BIGINT NOT NULL,
    shard                      INTEGER NOT NULL,
    done                       BIGINT NOT NULL,
    errors                     BIGINT NOT NULL,
    reused                     BIGINT NOT NULL,
    nodes_hi                   BIGINT NOT NULL,
    nodes_lo                   BIGINT NOT NULL,
    solved                     BIGINT NOT NULL,
    compared                   BIGINT NOT NULL,
    compared_nodes_hi          BIGINT NOT NULL,
    compared_nodes_lo          BIGINT NOT NULL,
    compared_base_nodes_hi     BIGINT NOT NULL,
    compared_base_nodes_lo     BIGINT NOT NULL,
    compared_solved            BIGINT NOT NULL,
    compared_base_solved       BIGINT NOT NULL,
    PRIMARY KEY (sweep_id, build_id, suite_id, depth, nodes_limit, shard)
);

-- A sweep's baseline build in one probe: every new result looks its baseline partner up
-- (without it, through `builds_sweep_id_name_key`, walking all of the sweep's builds: 257
-- in a big sweep).
CREATE INDEX builds_baseline ON builds (sweep_id) WHERE is_baseline;

-- Adds the results of one insert statement (`new_results`) to their cells, after taking the
-- locks of their positions (see above).
CREATE FUNCTION result_sums_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One statement takes them all, in key order (the sorted subquery is read in order, and
    -- the locks, volatile, are not pushed into it).
    PERFORM count(*)
    FROM (SELECT hashtext(concat_ws(':', n.sweep_id, n.suite_id, n.position_index, n.depth,
                                    n.nodes_limit)) AS key,
                 bool_or(b.is_baseline) AS base
          FROM new_results n JOIN builds b ON b.id = n.build_id
          GROUP BY 1 ORDER BY 1) pos
    WHERE CASE WHEN pos.base THEN pg_advisory_xact_lock(17, pos.key) IS NULL
               ELSE pg_advisory_xact_lock_shared(17, pos.key) IS NULL END;

    -- A static statement, so plpgsql plans it once per connection, for the size of the first
    -- insert there. Its plan must suit every size: each lookup is a lateral subquery kept
    -- apart (OFFSET 0), so it is index probes per new row (per new baseline result and build
    -- for the pairs it makes), never a join over all of `results`; and the new rows are
    -- excluded by a hashed NOT IN.
    INSERT INTO result_sums AS s
    SELECT t.sweep_id, t.build_id, t.suite_id, t.depth, t.nodes_limit, pg_backend_pid() % 16,
           sum(t.done), sum(t.errors), sum(t.reused), sum(t.nodes_hi), sum(t.nodes_lo),
           sum(t.solved), sum(t.compared), sum(t.compared_nodes_hi), sum(t.compared_nodes_lo),
           sum(t.compared_base_nodes_hi), sum(t.compared_base_nodes_lo), sum(t.compared_solved),
           sum(t.compared_base_solved)
    FROM (
        -- Every new result, paired with the baseline's valid result at its position if any
        -- (stored earlier, or in this very insert: the baseline's own result pairs with
        -- itself, as in the table's definition).
        SELECT r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit,
               1 AS done,
               (r.error IS NOT NULL)::int AS errors,
               (r.origin_sweep_id IS NOT NULL)::int AS reused,
               CASE WHEN r.error IS NULL THEN r.nodes >> 32 ELSE 0 END AS nodes_hi,
               CASE WHEN r.error IS NULL THEN r.nodes & 4294967295 ELSE 0 END AS nodes_lo,
               (r.error IS NULL AND r.solved)::int AS solved,
               (r.error IS NULL AND base.nodes IS NOT NULL)::int AS compared,
               CASE WHEN r.error IS NULL AND base.nodes IS NOT NULL THEN r.nodes >> 32 ELSE 0 END
                   AS compared_nodes_hi,
               CASE WHEN r.error IS NULL AND base.nodes IS NOT NULL THEN r.nodes & 4294967295
                    ELSE 0 END AS compared_nodes_lo,
               CASE WHEN r.error IS NULL THEN COALESCE(base.nodes >> 32, 0) ELSE 0 END
                   AS compared_base_nodes_hi,
               CASE WHEN r.error IS NULL THEN COALESCE(base.nodes & 4294967295, 0) ELSE 0 END
                   AS compared_base_nodes_lo,
               (r.error IS NULL AND base.nodes IS NOT NULL AND r.solved)::int AS compared_solved,
               (r.error IS NULL AND COALESCE(base.solved, false))::int AS compared_base_solved
        FROM new_results r
        LEFT JOIN LATERAL (
            SELECT b.nodes, b.solved
            FROM builds bb JOIN results b ON b.build_id = bb.id
            WHERE bb.sweep_id = r.sweep_id AND bb.is_baseline
              AND b.suite_id = r.suite_id AND b.position_index = r.position_index
              AND b.depth = r.depth AND b.nodes_limit = r.nodes_limit AND b.error IS NULL
            OFFSET 0
        ) base ON true
        UNION ALL
        -- Valid results stored earlier at the position of a new valid baseline result: pairs
        -- that exist from now on (those inserted with it were paired above).
        SELECT r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit,
               0, 0, 0, 0, 0, 0,
               1,
               r.nodes >> 32, r.nodes & 4294967295,
               base.nodes >> 32, base.nodes & 4294967295,
               r.solved::int, base.solved::int
        FROM (SELECT n.*
              FROM new_results n JOIN builds bb ON bb.id = n.build_id AND bb.is_baseline
              WHERE n.error IS NULL
              OFFSET 0) base
        CROSS JOIN LATERAL (
            SELECT o.sweep_id, o.build_id, o.suite_id, o.position_index, o.depth, o.nodes_limit,
                   o.nodes, o.solved
            FROM builds ob JOIN results o ON o.build_id = ob.id
            WHERE ob.sweep_id = base.sweep_id AND ob.id <> base.build_id
              AND o.suite_id = base.suite_id AND o.position_index = base.position_index
              AND o.depth = base.depth AND o.nodes_limit = base.nodes_limit AND o.error IS NULL
            OFFSET 0
        ) r
        WHERE (r.build_id, r.suite_id, r.position_index, r.depth) NOT IN
              (SELECT n.build_id, n.suite_id, n.position_index, n.depth FROM new_results n)
    ) t
    GROUP BY t.sweep_id, t.build_id, t.suite_id, t.depth, t.nodes_limit
    ORDER BY t.sweep_id, t.build_id, t.suite_id, t.depth, t.nodes_limit
    ON CONFLICT (sweep_id, build_id, suite_id, depth, nodes_limit, shard) DO UPDATE SET
        done = s.done + EXCLUDED.done,
        errors = s.errors + EXCLUDED.errors,
        reused = s.reused + EXCLUDED.reused,
        nodes_hi = s.nodes_hi + EXCLUDED.nodes_hi,
        nodes_lo = s.nodes_lo + EXCLUDED.nodes_lo,
        solved = s.solved + EXCLUDED.solved,
        compared = s.compared + EXCLUDED.compared,
        compared_nodes_hi = s.compared_nodes_hi + EXCLUDED.compared_nodes_hi,
        compared_nodes_lo = s.compared_nodes_lo + EXCLUDED.compared_nodes_lo,
        compared_base_nodes_hi = s.compared_base_nodes_hi + EXCLUDED.compared_base_nodes_hi,
        compared_base_nodes_lo = s.compared_base_nodes_lo + EXCLUDED.compared_base_nodes_lo,
        compared_solved = s.compared_solved + EXCLUDED.compared_solved,
        compared_base_solved = s.compared_base_solved + EXCLUDED.compared_base_solved;
    RETURN NULL;
END
$$;

CREATE TRIGGER results_summed AFTER INSERT ON results
    REFERENCING NEW TABLE AS new_results
    FOR EACH STATEMENT EXECUTE FUNCTION result_sums_add();

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
GROUP BY r.sweep_id, r.build_id, r.suite_id, r.depth, r.nodes_limit;

-- A sweep's jobs and positions never change after its submission; kept on the sweep, so its
-- progress no longer counts 250,000 job rows on every read.
ALTER TABLE sweeps ADD COLUMN job_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN position_count BIGINT NOT NULL DEFAULT 0;
UPDATE sweeps SET job_count = c.jobs, position_count = c.positions
FROM (SELECT sweep_id, count(*) AS jobs,
             COALESCE(sum(count) FILTER (WHERE kind = 'work'), 0) AS positions
      FROM jobs GROUP BY sweep_id) c
WHERE c.sweep_id = sweeps.id;

-- Jobs given back to the queue after a lease (released, or retried): with `jobs_sweep`, it
-- tells whether a sweep has started without counting its jobs. Small: a job is in it only
-- between its release and its next lease.
CREATE INDEX jobs_requeued ON jobs (sweep_id) WHERE state = 'queued' AND attempt > 0;

-- `result_sums` follows inserts only, so results stay as written: an update or delete is
-- refused, with the reason, instead of leaving the sums silently wrong.
CREATE FUNCTION results_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'results are append-only (result_sums is kept from inserts): % refused', TG_OP;
END
$$;
CREATE TRIGGER results_append_only BEFORE UPDATE OR DELETE ON results
    FOR EACH STATEMENT EXECUTE FUNCTION results_append_only();
