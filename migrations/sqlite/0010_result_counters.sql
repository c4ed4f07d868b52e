-- The engine's search counters of each result (`info string counters k=v ...`), as JSON
-- text of an object name -> count; NULL when the engine printed none (see the Postgres twin).
ALTER TABLE results ADD COLUMN counters TEXT;
