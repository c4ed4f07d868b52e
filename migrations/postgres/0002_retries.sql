-- Retries (Postgres). A position whose search errors is tried again, on another worker when
-- there is one, and gets its final result (carrying the error) only after max_attempts
-- failures; a build failure fails its variant only once enough workers failed it.

-- One row per failed try of a position. The unique key makes a re-sent batch one try, not
-- two; id orders the tries.
CREATE TABLE position_failures (
    id              BIGSERIAL PRIMARY KEY,
    build_id        BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite_id        BIGINT NOT NULL REFERENCES suites (id),
    position_index  INTEGER NOT NULL,
    depth           INTEGER NOT NULL,
    position_id     TEXT NOT NULL,
    job_id          BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    worker_id       BIGINT NOT NULL REFERENCES workers (id),
    error           TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (job_id, attempt, position_index)
);
-- Counting a position's failures; the unique key above serves "did this worker fail this job".
CREATE INDEX position_failures_position
    ON position_failures (build_id, suite_id, position_index, depth);

-- One row per worker that failed to compile a build; leasing keeps the build from it.
CREATE TABLE build_failures (
    build_id    BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    worker_id   BIGINT NOT NULL REFERENCES workers (id),
    output      TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, worker_id)
);

-- Counting live workers (seen within a lease) when a build fails.
CREATE INDEX workers_last_seen ON workers (last_seen_at);
