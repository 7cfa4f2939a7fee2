-- +goose Up
-- The one-statement payment (payment_settle, payment_settle_grouped) and
-- the outbox body it renders (order_event_json, json_time) were installed
-- here. Functions live in db/functions, applied after the migrations.

-- +goose Down
