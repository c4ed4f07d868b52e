-- Tokens and roles, the audit log, and who submitted a sweep or registered a worker.
-- A token's secret is never stored: `hash` is the hex sha256 of it (tokens are 256 random
-- bits, so a fast hash is enough). Names are unique among tokens not revoked.

CREATE TABLE tokens (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'submitter', 'worker', 'reader')),
    hash        TEXT NOT NULL UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at  TIMESTAMPTZ
);
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    id      BIGSERIAL PRIMARY KEY,
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor   TEXT NOT NULL,
    role    TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    detail  TEXT NOT NULL DEFAULT ''
);

-- No foreign keys: a revoked token keeps its row, and local runs use in-memory tokens
-- (negative ids) that never have one.
ALTER TABLE sweeps ADD COLUMN submitter TEXT, ADD COLUMN submitter_token BIGINT;
ALTER TABLE workers ADD COLUMN token_id BIGINT;
