-- name: PrintJobsQueueForOrder :execrows
-- The tickets an accepted order owes its merchant's printers, written by
-- the transaction that accepts it: a receipt printer always, a kitchen
-- printer when the order has a dish of its categories (any, when it
-- names none). No printers: no rows, one index probe.
-- A scheduled order's tickets wait until its merchant's time before its
-- slot (fulfilment.scheduled.print_before_minutes), due print_within
-- after that.
INSERT INTO print_jobs (order_id, merchant_id, printer_id, trigger, seq, print_by, next_try_at)
SELECT @order_id, p.merchant_id, p.id, 'accept', 1, w.at + make_interval(secs => @print_within_seconds::double precision), w.at
FROM printers p,
     LATERAL (SELECT greatest(@now::timestamptz, (
                 SELECT o.slot_start - make_interval(mins => coalesce((m.fulfilment -> 'scheduled' ->> 'print_before_minutes')::integer, 0))
                 FROM orders o JOIN merchants m ON m.id = o.merchant_id
                 WHERE o.id = @order_id)) AS at) w
WHERE p.merchant_id = @merchant_id AND p.enabled
  AND (p.role = 'receipt' OR p.category_ids = '{}' OR EXISTS (
        SELECT 1 FROM order_items i JOIN dishes d ON d.id = i.dish_id
        WHERE i.order_id = @order_id AND d.category_id = ANY (p.category_ids)))
ON CONFLICT (order_id, printer_id, seq) DO NOTHING;

