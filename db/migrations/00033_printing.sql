-- +goose Up
-- Receipts on cloud printers. A merchant's printers are routed by role: a
-- kitchen printer prints the dishes of the categories it names (all of
-- them when it names none), a receipt printer the whole order for the
-- counter. A provider (Yilianyun-like with an idempotency id, Feie-like
-- without) knows a printer by its device code.
CREATE TABLE printers (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id  bigint      NOT NULL REFERENCES merchants (id),
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 60),
    provider     text        NOT NULL CHECK (provider IN ('yilianyun', 'feie')),
    device       text        NOT NULL CHECK (device ~ '^[A-Za-z0-9]{1,40}$'),
    role         text        NOT NULL CHECK (role IN ('kitchen', 'receipt')),
    category_ids bigint[]    NOT NULL DEFAULT '{}' CHECK (cardinality(category_ids) <= 100),
    enabled      boolean     NOT NULL DEFAULT true,
    version      bigint      NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT printers_receipt_categories_check CHECK (role = 'kitchen' OR category_ids = '{}'),
    UNIQUE (provider, device)
);
CREATE INDEX printers_merchant_idx ON printers (merchant_id) WHERE enabled;

-- One ticket a printer owes an order: inserted by the transaction that
-- accepts the order (the outbox: never after the commit), or by an
-- operator's reprint (seq 2, 3, ...). attempt counts the papers that may
-- have come out for it: a send whose outcome nobody can know (a timeout
-- at a provider without an idempotency id) makes the next one attempt
-- 2, printed as "reprint #2". The ticket is printed only when the
-- provider's callback or a query says so.
--   queued   waiting to be sent at next_try_at
--   sent     the provider took it (provider_ref); waiting for its print
--   printed  the provider says it came out (terminal)
--   failed   given up (terminal until an operator reprints)
CREATE TABLE print_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id     bigint      NOT NULL,
    merchant_id  bigint      NOT NULL,
    printer_id   bigint      NOT NULL REFERENCES printers (id),
    trigger      text        NOT NULL CHECK (trigger IN ('accept', 'reprint')),
    seq          integer     NOT NULL DEFAULT 1 CHECK (seq >= 1),
    attempt      integer     NOT NULL DEFAULT 1 CHECK (attempt BETWEEN 1 AND 99),
    status       text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'printed', 'failed')),
    tries        integer     NOT NULL DEFAULT 0,
    provider_ref text,
    last_error   text        NOT NULL DEFAULT '',
    next_try_at  timestamptz NOT NULL DEFAULT now(),
    first_sent_at timestamptz,
    printed_at   timestamptz,
    print_by     timestamptz NOT NULL,
    requested_by text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT print_jobs_trigger_seq_check CHECK ((trigger = 'accept') = (seq = 1)),
    UNIQUE (order_id, printer_id, seq)
);
-- The dispatcher's work: tickets to send or to confirm.
CREATE INDEX print_jobs_due_idx ON print_jobs (next_try_at) WHERE status IN ('queued', 'sent');
-- A Feie-like callback names only the provider's id.
CREATE UNIQUE INDEX print_jobs_provider_ref_idx ON print_jobs (printer_id, provider_ref) WHERE provider_ref IS NOT NULL;
-- GET /admin/v1/prints, by merchant and status.
CREATE INDEX print_jobs_merchant_idx ON print_jobs (merchant_id, status, id);

-- +goose Down
DROP TABLE print_jobs;
DROP TABLE printers;
