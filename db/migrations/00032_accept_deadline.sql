-- +goose Up
-- The accept deadline: a paid order the merchant does not accept in time
-- is accepted or rejected (and refunded) by the system, as the merchant
-- chose, instead of waiting forever.
--
-- A merchant says how long its kitchen has (0: no deadline) and what
-- happens then. Existing merchants get the platform's default, five
-- minutes and a reject with a full refund (Meituan's "not confirmed in
-- time"); it applies to orders paid from now on.
ALTER TABLE merchants
    ADD COLUMN accept_within_seconds integer NOT NULL DEFAULT 300
        CONSTRAINT merchants_accept_within_seconds_check
        CHECK (accept_within_seconds = 0 OR accept_within_seconds BETWEEN 10 AND 7200),
    ADD COLUMN accept_timeout_action text NOT NULL DEFAULT 'reject'
        CONSTRAINT merchants_accept_timeout_action_check
        CHECK (accept_timeout_action IN ('accept', 'reject'));

-- An order's deadline is written by the statement that makes it PAID
-- (payment_settle, or the transaction path's transition), from its
-- merchant's rule as it was then: the customer and the board are told
-- one deadline and one outcome, whatever the merchant changes later.
-- accept_deadline_applied records that the system, not the merchant,
-- moved the order on at its deadline. The columns are NULL (false) for
-- orders paid before this release and for merchants without a deadline.
ALTER TABLE orders
    ADD COLUMN accept_by timestamptz,
    ADD COLUMN accept_then text
        CONSTRAINT orders_accept_then_check CHECK (accept_then IN ('accept', 'reject')),
    ADD COLUMN accept_deadline_applied boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT orders_accept_deadline_check CHECK ((accept_by IS NULL) = (accept_then IS NULL));

-- The deadline's due row, inserted by the same statement (the job of the
-- deadline, in the transaction that makes the order PAID). The sweep
-- (order.accept_deadline_sweep) reads the rows that came due, applies
-- the rule to the orders still PAID, and deletes every row it read. The
-- orders' own columns carry no index: an index of orders naming a
-- column a transition changes (status, or accept_by, which the payment
-- sets) would make every such update write an entry in each of the
-- table's indexes instead of a heap-only update (migration 00024).
-- One index, by deadline, is all the sweep needs (it deletes the rows
-- it read by their key): the payment writes one index entry, not two.
-- No foreign key: the row lives only until its deadline is dealt with,
-- and checking one would cost every payment a lookup of its order.
CREATE TABLE order_accept_deadlines (
    accept_by timestamptz NOT NULL,
    order_id  bigint      NOT NULL,
    PRIMARY KEY (accept_by, order_id)
);

-- +goose Down
DROP TABLE order_accept_deadlines;
ALTER TABLE orders
    DROP CONSTRAINT orders_accept_deadline_check,
    DROP COLUMN accept_deadline_applied,
    DROP COLUMN accept_then,
    DROP COLUMN accept_by;
ALTER TABLE merchants
    DROP COLUMN accept_timeout_action,
    DROP COLUMN accept_within_seconds;
