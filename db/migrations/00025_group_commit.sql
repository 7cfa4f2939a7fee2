-- +goose Up
-- Group commit's functions (order_place_grouped, payment_succeed_grouped)
-- were installed here. Functions live in db/functions, applied after the
-- migrations; migration 00028 dropped payment_succeed_grouped.

-- +goose Down
