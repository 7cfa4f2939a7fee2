-- +goose Up
-- The one-statement placement (order_place) was installed here. Functions
-- live in db/functions, applied after the migrations; migration 00028
-- dropped this first version of it.

-- +goose Down
