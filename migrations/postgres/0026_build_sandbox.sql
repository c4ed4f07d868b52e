-- The sandbox a worker built a variant and ran its engine in (issue 46; the twin is
-- migrations/sqlite/0026_build_sandbox.sql): `bwrap 0.8.0`, `off` for a worker started with
-- `--sandbox off`, NULL for records of workers older than sandboxes. Shown with the build's
-- records, so a reviewer sees which numbers came from unconfined runs.
ALTER TABLE build_records ADD COLUMN sandbox TEXT;
