-- Tokens and roles, the audit log, and who submitted a sweep or registered a worker; the twin
-- of migrations/postgres/0006_tokens.sql (timestamps as unix milliseconds, as everywhere here).

CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'submitter', 'worker', 'reader')),
    hash        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    revoked_at  INTEGER
);
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    actor   TEXT NOT NULL,
    role    TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    detail  TEXT NOT NULL DEFAULT ''
);

ALTER TABLE sweeps ADD COLUMN submitter TEXT;
ALTER TABLE sweeps ADD COLUMN submitter_token INTEGER;
ALTER TABLE workers ADD COLUMN token_id INTEGER;