-- name: PrintJobsLeaseDue :many
-- Takes the tickets due to be sent or confirmed, pushing their next try
-- to the end of a lease so that the next sweep leaves them to the job
-- it queues; a job that dies leaves them due again when the lease ends.
WITH due AS (
    SELECT d.id FROM print_jobs d
    WHERE d.status IN ('queued', 'sent') AND d.next_try_at <= @now
    ORDER BY d.next_try_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
UPDATE print_jobs j SET next_try_at = @lease_until
FROM due WHERE j.id = due.id
RETURNING j.id;

-- name: PrintJobGet :one
SELECT sqlc.embed(j), sqlc.embed(p)
FROM print_jobs j JOIN printers p ON p.id = j.printer_id
WHERE j.id = @id;

-- name: PrintTicketOrder :one
-- What a ticket prints of its order and merchant.
SELECT o.id, o.created_at, o.items_total_fen, o.delivery_fee_fen, o.packaging_fee_fen, o.discount_fen, o.total_fen,
       o.remark, o.address, o.fulfilment, o.pickup_no, o.slot_start, o.slot_end, m.name AS merchant_name, m.time_zone
FROM orders o JOIN merchants m ON m.id = o.merchant_id
WHERE o.id = @id;

-- name: PrintTicketLines :many
SELECT i.line, i.name, i.qty, i.unit_price_fen, i.line_total_fen, i.options, d.category_id
FROM order_items i LEFT JOIN dishes d ON d.id = i.dish_id
WHERE i.order_id = @order_id
ORDER BY i.line;

-- name: PrintJobSending :execrows
-- Before the provider is called: the attempt about to go out (the next
-- one, when the last may have printed and its id is not safe again) and
-- the start of its provider's idempotency window. Nothing when another
-- try moved the ticket on.
UPDATE print_jobs
SET attempt = @next_attempt, attempt_out = @next_attempt, first_sent_at = coalesce(first_sent_at, @now), updated_at = @now
WHERE id = @id AND status = 'queued' AND attempt = @attempt;

-- name: PrintJobSent :execrows
-- The provider took the ticket of this attempt.
UPDATE print_jobs
SET status = 'sent', provider_ref = @provider_ref, tries = tries + 1, first_sent_at = coalesce(first_sent_at, @now),
    next_try_at = @next_try_at, last_error = '', updated_at = @now
WHERE id = @id AND status = 'queued' AND attempt = @attempt;

-- name: PrintJobRetry :execrows
-- A send that did not go through: try again at next_try_at, as attempt
-- next_attempt (one more when a paper may have come out). A send that
-- surely printed nothing takes back its attempt_out, so the same attempt
-- goes out again.
UPDATE print_jobs
SET tries = tries + 1, attempt = @next_attempt, next_try_at = @next_try_at, last_error = @last_error,
    attempt_out = CASE WHEN @maybe_sent::boolean THEN attempt_out ELSE attempt - 1 END,
    updated_at = @now
WHERE id = @id AND status = 'queued' AND attempt = @attempt;

-- name: PrintJobConfirmLater :execrows
-- A sent ticket not printed yet: ask again at next_try_at.
UPDATE print_jobs
SET tries = tries + 1, next_try_at = @next_try_at, last_error = @last_error, updated_at = @now
WHERE id = @id AND status = 'sent';

-- name: PrintJobFailed :execrows
UPDATE print_jobs
SET status = 'failed', last_error = @last_error, updated_at = @now
WHERE id = @id AND status IN ('queued', 'sent');

-- name: PrintJobPrinted :execrows
-- The provider says the ticket came out: from queued too, when its
-- callback overtakes the write of the send that printed it.
UPDATE print_jobs
SET status = 'printed', printed_at = @printed_at, provider_ref = coalesce(provider_ref, sqlc.narg(provider_ref)), updated_at = now()
WHERE id = @id AND status IN ('queued', 'sent');

-- name: PrintJobByRef :one
SELECT j.id
FROM print_jobs j JOIN printers p ON p.id = j.printer_id
WHERE p.provider = @provider AND p.device = @device AND j.provider_ref = @provider_ref;

-- name: PrintJobFind :one
-- A ticket by what its deterministic id names.
SELECT j.id FROM print_jobs j JOIN printers p ON p.id = j.printer_id
WHERE j.order_id = @order_id AND j.printer_id = @printer_id AND j.seq = @seq AND p.provider = @provider AND p.device = @device;

-- name: PrintJobLockFirst :one
-- Serializes reprints of one order's tickets on one printer.
SELECT id FROM print_jobs WHERE order_id = @order_id AND printer_id = @printer_id AND seq = 1 FOR UPDATE;

-- name: PrintJobReprint :one
INSERT INTO print_jobs (order_id, merchant_id, printer_id, trigger, seq, print_by, next_try_at, requested_by)
SELECT j.order_id, j.merchant_id, j.printer_id, 'reprint',
       (SELECT max(x.seq) + 1 FROM print_jobs x WHERE x.order_id = j.order_id AND x.printer_id = j.printer_id),
       @print_by, @now, @requested_by
FROM print_jobs j WHERE j.id = @id
RETURNING id;

-- name: PrintJobsList :many
-- Tickets newest first, of one merchant or all (0), by status: one of
-- the four, or 'late' (not printed by its print_by, and no later ticket
-- of its order on its printer printed: a reprint made it good), or ''
-- for any.
SELECT sqlc.embed(j), sqlc.embed(p)
FROM print_jobs j JOIN printers p ON p.id = j.printer_id
WHERE (@merchant_id::bigint = 0 OR j.merchant_id = @merchant_id)
  AND (@status::text = ''
       OR (@status = 'late' AND j.status <> 'printed' AND j.print_by < @now
           AND NOT EXISTS (SELECT 1 FROM print_jobs x WHERE x.order_id = j.order_id AND x.printer_id = j.printer_id
                                                       AND x.seq > j.seq AND x.status = 'printed'))
       OR j.status = @status)
  AND (@before_id::bigint = 0 OR j.id < @before_id)
ORDER BY j.id DESC
LIMIT @max_rows;

-- name: PrinterCreate :one
INSERT INTO printers (merchant_id, name, provider, device, role, category_ids)
VALUES (@merchant_id, @name, @provider, @device, @role, @category_ids)
RETURNING *;

-- name: PrintersOf :many
SELECT * FROM printers WHERE merchant_id = @merchant_id ORDER BY id;

-- name: PrinterGet :one
SELECT * FROM printers WHERE id = @id;

-- name: PrinterUpdate :one
UPDATE printers
SET name = @name, category_ids = @category_ids, enabled = @enabled, version = version + 1, updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: CategoriesOfMerchant :many
SELECT id FROM categories WHERE merchant_id = @merchant_id AND id = ANY (@ids::bigint[]);
