-- +goose Up
-- The daily bill: each day's trade and fund bills from WeChat Pay,
-- matched against payments, refunds and the ledger. One row per bill
-- date (Asia/Shanghai), the run that holds it locked; its anomalies are
-- what the last run found, replaced whole by the next run of the date.
CREATE TABLE reconciliations (
    bill_date   date        PRIMARY KEY,
    status      text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
    attempts    integer     NOT NULL DEFAULT 0,
    trade_hash  text        NOT NULL DEFAULT '',
    fund_hash   text        NOT NULL DEFAULT '',
    summary     jsonb       NOT NULL DEFAULT '{}',
    error       text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);

CREATE TABLE reconciliation_anomalies (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bill_date date        NOT NULL REFERENCES reconciliations (bill_date),
    kind      text        NOT NULL CHECK (kind IN ('missing_here', 'missing_there', 'amount', 'fee', 'status', 'ledger', 'fund')),
    ref       text        NOT NULL,
    detail    text        NOT NULL,
    bill_fen  bigint,
    ours_fen  bigint,
    found_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (bill_date, kind, ref)
);

-- +goose Down
DROP TABLE reconciliation_anomalies;
DROP TABLE reconciliations;
