-- Binary-only engines (SQLite), the twin of migrations/postgres/0004_binary_engines.sql (same
-- type mapping as 0001_initial.sql). A sweep of an engine without source (a prebuilt binary
-- at an absolute path on the workers) has no source snapshot, and its jobs go only to
-- workers that reported having that binary.
--
-- SQLite cannot drop NOT NULL in place, so sweeps is rebuilt (the documented create, copy,
-- drop, rename). The store runs migrations with foreign keys off, or dropping the old table
-- would cascade into every build, job and result, and checks the keys afterwards.

CREATE TABLE sweeps_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL,
    engine        TEXT NOT NULL,
    spec          TEXT NOT NULL,
    engine_def    TEXT NOT NULL,
    source_sha256 TEXT REFERENCES source_snapshots (sha256),
    cancelled     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);
INSERT INTO sweeps_new (id, name, engine, spec, engine_def, source_sha256, cancelled, created_at)
    SELECT id, name, engine, spec, engine_def, source_sha256, cancelled, created_at FROM sweeps;
-- Ids are never reused: keep the old counter even when the newest sweeps were deleted.
CREATE TEMP TABLE sweeps_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'sweeps';
DROP TABLE sweeps;
ALTER TABLE sweeps_new RENAME TO sweeps;
UPDATE sqlite_sequence
   SET seq = max(seq, coalesce((SELECT max(seq) FROM temp.sweeps_seq), 0))
 WHERE name = 'sweeps';
DROP TABLE temp.sweeps_seq;

-- The binary-only engines each worker reported at registration (binary present and
-- executable there). Leasing gives a binary-only sweep's jobs only to these workers.
CREATE TABLE worker_engines (
    worker_id  INTEGER NOT NULL REFERENCES workers (id) ON DELETE CASCADE,
    engine     TEXT NOT NULL,
    PRIMARY KEY (worker_id, engine)
);
