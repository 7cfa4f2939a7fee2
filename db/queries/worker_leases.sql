-- name: WorkerLeaseAcquire :one
-- Takes the lowest worker id that is free or whose lease has expired. The
-- advisory lock serialises instances starting at the same moment.
WITH lock AS (SELECT pg_advisory_xact_lock(7461002)),
free AS (
    SELECT g.id FROM generate_series(0, 1023) AS g (id), lock
    WHERE NOT EXISTS (SELECT 1 FROM worker_leases l WHERE l.worker_id = g.id AND l.expires_at > now())
    ORDER BY g.id LIMIT 1
)
INSERT INTO worker_leases (worker_id, holder, expires_at)
SELECT id, @holder, now() + make_interval(secs => @ttl_seconds::double precision) FROM free
ON CONFLICT (worker_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
RETURNING worker_id, expires_at;

-- name: WorkerLeaseRenew :one
-- Extends the lease only while this holder still has it.
UPDATE worker_leases SET expires_at = now() + make_interval(secs => @ttl_seconds::double precision)
WHERE worker_id = @worker_id AND holder = @holder AND expires_at > now()
RETURNING expires_at;

-- name: WorkerLeaseRelease :exec
DELETE FROM worker_leases WHERE worker_id = @worker_id AND holder = @holder;
