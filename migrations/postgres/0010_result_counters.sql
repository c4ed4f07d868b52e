-- The engine's search counters of each result (`info string counters k=v ...`), as a JSON
-- object of name -> count; NULL when the engine printed none. Summed per build and suite in
-- the table of a finished sweep. JSONB rather than a row per counter: a result has a dozen
-- of them, and results are written at tens of thousands per second.
ALTER TABLE results ADD COLUMN counters JSONB;
