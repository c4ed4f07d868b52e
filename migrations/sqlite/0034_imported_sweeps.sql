-- Sweeps that move between stores (issue 50): a sweep written from an export file keeps where
-- it came from (the original's id, the store it was exported from, when, by which Sweep), as
-- JSON text; NULL for a sweep submitted here.
ALTER TABLE sweeps ADD COLUMN imported_from TEXT;
