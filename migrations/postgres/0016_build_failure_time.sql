-- A build failure's time, taken when it is written (Postgres).
--
-- Recording a build failure is now written once for both stores, and leaves `created_at` to
-- the database on Postgres. It used to set it to clock_timestamp() itself: taken under the
-- build's row lock, that orders failures as they were counted, so the "last output" a failed
-- build shows is the latest one. The default now() would be the transaction's start, which
-- for a failure that waited on the lock is earlier than the one it waited for.
ALTER TABLE build_failures ALTER COLUMN created_at SET DEFAULT clock_timestamp();
