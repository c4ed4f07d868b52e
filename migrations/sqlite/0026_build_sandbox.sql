-- The sandbox a worker built a variant and ran its engine in (see the Postgres twin,
-- migrations/postgres/0026_build_sandbox.sql).
ALTER TABLE build_records ADD COLUMN sandbox TEXT;
