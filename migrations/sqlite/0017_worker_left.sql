-- When a worker said it is stopping (see migrations/postgres/0021_worker_left.sql, the twin,
-- for why): set by its last heartbeat (`release`), cleared by any later mark as seen.
ALTER TABLE workers ADD COLUMN left_at INTEGER;
