-- A sweep's identity (sha256 of its canonical spec and source snapshot, see
-- `SweepSpec::identity`): an identical submission while such a sweep is still queued or
-- running returns that sweep instead of a second copy. Sweeps stored before this column have
-- none and are never matched. Whether a sweep still runs is derived from its jobs, so the
-- check cannot be a unique index: submissions of one identity are serialized by an advisory
-- lock instead, and this index finds the candidates.
ALTER TABLE sweeps ADD COLUMN spec_sha256 TEXT;
CREATE INDEX sweeps_spec_sha256 ON sweeps (spec_sha256);
