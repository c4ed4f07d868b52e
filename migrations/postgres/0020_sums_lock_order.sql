-- The sums trigger takes its positions' advisory locks in key order, so that two inserts
-- never wait for each other's (0017). They did not always: Postgres pushes the lock
-- condition into the grouped subquery as a filter of its aggregate (a HAVING, volatile or
-- not: seen on Postgres 15 with EXPLAIN). Grouped by sorting, the locks were still taken in
-- order; grouped by hashing (the plan for a connection whose first insert there held some
-- hundreds of results, as an upload round of many workers does), they were taken in the
-- hash table's order and sorted only after. Two such inserts could each hold a key the
-- other waited for: `bench/load.sh` with 1,000 saturating workers saw a few deadlocks in 3
-- of 23 runs (session 15; the uploads they aborted were answered 500; from session 16 they
-- are retried). OFFSET 0 keeps the condition out of the subquery, whose sorted rows it
-- then reads in order whatever the plan.
-- `pg_groups::sums_trigger_takes_its_locks_in_key_order` holds the lowest key of a big insert
-- and checks that the insert, waiting for it, holds no other.
--
-- The function is 0019's but for that OFFSET. Replacing a function drops its settings, so
-- 0019's are set again below.
CREATE OR REPLACE FUNCTION result_sums_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One statement takes them all, in key order: the sorted subquery is read in order, and
    -- its OFFSET 0 keeps the locks out of it (see the top of this file).
    PERFORM count(*)
    FROM (SELECT hashtext(concat_ws(':', n.sweep_id, n.suite_id, n.position_index, n.depth,
                                    n.nodes_limit)) AS key,
                 bool_or(b.is_baseline) AS base
          FROM new_results n JOIN builds b ON b.id = n.build_id
          GROUP BY 1 ORDER BY 1 OFFSET 0) pos
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
ALTER FUNCTION result_sums_add() SET work_mem = '64MB';
