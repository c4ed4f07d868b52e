-- Where a sweep's source came from: the directory registered with the engine
-- (`registered`, every sweep stored before this column), a snapshot a submitter uploaded
-- (`uploaded`, with the submitting token's name), or a git commit the coordinator resolved
-- (`git`, with the repository and revision as given and the commit they resolved to).
-- The snapshot itself stays in `source_sha256`.
ALTER TABLE sweeps ADD COLUMN source_kind TEXT NOT NULL DEFAULT 'registered';
ALTER TABLE sweeps ADD COLUMN source_uploader TEXT;
ALTER TABLE sweeps ADD COLUMN source_git_url TEXT;
ALTER TABLE sweeps ADD COLUMN source_git_rev TEXT;
ALTER TABLE sweeps ADD COLUMN source_git_commit TEXT;
