-- +goose Up
-- The rows an order writes about itself named it by a foreign key: its
-- lines, its stock reservations and its history. They are written in the
-- statement that writes the order, or under the lock of the order they
-- move, and orders are never deleted, so the keys checked nothing: they
-- cost a referential query and a KEY SHARE lock of the order for every
-- line, reservation and transition. A delete of an order is refused by a
-- trigger instead (db/functions/refuse_delete_order.sql).
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_order_id_fkey;
ALTER TABLE order_items DROP CONSTRAINT order_items_order_id_fkey;
ALTER TABLE stock_reservations DROP CONSTRAINT stock_reservations_order_id_fkey;

-- A transition's history row and a payment's notification are found by
-- their natural keys, never by their ids: those keys become the primary
-- keys, and the index of the ids, which only cost an insertion into it on
-- every transition and every notification, goes. (The ids stay, in their
-- columns.) The notification's key keeps its name, which instances of the
-- previous release check at start and in /readyz (db.RequiredUniqueIndexes).
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_pkey,
    DROP CONSTRAINT order_status_history_order_version_key,
    ADD CONSTRAINT order_status_history_pkey PRIMARY KEY (order_id, version);
ALTER TABLE payment_notifications DROP CONSTRAINT payment_notifications_pkey,
    DROP CONSTRAINT payment_notifications_channel_id_key,
    ADD CONSTRAINT payment_notifications_channel_id_key PRIMARY KEY (channel, notification_id);

-- +goose Down
ALTER TABLE payment_notifications DROP CONSTRAINT payment_notifications_channel_id_key,
    ADD CONSTRAINT payment_notifications_pkey PRIMARY KEY (id),
    ADD CONSTRAINT payment_notifications_channel_id_key UNIQUE (channel, notification_id);
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_pkey,
    ADD CONSTRAINT order_status_history_pkey PRIMARY KEY (id),
    ADD CONSTRAINT order_status_history_order_version_key UNIQUE (order_id, version);
ALTER TABLE stock_reservations ADD CONSTRAINT stock_reservations_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE order_items ADD CONSTRAINT order_items_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE order_status_history ADD CONSTRAINT order_status_history_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
