#!/usr/bin/env bash
# Print tickets, newest first: all, or those with a status (queued, sent,
# printed, failed, or late: not printed by their deadline); reprint one
# (its paper says 补打 #n; retried with one Idempotency-Key, so it prints
# once however often it is sent).
# usage: prints.sh list [STATUS] [MERCHANT_ID]
#        prints.sh reprint TICKET_ID
source "$(dirname "$0")/_lib.sh"
[ $# -ge 1 ] || usage
case $1 in
list)
	[ $# -le 3 ] || usage
	q=""
	[ -z "${2:-}" ] || q+="status=$2"
	[ -z "${3:-}" ] || { is_int "$3" || usage; q+="${q:+&}merchant_id=$3"; }
	api GET "/admin/v1/prints${q:+?$q}" ;;
reprint) [ $# -eq 2 ] && is_int "$2" || usage; api POST "/admin/v1/prints/$2/reprint" ;;
*) usage ;;
esac
