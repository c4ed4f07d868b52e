-- The check pick walks `jobs_check_ready` since migration 0022, and no other statement reads
-- `jobs_check_open`; every change of a check's state still had to write it. (Postgres;
-- migrations/sqlite/0019_drop_check_open.sql is the twin.)
DROP INDEX jobs_check_open;
