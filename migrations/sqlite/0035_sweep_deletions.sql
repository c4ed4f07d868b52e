-- Deleting a sweep (`sweep delete`, issue 50): results stay append-only (result_sums is kept
-- from inserts), except the results of a sweep being deleted, listed here by the transaction
-- that deletes it (and removed by it), which deletes their sums with them.
CREATE TABLE sweep_deletions (
    sweep_id  INTEGER PRIMARY KEY
);
DROP TRIGGER results_no_delete;
CREATE TRIGGER results_no_delete BEFORE DELETE ON results
WHEN NOT EXISTS (SELECT 1 FROM sweep_deletions d WHERE d.sweep_id = OLD.sweep_id)
BEGIN
    SELECT RAISE(ABORT, 'results are append-only (result_sums is kept from inserts): DELETE refused (only a sweep being deleted loses its results)');
END;
