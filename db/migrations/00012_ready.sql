-- +goose Up
-- READY: the food is prepared and waits for pickup (between ACCEPTED and
-- DELIVERING; a merchant may also dispatch straight from ACCEPTED).
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'READY', 'DELIVERING',
                      'COMPLETED', 'CANCELLED', 'REFUNDING', 'REFUNDED'));

-- +goose Down
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'DELIVERING',
                      'COMPLETED', 'CANCELLED', 'REFUNDING', 'REFUNDED'));
