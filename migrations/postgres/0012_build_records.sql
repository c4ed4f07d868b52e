-- How each worker got each build's binary (issue 10 item 7): host, CPU, compiler, the build
-- command and the binary's sha256, reported once per (build, worker) under a lease the worker
-- holds. Several workers of one build should agree on the binary; when they do not, the
-- table's numbers may come from different binaries, and the sweep's detail shows it.
CREATE TABLE build_records (
    build_id       BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    worker_id      BIGINT NOT NULL REFERENCES workers (id),
    host           TEXT NOT NULL,
    cpu_model      TEXT NOT NULL,
    compiler       TEXT,
    argv           JSONB NOT NULL,
    binary_sha256  TEXT NOT NULL,
    reported_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, worker_id)
);
