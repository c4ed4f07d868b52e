-- Rules one worker token cannot get round by registering many workers, and who may read a
-- source snapshot: the twin of migrations/postgres/0025_token_rules.sql (see it for why).

ALTER TABLE jobs ADD COLUMN original_worker INTEGER;
UPDATE jobs SET original_worker = (
    SELECT r.worker_id FROM results r
    WHERE r.build_id = jobs.build_id AND r.suite_id = jobs.suite_id
      AND r.position_index = jobs.first_index AND r.depth = jobs.depth)
WHERE kind = 'check' AND original_stored;

CREATE INDEX workers_token_seen ON workers (token_id, last_seen_at);

CREATE TABLE snapshot_uploaders (
    sha256    TEXT NOT NULL REFERENCES source_snapshots (sha256) ON DELETE CASCADE,
    token_id  INTEGER NOT NULL,
    PRIMARY KEY (sha256, token_id)
);

CREATE INDEX sweeps_source ON sweeps (source_sha256);
