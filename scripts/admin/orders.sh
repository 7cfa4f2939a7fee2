#!/usr/bin/env bash
# Search orders, newest first. Filters: status=, merchant_id=, user_id=,
# from= and to= (RFC 3339), cursor=, limit=.
# usage: orders.sh [status=PAID] [merchant_id=1] [from=2026-11-30T00:00:00Z] ...
source "$(dirname "$0")/_lib.sh"
query=""
for kv in "$@"; do
	[[ $kv == *=* ]] || usage
	query+="${query:+&}$kv"
done
api GET "/admin/v1/orders${query:+?$query}"
