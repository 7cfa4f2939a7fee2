-- json_time is t as Go's encoding/json writes a UTC time.Time: RFC 3339
-- with the fraction's trailing zeros cut, and none when it is zero.
-- Stable (to_char is), so that it is inlined into order_event_json's
-- expression rather than run as a function of its own.
CREATE OR REPLACE FUNCTION json_time(t timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || rtrim(rtrim(to_char(t AT TIME ZONE 'UTC', '.US'), '0'), '.') || 'Z';
