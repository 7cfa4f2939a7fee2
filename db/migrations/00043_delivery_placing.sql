-- +goose Up
-- One placement of a delivery at a time. The place job and the late
-- sweep both place QUOTED deliveries; two tries at once could each read
-- that no earlier try was left unanswered (place_unsure), and one
-- take the other's refusal for the provider's word while the other's
-- placement was still on its way (the soak found an order delivered by
-- Dada that we had marked failed). A try holds the delivery until
-- placing_until, which outlasts its calls to the provider.
ALTER TABLE deliveries ADD COLUMN placing_until timestamptz;

-- +goose Down
ALTER TABLE deliveries DROP COLUMN placing_until;
