-- +goose Up
-- Functions, triggers and views now live in db/functions, one file each,
-- applied after the migrations (db.Migrator): the body installed is the
-- one in that file. These overloads were kept beside their successors for
-- instances of an earlier release during a rolling deploy; no release
-- still running calls them.
DROP FUNCTION IF EXISTS order_place(bigint, bigint, bigint, bytea, bytea, integer, text, bigint, bigint, bigint,
    bigint, jsonb, text, timestamptz, timestamptz, bigint[], text[], integer[], bigint[], jsonb[], bigint[],
    bigint[], integer[], bigint[], bigint[], bigint[], smallint[], bigint, text, smallint, jsonb, text, bytea, text,
    integer, jsonb, bytea, timestamptz);
DROP FUNCTION IF EXISTS payment_succeed_grouped;
DROP FUNCTION IF EXISTS payment_succeed;

-- Which version of each file of db/functions is installed, so that a
-- start applies only what changed (CREATE OR REPLACE TRIGGER locks its
-- table; an unchanged file takes no lock at all).
CREATE TABLE live_code (
    file       text        PRIMARY KEY,
    sha256     bytea       NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
-- The dropped overloads are not restored: no release calls them.
DROP TABLE live_code;
