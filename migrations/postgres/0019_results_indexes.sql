-- The results insert is most of what Postgres does for the worker protocol (issue 14: with
-- leases as rows, 0018, it is about 85 % of Postgres' time under load), and the sums kept by
-- `result_sums_add()` (0017) most of that insert. Four changes make it cheaper, and a
-- fifth keeps a big insert from taking quadratic time.
--
-- 1. Its statement is planned without sequential scans. plpgsql plans it once per connection,
--    with the statistics of that moment; on a connection first used while `results` was
--    nearly empty (a new database, the first uploads of a benchmark) the plan was a scan of
--    `results` per new row, kept for the connection's life: an upload of 8 results took
--    50-120 ms once `results` held a few thousand rows, and grew with the table.
-- 2. A new baseline result pairs with the results the other builds have at its position.
--    They were found build by build (a primary-key probe for each of a sweep's builds: 256
--    in a big sweep, about 2 ms per baseline result); `results_position` holds a position's
--    results of every build side by side, so it is one index walk. It replaces
--    `results_sweep`, whose reads (a sweep's results) it serves as well.
-- 3. `results_job` goes: a job's results are found by the primary key (build, suite, the
--    job's range of positions, depth), as every reader now does; one index less to write
--    per result.
-- 4. A new result's baseline partner is one probe of `results_pkey` on all four of its
--    columns: the baseline build is looked up first (a scalar subquery, one probe of
--    `builds_baseline`). Written as a join of `builds` and `results`, as in 0017, it was
--    planned with the statistics of a new database (a handful of rows in `results`) as a
--    scan of `results_pkey` by its last three columns, the build as a filter: every entry of
--    the index per new result. Under `bench/load.sh` with 1,000 workers and a few tens of
--    thousands of results stored, 8 new results read 2,144 index pages (1.2 ms per result),
--    the sums statement took 5.9 ms per insert, Postgres used most of a core at 160
--    uploads/s, and all of it grew with the table. `pg_scale::sums_trigger_probes_by_key`
--    counts the index pages an insert of 8 results reads on a 34,000-result table: 441 with
--    the join, 53 with the probe.
DROP INDEX results_sweep;
DROP INDEX results_job;
CREATE INDEX results_position ON results (sweep_id, suite_id, position_index, depth);

CREATE OR REPLACE FUNCTION result_sums_add() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- apart (OFFSET 0), so it is an index probe per new row, and one walk of the position's
    -- entries of `results_position` per new baseline result, never a join over all of
    -- `results`; and the new rows are excluded by a hashed NOT IN.
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
            -- The baseline build is found first, so the result is one primary-key probe on
            -- all four of its columns (see 4. at the top).
            SELECT b.nodes, b.solved
            FROM results b
            WHERE b.build_id = (SELECT bb.id FROM builds bb
                                WHERE bb.sweep_id = r.sweep_id AND bb.is_baseline)
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
            FROM results o
            WHERE o.sweep_id = base.sweep_id AND o.suite_id = base.suite_id
              AND o.position_index = base.position_index AND o.depth = base.depth
              AND o.build_id <> base.build_id AND o.nodes_limit = base.nodes_limit
              AND o.error IS NULL
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

ALTER FUNCTION result_sums_add() SET enable_seqscan = off;
-- The new rows are excluded from the pairs above by a hashed NOT IN, which Postgres plans only
-- when their keys fit in work_mem; planned for a larger first insert on a connection (a
-- transition table's size is known when planning), it was a scan of the new rows per pair:
-- a single insert of 249,000 results did not end in 20 minutes. 64 MB holds the keys of about
-- a million new rows; an upload is at most a thousand jobs.
ALTER FUNCTION result_sums_add() SET work_mem = '64MB';
