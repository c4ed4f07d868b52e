-- When a coordinator took on telling the operator's webhooks that a sweep ended (see the
-- Postgres twin, migrations/postgres/0027_sweep_notified.sql).
ALTER TABLE sweeps ADD COLUMN notified_at INTEGER;
UPDATE sweeps SET notified_at = created_at;
CREATE INDEX sweeps_to_notify ON sweeps (id) WHERE notified_at IS NULL;
