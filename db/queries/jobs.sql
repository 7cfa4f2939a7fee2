-- name: PaymentTimeoutJobInsert :exec
-- Schedules the River job that cancels an order still unpaid at its
-- deadline. It is written to River's table directly, as River's
-- insert-only clients do, so that it rides in the placement's pipeline;
-- River's worker runs it like any other. It needs no uniqueness key: the
-- transaction that inserts an order is the only one that schedules its
-- job, and an order is inserted once. The args are PaymentTimeoutArgs's
-- JSON: the order id as a string; the metadata carries the placement's
-- traceparent when it is traced, as River's tracing middleware writes it.
INSERT INTO river_job (kind, args, max_attempts, priority, queue, state, scheduled_at, metadata)
VALUES ('order.payment_timeout', jsonb_build_object('order_id', sqlc.arg(order_id)::bigint::text), @max_attempts, 1, 'default', 'scheduled', @scheduled_at,
        sqlc.arg(metadata)::jsonb);
