-- A variant may build code of its own (`[[variants]]` with `rev` or `sha256`, issue 49): the
-- snapshot it builds, NULL for the sweep's source. Indexed for who may read a snapshot.
ALTER TABLE builds ADD COLUMN source_sha256 TEXT;
CREATE INDEX builds_source ON builds (source_sha256) WHERE source_sha256 IS NOT NULL;
