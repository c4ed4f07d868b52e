-- Rules one worker token cannot get round by registering many workers, and who may read a
-- source snapshot (issue 46 items 5-7; migrations/sqlite/0025_token_rules.sql is the twin).

-- The worker that measured a cross-check's original result, set with `original_stored` (by
-- the upload that stores the original, or the submit that copies it). The check pick keeps a
-- check from every worker of that worker's token while a worker of another token could take
-- it; reading the original's worker here, rather than by a probe of `results` nested inside
-- a probe of `workers`, keeps the pick's one probe of `results` per check.
ALTER TABLE jobs ADD COLUMN original_worker BIGINT;
UPDATE jobs j SET original_worker = r.worker_id
FROM results r
WHERE j.kind = 'check' AND j.original_stored
  AND r.build_id = j.build_id AND r.suite_id = j.suite_id
  AND r.position_index = j.first_index AND r.depth = j.depth;

-- A token's live registrations, counted at every registration (`--max-workers-per-token`).
CREATE INDEX workers_token_seen ON workers (token_id, last_seen_at);

-- Who uploaded each snapshot (a token id; no foreign key, like `sweeps.submitter_token`: a
-- local run's tokens have no row). An upload of bytes already stored adds its token: holding
-- the bytes, it learns nothing by being allowed to read them.
CREATE TABLE snapshot_uploaders (
    sha256    TEXT NOT NULL REFERENCES source_snapshots (sha256) ON DELETE CASCADE,
    token_id  BIGINT NOT NULL,
    PRIMARY KEY (sha256, token_id)
);

-- Which sweeps use a snapshot: whether a caller submitted one, or a worker holds a lease of one.
CREATE INDEX sweeps_source ON sweeps (source_sha256);
