-- Fair shares (issue 51; the twin is migrations/sqlite/0031_priority.sql).
--
-- A sweep's priority (`low`, `normal`, `high`) weighs its share of the workers while other
-- sweeps have work too (coordinator/src/queue/shares.rs). Kept as a column, not only in the
-- spec, so a claim reads the weights of the sweeps with work without decoding their specs.
ALTER TABLE sweeps ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
