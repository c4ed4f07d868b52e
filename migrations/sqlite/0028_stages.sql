-- Staged sweeps (see the Postgres twin, migrations/postgres/0028_stages.sql).
ALTER TABLE sweeps ADD COLUMN stages_left INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN stage_count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE sweeps ADD COLUMN stage_reached INTEGER NOT NULL DEFAULT 1;

ALTER TABLE builds ADD COLUMN position_count INTEGER NOT NULL DEFAULT 0;
UPDATE builds SET position_count = (
    SELECT s.position_count / (SELECT count(*) FROM builds b2 WHERE b2.sweep_id = s.id)
    FROM sweeps s WHERE s.id = builds.sweep_id);

CREATE TABLE sweep_stages (
    sweep_id    INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    stage       INTEGER NOT NULL,
    decision    TEXT NOT NULL,
    decided_at  INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, stage)
);
CREATE INDEX sweeps_with_stages_left ON sweeps (id) WHERE stages_left > 0;
