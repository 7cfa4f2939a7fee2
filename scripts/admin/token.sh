#!/usr/bin/env bash
# Mint a staff token (needs the API's TAKEOUT_* secrets in the environment;
# under make run they are in .dev/secrets.env).
# usage: token.sh admin|merchant:ID SUBJECT [TTL]
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -z "${TAKEOUT_STAFF_SECRET:-}" ] && [ -r "$root/.dev/secrets.env" ]; then
	# shellcheck disable=SC1091
	source "$root/.dev/secrets.env"
fi
cd "$root" && go run ./cmd/api token -role "$1" -subject "$2" -ttl "${3:-24h}"
