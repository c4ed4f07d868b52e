-- Binary-only engines (Postgres). A sweep of an engine without source (a prebuilt binary at
-- an absolute path on the workers) has no source snapshot, and its jobs go only to workers
-- that reported having that binary.

ALTER TABLE sweeps ALTER COLUMN source_sha256 DROP NOT NULL;

-- The binary-only engines each worker reported at registration (binary present and
-- executable there). Leasing gives a binary-only sweep's jobs only to these workers.
CREATE TABLE worker_engines (
    worker_id  BIGINT NOT NULL REFERENCES workers (id) ON DELETE CASCADE,
    engine     TEXT NOT NULL,
    PRIMARY KEY (worker_id, engine)
);
