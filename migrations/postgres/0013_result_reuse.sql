-- Result reuse (issue 10 item 3). A result is interchangeable with another when the same
-- build (source, defines, recipe, options, protocol: `BuildSpec::fingerprint`) searched the
-- same position to the same limit. A new sweep copies such results of earlier sweeps into its
-- own rows at submission instead of running them; the copies say where they came from.

-- The build's fingerprint; NULL for a binary-only engine (never reused) and for builds stored
-- before this migration (their results are simply not offered for reuse).
ALTER TABLE builds ADD COLUMN fingerprint TEXT;
-- Submission looks up the earlier builds of each new build's fingerprint.
CREATE INDEX builds_fingerprint ON builds (fingerprint) WHERE fingerprint IS NOT NULL;

-- The sweep that measured a copied result; NULL for a result this sweep's workers measured.
-- Only measured results are offered for reuse, so a copy is never copied again (the measured
-- original is found instead).
ALTER TABLE results ADD COLUMN origin_sweep_id BIGINT;
