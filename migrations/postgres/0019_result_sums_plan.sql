-- The statement of `result_sums_add()` (0017) looks up, per new result, the baseline's result
-- at its position, and per new baseline result the other builds' results there: lookups by
-- primary key. plpgsql plans it once per connection, with the statistics of that moment; on
-- a connection first used while `results` was nearly empty (a new database, the first
-- uploads of a benchmark) the plan was a sequential scan of `results` per new row, kept for
-- the connection's life: an upload of 8 results took 50-120 ms once `results` held a few
-- thousand rows, and grew with the table. Without sequential scans the plan is index probes
-- whatever the statistics said when it was made.
ALTER FUNCTION result_sums_add() SET enable_seqscan = off;
