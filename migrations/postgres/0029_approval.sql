-- Approval over a budget (issue 51; the twin is migrations/sqlite/0029_approval.sql). A
-- sweep a coordinator holds for an admin's approval (`--approve-over-engine-hours`) has
-- `approval` 'pending' and its jobs but no cursor in `build_queue`, so no job of it is handed
-- out; approving it adds the cursors ('approved'), rejecting it cancels it ('rejected').
-- `approval_note` says why it was held, or why it was rejected. NULL for a sweep that never
-- needed approval.
ALTER TABLE sweeps ADD COLUMN approval TEXT;
ALTER TABLE sweeps ADD COLUMN approval_note TEXT;
CREATE INDEX sweeps_pending_approval ON sweeps (id) WHERE approval = 'pending';
