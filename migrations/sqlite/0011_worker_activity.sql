-- The workers page (GET /api/v1/workers) shows each worker's results of the last minute and
-- the leases it holds: each counted over an index in one range scan. Timestamps only grow,
-- so inserts append at the index's right edge.
CREATE INDEX results_created ON results (created_at);
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'leased';
