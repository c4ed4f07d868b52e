-- Unread since the check pick walks `jobs_check_ready` (see the Postgres twin, 0023).
DROP INDEX jobs_check_open;
