-- Several search limits per sweep (`depths = [...]`, or `nodes = N` instead of a depth).
-- Each job carries its own limit: `depth` (0 for a node limit) and `nodes_limit` (0 for a
-- depth limit). A result's key column `depth` already holds the depth; a node-limited result
-- has depth 0 and its limit in `nodes_limit`. A sweep has at most one node limit, so the
-- existing key (build, suite, position, depth) stays unique without changing it.
ALTER TABLE jobs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN nodes_limit INTEGER NOT NULL DEFAULT 0;
-- Jobs of sweeps stored before this migration ran at the sweep's one depth.
UPDATE jobs SET depth = (SELECT json_extract(s.spec, '$.depth') FROM sweeps s WHERE s.id = jobs.sweep_id)
WHERE EXISTS (SELECT 1 FROM sweeps s WHERE s.id = jobs.sweep_id AND json_extract(s.spec, '$.depth') IS NOT NULL);
ALTER TABLE results ADD COLUMN nodes_limit INTEGER NOT NULL DEFAULT 0;
