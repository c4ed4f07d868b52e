-- Engine definitions added over the API (`PUT /api/v1/engines/{name}`, `sweep engine add`),
-- loaded at start beside the engines directory's files; a stored definition wins over a file
-- of the same name. `definition` is the TOML text as the admin sent it (validated on the way
-- in and again at every start, exactly like a file). Sweeps keep their own copy of the
-- definition they were submitted with (sweeps.engine_def), so updating a row here never
-- changes a sweep.
CREATE TABLE engines (
    name        TEXT PRIMARY KEY,
    definition  TEXT NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_by  TEXT NOT NULL
);
