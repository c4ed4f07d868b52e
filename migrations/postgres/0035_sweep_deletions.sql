-- Deleting a sweep (`sweep delete`, issue 50): results stay append-only (result_sums is kept
-- from inserts), except the results of a sweep being deleted, listed here by the transaction
-- that deletes it (and removed by it), which deletes their sums with them.
CREATE TABLE sweep_deletions (
    sweep_id  BIGINT PRIMARY KEY
);
DROP TRIGGER results_append_only ON results;
CREATE TRIGGER results_no_update BEFORE UPDATE ON results
    FOR EACH STATEMENT EXECUTE FUNCTION results_append_only();
CREATE FUNCTION results_delete_of_deleted_sweeps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM old_results o
               WHERE NOT EXISTS (SELECT 1 FROM sweep_deletions d WHERE d.sweep_id = o.sweep_id))
    THEN
        RAISE EXCEPTION 'results are append-only (result_sums is kept from inserts): DELETE refused (only a sweep being deleted loses its results)';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER results_no_delete AFTER DELETE ON results
    REFERENCING OLD TABLE AS old_results
    FOR EACH STATEMENT EXECUTE FUNCTION results_delete_of_deleted_sweeps();
