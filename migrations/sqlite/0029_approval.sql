-- Approval over a budget (see the Postgres twin, migrations/postgres/0029_approval.sql).
ALTER TABLE sweeps ADD COLUMN approval TEXT;
ALTER TABLE sweeps ADD COLUMN approval_note TEXT;
CREATE INDEX sweeps_pending_approval ON sweeps (id) WHERE approval = 'pending';
