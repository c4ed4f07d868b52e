-- Searches over a sweep's grid (issue 48; the twin is migrations/sqlite/0030_search.sql).
--
-- A sweep with a `[search]` has every cell of its grid as a build, but only the cells the
-- search asks for get jobs: the first at submission, the others when the cells before have
-- all finished and the coordinator replays the search over their standings
-- (domain/src/table/search.rs). `search` is where the search stands (its path, the cells
-- given jobs, its choice once it has ended), NULL for a sweep without a search.
-- `search_open` holds the sweep open while the search has not ended, as `stages_left` does
-- for stages. `search_step` counts the cells given jobs: adding the next cells moves it on,
-- and is the claim, so several coordinators on one database add each step once.
ALTER TABLE sweeps ADD COLUMN search JSONB;
ALTER TABLE sweeps ADD COLUMN search_open BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sweeps ADD COLUMN search_step INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sweeps_with_search_open ON sweeps (id) WHERE search_open;
