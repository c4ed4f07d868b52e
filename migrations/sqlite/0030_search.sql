-- Searches over a sweep's grid (see the Postgres twin, migrations/postgres/0030_search.sql).
ALTER TABLE sweeps ADD COLUMN search TEXT;
ALTER TABLE sweeps ADD COLUMN search_open BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sweeps ADD COLUMN search_step INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sweeps_with_search_open ON sweeps (id) WHERE search_open;
