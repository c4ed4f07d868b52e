-- Cross-checks become takeable when their original result is stored (Postgres;
-- migrations/sqlite/0018_check_original_stored.sql is the twin).
--
-- A submit queues every check of a sweep at once, long before most originals exist, and
-- the check pick joined every queued check with `results` to find those whose original is
-- stored. Under load (5,809 queued checks, 190k results) Postgres planned that as a hash
-- join over all of `results`: 21.5 ms a call, the costliest statement of the lease path,
-- and growing with every result stored. Now the store says so on the check itself when the
-- original arrives (the upload that stores it, or the submit that copies it from an earlier
-- sweep), and the pick walks only checks whose original is stored, probing `results` by its
-- primary key for each one it considers.
ALTER TABLE jobs ADD COLUMN original_stored BOOLEAN NOT NULL DEFAULT FALSE;

UPDATE jobs SET original_stored = TRUE
WHERE kind = 'check'
  AND EXISTS (SELECT 1 FROM results r
              WHERE r.build_id = jobs.build_id AND r.suite_id = jobs.suite_id
                AND r.position_index = jobs.first_index AND r.depth = jobs.depth);

-- What the pick walks, in id order.
CREATE INDEX jobs_check_ready ON jobs (id) WHERE kind = 'check' AND state = 'queued' AND original_stored;
-- Where an upload finds the checks of the positions it stored: by build, suite, depth and a
-- range of positions.
CREATE INDEX jobs_check_waiting ON jobs (build_id, suite_id, depth, first_index)
    WHERE kind = 'check' AND NOT original_stored;
