-- Build affinity (issue 14): a lease prefers queued jobs of builds the worker already has,
-- so each worker compiles few variants instead of every one. The pick reads this index per
-- (worker, build): O(log n) in the queue. Entries are written only when a job is queued
-- (submit, a release, a failed build put back), never by a lease or a report, so the hot
-- path pays nothing for it.
CREATE INDEX jobs_queued_build ON jobs (build_id, id) WHERE state = 'queued' AND kind = 'work';
