-- Bench signatures (see the Postgres twin, migrations/postgres/0024_bench_signatures.sql; from
-- here on both backends number a change alike).
ALTER TABLE build_records ADD COLUMN bench_nodes INTEGER;
ALTER TABLE build_records ADD COLUMN bench_mismatch TEXT;

CREATE INDEX build_records_binary ON build_records (binary_sha256);
