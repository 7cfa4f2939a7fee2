-- +goose Up
-- stock_reservations_unreleased_idx (order_id, where not released) repeats
-- what the primary key (order_id, dish_id) already finds: every reader of
-- an order's reservations (release, consume, a partial refund's give-back)
-- reads them by order id through the key, a handful of rows. The index
-- cost a placement one more entry per line and a release one more, for no
-- reader (docs/performance.md).
DROP INDEX stock_reservations_unreleased_idx;

-- +goose Down
CREATE INDEX stock_reservations_unreleased_idx ON stock_reservations (order_id) WHERE released_at IS NULL;
