-- +goose Up
-- Stock has one meaning for merchants: what is on hand. On hand is what is
-- still for sale (the shards of dish_stock) plus what open orders hold
-- (reservations neither released nor consumed). A sale moves units from
-- for-sale to held; a cancel moves them back; a dispatch consumes them
-- (they leave the kitchen). A restock sets or adjusts on hand, so a
-- release after a restock can never lift what is for sale past what the
-- merchant set minus what sold since.
ALTER TABLE stock_reservations ADD COLUMN consumed_at timestamptz;
UPDATE stock_reservations r SET consumed_at = now()
FROM orders o
WHERE o.id = r.order_id AND r.released_at IS NULL AND o.status IN ('DELIVERING', 'COMPLETED');

-- What a dish's open orders hold, read by every restock.
CREATE INDEX stock_reservations_held_idx ON stock_reservations (dish_id) INCLUDE (qty)
    WHERE released_at IS NULL AND consumed_at IS NULL;

-- Every change of a dish's on-hand stock, in the transaction that made it:
-- the audit trail for merchants, and the ledger that proves conservation
-- (the sum of a dish's deltas equals its for-sale units plus every
-- unreleased reservation, consumed or not).
CREATE TABLE stock_adjustments (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dish_id       bigint      NOT NULL REFERENCES dishes (id),
    kind          text        NOT NULL CHECK (kind IN ('opening', 'set', 'delta')),
    delta         integer     NOT NULL,
    on_hand_after integer     NOT NULL CHECK (on_hand_after >= 0),
    actor         text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stock_adjustments_dish_idx ON stock_adjustments (dish_id, id);

-- The ledger opens with what each dish has now.
INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor)
SELECT d.id, 'opening',
       (SELECT coalesce(sum(s.units), 0) FROM dish_stock s WHERE s.dish_id = d.id)
     + (SELECT coalesce(sum(r.qty), 0) FROM stock_reservations r WHERE r.dish_id = d.id AND r.released_at IS NULL),
       (SELECT coalesce(sum(s.units), 0) FROM dish_stock s WHERE s.dish_id = d.id)
     + (SELECT coalesce(sum(r.qty), 0) FROM stock_reservations r WHERE r.dish_id = d.id AND r.released_at IS NULL AND r.consumed_at IS NULL),
       'migration'
FROM dishes d;

-- +goose Down
DROP TABLE stock_adjustments;
DROP INDEX stock_reservations_held_idx;
ALTER TABLE stock_reservations DROP COLUMN consumed_at;
