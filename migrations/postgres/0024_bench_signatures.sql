-- Bench signatures (issue 45): each worker runs the engine's own bench once per binary and
-- reports its node total with the build's record (migrations/sqlite/0024_bench_signatures.sql
-- is the twin; from here on both backends number a change alike).
--
-- `bench_nodes` is that total (NULL: the engine names no bench, or the record predates this).
-- Two workers reporting different totals for one binary cannot both be trusted: the later
-- record is kept, with `bench_mismatch` saying who reported what, and its worker's job of the
-- build goes to the other workers (a `build_failures` row keeps it from this one). The
-- table's row shows the build's bench, whether it equals the baseline's, and any mismatch.
ALTER TABLE build_records ADD COLUMN bench_nodes BIGINT;
ALTER TABLE build_records ADD COLUMN bench_mismatch TEXT;

-- The earlier bench of a binary in a sweep is looked up by sha256 on every record.
CREATE INDEX build_records_binary ON build_records (binary_sha256);
