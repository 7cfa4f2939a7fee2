-- +goose Up
-- The one-statement payment (payment_succeed) was installed here.
-- Functions live in db/functions, applied after the migrations; its
-- successor is payment_settle, and migration 00028 dropped this one.

-- +goose Down
