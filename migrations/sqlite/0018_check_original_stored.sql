-- Cross-checks become takeable when their original result is stored (see
-- migrations/postgres/0022_check_original_stored.sql, the twin, for why): set by the upload
-- that stores the original or the submit that copies it; the pick walks only those.
ALTER TABLE jobs ADD COLUMN original_stored BOOLEAN NOT NULL DEFAULT FALSE;

UPDATE jobs SET original_stored = TRUE
WHERE kind = 'check'
  AND EXISTS (SELECT 1 FROM results r
              WHERE r.build_id = jobs.build_id AND r.suite_id = jobs.suite_id
                AND r.position_index = jobs.first_index AND r.depth = jobs.depth);

CREATE INDEX jobs_check_ready ON jobs (id) WHERE kind = 'check' AND state = 'queued' AND original_stored;
CREATE INDEX jobs_check_waiting ON jobs (build_id, suite_id, depth, first_index)
    WHERE kind = 'check' AND NOT original_stored;
