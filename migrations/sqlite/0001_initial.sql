-- Sweep's schema (SQLite), the twin of migrations/postgres/0001_initial.sql. Never edit once
-- applied: add a new migration (to both backends).
--
-- Type mapping: JSONB -> TEXT holding JSON, BYTEA -> BLOB, BOOLEAN stays BOOLEAN (stored as
-- 0/1), TIMESTAMPTZ -> INTEGER unix milliseconds (UTC). Integer millis compare and add
-- cheaply, which lease expiry does on every lease. The store binds every timestamp itself so
-- that all of them come from one clock; the defaults only cover hand-written rows.
-- AUTOINCREMENT keeps ids strictly increasing like BIGSERIAL, so "job id order" and "newest
-- sweep first" never meet a reused id.

CREATE TABLE source_snapshots (
    sha256      TEXT PRIMARY KEY,
    archive     BLOB NOT NULL,
    created_at  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);

CREATE TABLE suites (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    positions   TEXT NOT NULL,
    size        INTEGER NOT NULL,
    created_at  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    UNIQUE (name, sha256)
);

CREATE TABLE sweeps (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL,
    engine        TEXT NOT NULL,
    spec          TEXT NOT NULL,
    engine_def    TEXT NOT NULL,
    source_sha256 TEXT NOT NULL REFERENCES source_snapshots (sha256),
    cancelled     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);

CREATE TABLE sweep_suites (
    sweep_id  INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    suite_id  INTEGER NOT NULL REFERENCES suites (id),
    ord       INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, suite_id)
);

CREATE TABLE builds (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep_id     INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    defines      TEXT NOT NULL,
    is_baseline  BOOLEAN NOT NULL,
    ord          INTEGER NOT NULL,
    build_error  TEXT,
    UNIQUE (sweep_id, name)
);

CREATE TABLE workers (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT NOT NULL,
    host           TEXT NOT NULL,
    cores          INTEGER NOT NULL,
    registered_at  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    last_seen_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);

-- One job per (build, suite, chunk). state: queued | leased | done | failed | cancelled.
-- attempt grows with every lease and fences reports from a worker that lost its lease.
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep_id          INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    build_id          INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id          INTEGER NOT NULL REFERENCES suites (id),
    first_index       INTEGER NOT NULL,
    count             INTEGER NOT NULL,
    state             TEXT NOT NULL DEFAULT 'queued',
    attempt           INTEGER NOT NULL DEFAULT 0,
    worker_id         INTEGER REFERENCES workers (id),
    lease_expires_at  INTEGER,
    updated_at        INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);
CREATE INDEX jobs_open ON jobs (id) WHERE state IN ('queued', 'leased');
CREATE INDEX jobs_sweep ON jobs (sweep_id, state);
-- SQLite does not index foreign keys by itself; build_failed closes jobs by build.
CREATE INDEX jobs_build ON jobs (build_id);

-- One row per (build, suite, position, depth): a duplicate report is ignored by the key.
CREATE TABLE results (
    build_id        INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id        INTEGER NOT NULL REFERENCES suites (id),
    position_index  INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    sweep_id        INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    job_id          INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL REFERENCES workers (id),
    position_id     TEXT NOT NULL,
    nodes           INTEGER NOT NULL,
    bestmove        TEXT NOT NULL,
    solved          BOOLEAN NOT NULL,
    score_cp        INTEGER,
    score_mate      INTEGER,
    reached_depth   INTEGER NOT NULL,
    time_ms         INTEGER NOT NULL,
    error           TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (build_id, suite_id, position_index, depth)
);
CREATE INDEX results_sweep ON results (sweep_id);
CREATE INDEX results_job ON results (job_id);
