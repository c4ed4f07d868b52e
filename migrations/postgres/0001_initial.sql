-- Sweep's schema (Postgres). Never edit once applied: add a new migration.

-- Engine source snapshots, content-addressed, so a running sweep never sees later edits.
CREATE TABLE source_snapshots (
    sha256      TEXT PRIMARY KEY,
    archive     BYTEA NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Every version of every suite, by content hash; sweeps point at the version they ran.
CREATE TABLE suites (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    positions   JSONB NOT NULL,
    size        INTEGER NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (name, sha256)
);

CREATE TABLE sweeps (
    id            BIGSERIAL PRIMARY KEY,
    name          TEXT NOT NULL,
    engine        TEXT NOT NULL,
    spec          JSONB NOT NULL,
    engine_def    JSONB NOT NULL,
    source_sha256 TEXT NOT NULL REFERENCES source_snapshots (sha256),
    cancelled     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE sweep_suites (
    sweep_id  BIGINT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    suite_id  BIGINT NOT NULL REFERENCES suites (id),
    ord       INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, suite_id)
);

CREATE TABLE builds (
    id           BIGSERIAL PRIMARY KEY,
    sweep_id     BIGINT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    defines      JSONB NOT NULL,
    is_baseline  BOOLEAN NOT NULL,
    ord          INTEGER NOT NULL,
    build_error  TEXT,
    UNIQUE (sweep_id, name)
);

CREATE TABLE workers (
    id             BIGSERIAL PRIMARY KEY,
    name           TEXT NOT NULL,
    host           TEXT NOT NULL,
    cores          INTEGER NOT NULL,
    registered_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One job per (build, suite, chunk). state: queued | leased | done | failed | cancelled.
-- attempt grows with every lease and fences reports from a worker that lost its lease.
CREATE TABLE jobs (
    id                BIGSERIAL PRIMARY KEY,
    sweep_id          BIGINT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    build_id          BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id          BIGINT NOT NULL REFERENCES suites (id),
    first_index       INTEGER NOT NULL,
    count             INTEGER NOT NULL,
    state             TEXT NOT NULL DEFAULT 'queued',
    attempt           INTEGER NOT NULL DEFAULT 0,
    worker_id         BIGINT REFERENCES workers (id),
    lease_expires_at  TIMESTAMPTZ,
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX jobs_open ON jobs (id) WHERE state IN ('queued', 'leased');
CREATE INDEX jobs_sweep ON jobs (sweep_id, state);

-- One row per (build, suite, position, depth): a duplicate report is ignored by the key.
CREATE TABLE results (
    build_id        BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id        BIGINT NOT NULL REFERENCES suites (id),
    position_index  INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    sweep_id        BIGINT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    job_id          BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    worker_id       BIGINT NOT NULL REFERENCES workers (id),
    position_id     TEXT NOT NULL,
    nodes           BIGINT NOT NULL,
    bestmove        TEXT NOT NULL,
    solved          BOOLEAN NOT NULL,
    score_cp        INTEGER,
    score_mate      INTEGER,
    reached_depth   INTEGER NOT NULL,
    time_ms         BIGINT NOT NULL,
    error           TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, suite_id, position_index, depth)
);
CREATE INDEX results_sweep ON results (sweep_id);
CREATE INDEX results_job ON results (job_id);
