#!/usr/bin/env bash
# A merchant's staff logins (for the order board at /board/).
# usage: staff.sh list MERCHANT_ID
#        staff.sh create MERCHANT_ID USERNAME     (reads the password from TAKEOUT_STAFF_PASSWORD, else asks)
#        staff.sh disable STAFF_ID                (no more logins; its tokens are revoked)
source "$(dirname "$0")/_lib.sh"
case "${1:-}" in
list)
	[ $# -eq 2 ] && is_int "$2" || usage
	api GET "/admin/v1/merchants/$2/staff" ;;
create)
	[ $# -eq 3 ] && is_int "$2" || usage
	password=${TAKEOUT_STAFF_PASSWORD:-}
	if [ -z "$password" ]; then
		read -rsp "password for $3 (10 characters or more): " password; echo >&2
	fi
	api POST "/admin/v1/merchants/$2/staff" "$(json_obj "username=$(json_str "$3")" "password=$(json_str "$password")")" ;;
disable)
	[ $# -eq 2 ] && is_int "$2" || usage
	api DELETE "/admin/v1/staff/$2" ;;
*) usage ;;
esac
