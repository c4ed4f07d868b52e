-- How each worker got each build's binary (see the Postgres twin). `argv` is JSON text;
-- `reported_at` milliseconds since the epoch, like every time here.
CREATE TABLE build_records (
    build_id       INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    worker_id      INTEGER NOT NULL REFERENCES workers (id),
    host           TEXT NOT NULL,
    cpu_model      TEXT NOT NULL,
    compiler       TEXT,
    argv           TEXT NOT NULL,
    binary_sha256  TEXT NOT NULL,
    reported_at    INTEGER NOT NULL,
    PRIMARY KEY (build_id, worker_id)
);
