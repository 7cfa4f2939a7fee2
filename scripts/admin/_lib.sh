# Shared by the admin scripts: where the API is, which token to send, and
# a curl wrapper that prints the answer and fails on a problem.
#   TAKEOUT_API          base URL (default http://127.0.0.1:8080)
#   TAKEOUT_ADMIN_TOKEN  staff token (default: the one make run wrote to .dev/admin.token)
set -euo pipefail

TAKEOUT_API=${TAKEOUT_API:-http://127.0.0.1:8080}
if [ -z "${TAKEOUT_ADMIN_TOKEN:-}" ]; then
	token_file="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.dev/admin.token"
	[ -r "$token_file" ] || { echo "set TAKEOUT_ADMIN_TOKEN (mint one with: bin/api token -role admin -subject you)" >&2; exit 2; }
	TAKEOUT_ADMIN_TOKEN=$(cat "$token_file")
fi

# json_str quotes a shell string as a JSON string.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\r'/\\r}
	s=${s//$'\t'/\\t}
	printf '"%s"' "$s"
}

# json_obj builds an object from key=raw-json pairs, skipping empty values.
json_obj() {
	local out="" kv k v
	for kv in "$@"; do
		k=${kv%%=*} v=${kv#*=}
		[ -n "$v" ] || continue
		out+="${out:+,}\"$k\":$v"
	done
	printf '{%s}' "$out"
}

# api METHOD PATH [BODY]: prints the response body; exits 1 on HTTP >= 400.
# A POST carries an Idempotency-Key (TAKEOUT_IDEMPOTENCY_KEY, else a new
# one) and is retried on a timeout or a 5xx with the same key: the change
# happens once however often it is sent.
api() {
	local method=$1 path=$2 body=${3:-} out status
	out=$(mktemp)
	trap 'rm -f "$out"' RETURN
	local args=(-sS -o "$out" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $TAKEOUT_ADMIN_TOKEN")
	if [ "$method" = POST ]; then
		local key=${TAKEOUT_IDEMPOTENCY_KEY:-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s%N)}
		args+=(-H "Idempotency-Key: $key" --retry 3)
	fi
	[ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
	status=$(curl "${args[@]}" "$TAKEOUT_API$path")
	cat "$out"
	[ -s "$out" ] && [ -n "$(tail -c1 "$out")" ] && echo
	if [ "$status" -ge 400 ]; then
		echo "HTTP $status" >&2
		return 1
	fi
}

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# is_int checks a whole number argument.
is_int() { [[ $1 =~ ^-?[0-9]+$ ]]; }
