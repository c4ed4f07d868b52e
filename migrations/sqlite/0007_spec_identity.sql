-- A sweep's identity (sha256 of its canonical spec and source snapshot, see
-- `SweepSpec::identity`): an identical submission while such a sweep is still queued or
-- running returns that sweep instead of a second copy. Sweeps stored before this column have
-- none and are never matched. Numbered 0007 like its Postgres twin (SQLite has no 0005 or
-- 0006; the migrator accepts gaps). Submissions are serialized by the write transaction
-- (`BEGIN IMMEDIATE`); this index finds the candidates.
ALTER TABLE sweeps ADD COLUMN spec_sha256 TEXT;
CREATE INDEX sweeps_spec_sha256 ON sweeps (spec_sha256);
