-- Engine definitions added over the API; the twin of migrations/postgres/0009_engines.sql
-- (timestamps as unix milliseconds, as everywhere here).
CREATE TABLE engines (
    name        TEXT PRIMARY KEY,
    definition  TEXT NOT NULL,
    updated_at  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    updated_by  TEXT NOT NULL
);
