-- When a worker said it is stopping (Postgres; migrations/sqlite/0017_worker_left.sql is the twin).
--
-- A worker that stops gracefully gives back its leases with one last heartbeat (`release`).
-- Until now it still counted as live for a whole lease after that (`last_seen_at` alone
-- decides), so a lone worker's cross-checks of its own results waited up to a lease for a
-- worker that was gone (e.g. a second `sweep run` on the same database within 30 s of the
-- first), the stalled-build judgement counted it, and worker listings showed it. `left_at`
-- is set by that release and cleared by any later mark of the worker as seen.
ALTER TABLE workers ADD COLUMN left_at TIMESTAMPTZ;
