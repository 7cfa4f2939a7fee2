#!/usr/bin/env bash
# Show an idempotency record (state, fingerprint, times, stored status), or
# purge it everywhere (PostgreSQL, Redis, every instance's cache) with --purge.
# An order the key placed stays; admin only.
# usage: idempotency-key.sh USER_ID KEY [--purge]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] && [ $# -le 3 ] || usage
is_int "$1" || usage
key=$(printf '%s' "$2" | od -An -tx1 -v | tr -d ' \n' | sed 's/../%&/g')
case ${3:-} in
"") api GET "/admin/v1/idempotency-keys/$1/$key" ;;
--purge) api DELETE "/admin/v1/idempotency-keys/$1/$key" && echo "purged" ;;
*) usage ;;
esac
