-- +goose Up
-- The lowest time field (Unix milliseconds) an id of the worker id may
-- still carry: past what its holders issued, or could have issued before
-- their lease ran out. A new holder starts above it, so a restart or a
-- handover onto a clock stepped back cannot reissue an id.
ALTER TABLE worker_leases ADD COLUMN floor_ms bigint NOT NULL DEFAULT 0;
UPDATE worker_leases SET floor_ms = (extract(epoch FROM expires_at) * 1000)::bigint + 1;

-- +goose Down
ALTER TABLE worker_leases DROP COLUMN floor_ms;
