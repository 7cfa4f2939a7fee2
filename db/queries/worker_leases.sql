-- name: WorkerLeaseAcquire :one
-- Takes the lowest worker id that is free or whose lease has expired, and
-- returns the floor its ids must stay at or above. The floor is raised at
-- once to the end of the new lease, by the clock of the database and by
-- that of the holder (local_end_ms): this holder may issue ids until then,
-- and its clock may run ahead. The advisory lock serialises instances starting at the same
-- moment.
WITH lock AS (SELECT pg_advisory_xact_lock(7461002)),
free AS (
    SELECT g.id FROM generate_series(0, 1023) AS g (id), lock
    WHERE NOT EXISTS (SELECT 1 FROM worker_leases l WHERE l.worker_id = g.id AND l.expires_at > now())
    ORDER BY g.id LIMIT 1
),
prev AS (
    SELECT coalesce((SELECT l.floor_ms FROM worker_leases l, free WHERE l.worker_id = free.id), 0)::bigint AS floor_ms
),
lease AS (
    INSERT INTO worker_leases (worker_id, holder, expires_at, floor_ms)
    SELECT id, @holder, now() + make_interval(secs => @ttl_seconds::double precision),
           greatest((extract(epoch FROM now() + make_interval(secs => @ttl_seconds::double precision)) * 1000)::bigint, sqlc.arg(local_end_ms)::bigint) + 1
    FROM free
    ON CONFLICT (worker_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
        floor_ms = greatest(worker_leases.floor_ms, excluded.floor_ms)
    RETURNING worker_id, expires_at
)
SELECT lease.worker_id, lease.expires_at, prev.floor_ms FROM lease, prev;

-- name: WorkerLeaseRenew :one
-- Extends the lease only while this holder still has it, and the floor
-- with it (by either clock, as at acquire).
UPDATE worker_leases SET expires_at = now() + make_interval(secs => @ttl_seconds::double precision),
    floor_ms = greatest(floor_ms, (extract(epoch FROM now() + make_interval(secs => @ttl_seconds::double precision)) * 1000)::bigint + 1, sqlc.arg(local_end_ms)::bigint + 1)
WHERE worker_id = @worker_id AND holder = @holder AND expires_at > now()
RETURNING expires_at;

-- name: WorkerLeaseRelease :exec
-- Frees the worker id at a graceful stop, keeping the floor at just past
-- the last id issued (lower than the lease's end, which it may be: this
-- holder knows it issued nothing beyond).
UPDATE worker_leases SET holder = '', expires_at = now(), floor_ms = @floor_ms
WHERE worker_id = @worker_id AND holder = @holder;
