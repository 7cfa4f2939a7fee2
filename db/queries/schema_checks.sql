-- name: ConstraintIndexStatus :many
-- The unique indexes behind the constraints that guard exactly-once, with
-- whether PostgreSQL considers them valid (an interrupted concurrent build
-- leaves an invalid index that enforces nothing).
SELECT c.relname::text AS index_name, i.indisvalid, i.indisunique
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname = ANY(@index_names::text[]);
