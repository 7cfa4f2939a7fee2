-- +goose Up
-- The attempt a send may have put on paper, written before the provider
-- is called: a process that dies between the call and the write of its
-- outcome leaves attempt_out = attempt, and the next try of a provider
-- without an idempotency id goes out as the next attempt, marked 重打,
-- rather than a second unmarked paper.
ALTER TABLE print_jobs ADD COLUMN attempt_out integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE print_jobs DROP COLUMN attempt_out;
