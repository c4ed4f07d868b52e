-- The workers page (GET /api/v1/workers) shows each worker's results of the last minute:
-- counted over this index in one range scan of the newest rows. Timestamps only grow, so
-- inserts append at the index's right edge.
CREATE INDEX results_created ON results (created_at);
