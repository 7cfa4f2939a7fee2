#!/usr/bin/env bash
# Voucher templates: what customers claim into their wallets.
# usage: voucher.sh list [MERCHANT_ID]            (without one: the platform's templates; admins only)
#        voucher.sh get TEMPLATE_ID
#        voucher.sh create NAME AMOUNT_FEN BUDGET [--merchant ID] [--threshold FEN] [--funded-by platform|merchant]
#                          [--from RFC3339] [--until RFC3339] [--valid-days N] [--per-user N]
#            defaults: no merchant (a platform voucher, funded by the platform), no threshold,
#            claimable from now for 30 days, valid 7 days after a claim, one per customer
#        voucher.sh pause|resume TEMPLATE_ID VERSION
#        voucher.sh extend TEMPLATE_ID VERSION UNTIL        (the claim window's new end, RFC 3339)
#        voucher.sh add-budget TEMPLATE_ID VERSION N
source "$(dirname "$0")/_lib.sh"
case "${1:-}" in
list)
	case $# in
	1) api GET "/admin/v1/voucher-templates" ;;
	2) is_int "$2" || usage; api GET "/admin/v1/voucher-templates?merchant_id=$2" ;;
	*) usage ;;
	esac ;;
get)
	[ $# -eq 2 ] && is_int "$2" || usage
	api GET "/admin/v1/voucher-templates/$2" ;;
create)
	[ $# -ge 4 ] && is_int "$3" && is_int "$4" || usage
	name=$2 amount=$3 budget=$4; shift 4
	merchant="" threshold=0 funded_by=platform valid_days=7 per_user=1
	from=$(date -u +%Y-%m-%dT%H:%M:%SZ) until=$(date -u -d '+30 days' +%Y-%m-%dT%H:%M:%SZ)
	while [ $# -gt 0 ]; do
		[ $# -ge 2 ] || usage
		case $1 in
		--merchant) is_int "$2" || usage; merchant=$(json_str "$2"); funded_by=merchant ;;
		--threshold) is_int "$2" || usage; threshold=$2 ;;
		--funded-by) funded_by=$2 ;;
		--from) from=$2 ;;
		--until) until=$2 ;;
		--valid-days) is_int "$2" || usage; valid_days=$2 ;;
		--per-user) is_int "$2" || usage; per_user=$2 ;;
		*) usage ;;
		esac
		shift 2
	done
	api POST "/admin/v1/voucher-templates" "$(json_obj "merchant_id=$merchant" "name=$(json_str "$name")" "amount_fen=$amount" \
		"threshold_fen=$threshold" "funded_by=$(json_str "$funded_by")" "claim_from=$(json_str "$from")" "claim_until=$(json_str "$until")" \
		"valid_days=$valid_days" "budget=$budget" "per_user_limit=$per_user")" ;;
pause|resume)
	[ $# -eq 3 ] && is_int "$2" && is_int "$3" || usage
	status=active; [ "$1" = pause ] && status=paused
	api PATCH "/admin/v1/voucher-templates/$2" "$(json_obj "version=$3" "status=$(json_str "$status")")" ;;
extend)
	[ $# -eq 4 ] && is_int "$2" && is_int "$3" || usage
	api PATCH "/admin/v1/voucher-templates/$2" "$(json_obj "version=$3" "claim_until=$(json_str "$4")")" ;;
add-budget)
	[ $# -eq 4 ] && is_int "$2" && is_int "$3" && is_int "$4" || usage
	api PATCH "/admin/v1/voucher-templates/$2" "$(json_obj "version=$3" "add_budget=$4")" ;;
*) usage ;;
esac
