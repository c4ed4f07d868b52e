-- Staged sweeps (issue 48; the twin is migrations/sqlite/0028_stages.sql).
--
-- A staged sweep stores the jobs of its first stage when it is submitted; each later stage's
-- jobs are added when the stage before has finished and its promotion is decided.
-- `stages_left` counts the stages still to add: a sweep whose jobs are all closed is not
-- finished while it is above 0. Decrementing it is the claim of the promotion, so several
-- coordinators on one database add a stage once. `stage_count` is the number of stages (1 for
-- a sweep without) and `stage_reached` the newest stage added (from 1), so a listing says
-- which stage a sweep is in without reading its spec.
ALTER TABLE sweeps ADD COLUMN stages_left INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN stage_count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE sweeps ADD COLUMN stage_reached INTEGER NOT NULL DEFAULT 1;

-- Positions each build is to search (over all its suites and limits): no longer the same for
-- every build of a sweep once later stages run only some of them. A sweep's work is done
-- when its builds that built have that many results. Older sweeps' builds all had an equal
-- share.
ALTER TABLE builds ADD COLUMN position_count BIGINT NOT NULL DEFAULT 0;
UPDATE builds b SET position_count = s.position_count / n.builds
FROM sweeps s, (SELECT sweep_id, count(*) AS builds FROM builds GROUP BY sweep_id) n
WHERE s.id = b.sweep_id AND n.sweep_id = b.sweep_id;

-- What each finished stage decided (its promotion: who was eligible, who was promoted and
-- why), one row per stage that has a later one; `stage` counts from 0.
CREATE TABLE sweep_stages (
    sweep_id    BIGINT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    stage       INTEGER NOT NULL,
    decision    JSONB NOT NULL,
    decided_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (sweep_id, stage)
);
CREATE INDEX sweeps_with_stages_left ON sweeps (id) WHERE stages_left > 0;
