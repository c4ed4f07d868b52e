-- When a coordinator took on telling the operator's webhooks that a sweep ended (issue 49;
-- the twin is migrations/sqlite/0027_sweep_notified.sql). NULL while the sweep has not been
-- announced: the coordinators look for ended sweeps among those only, and the first to set it
-- sends the events, so several coordinators on one database announce a sweep once. Sweeps
-- older than webhooks are marked as announced, so a coordinator's first start after this
-- migration does not announce the whole history.
ALTER TABLE sweeps ADD COLUMN notified_at TIMESTAMPTZ;
UPDATE sweeps SET notified_at = created_at;
CREATE INDEX sweeps_to_notify ON sweeps (id) WHERE notified_at IS NULL;
