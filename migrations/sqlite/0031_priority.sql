-- Fair shares (see the Postgres twin, migrations/postgres/0031_priority.sql).
ALTER TABLE sweeps ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
