#!/usr/bin/env bash
# Promotions a merchant runs on its menu (its dates and hours in the merchant's time zone).
# usage: promotion.sh list MERCHANT_ID
#        promotion.sh get PROMOTION_ID
#        promotion.sh spend-save MERCHANT_ID NAME THRESHOLD:OFF[,THRESHOLD:OFF...] [options]   (满减 tiers, fen)
#        promotion.sh first-order MERCHANT_ID NAME OFF [--scope merchant|platform] [options]
#        promotion.sh free-delivery MERCHANT_ID NAME THRESHOLD [options]
#            options: --from YYYY-MM-DD --until YYYY-MM-DD --hours HH:MM-HH:MM --budget FEN
#                     --not-stackable --funded-by platform|merchant (default merchant; platform: admins only)
#        promotion.sh pause|resume PROMOTION_ID VERSION
#        promotion.sh add-budget PROMOTION_ID VERSION FEN
source "$(dirname "$0")/_lib.sh"

case "${1:-}" in
list)
	[ $# -eq 2 ] && is_int "$2" || usage
	api GET "/admin/v1/merchants/$2/promotions"; exit ;;
get)
	[ $# -eq 2 ] && is_int "$2" || usage
	api GET "/admin/v1/promotions/$2"; exit ;;
spend-save)
	[ $# -ge 4 ] && is_int "$2" || usage
	tiers=""
	IFS=, read -ra steps <<<"$4"
	for step in "${steps[@]}"; do
		[[ $step =~ ^([0-9]+):([0-9]+)$ ]] || usage
		tiers+="${tiers:+,}{\"threshold_fen\":${BASH_REMATCH[1]},\"off_fen\":${BASH_REMATCH[2]}}"
	done
	kind=spend_save merchant=$2 name=$3 tiers="[$tiers]"; shift 4 ;;
first-order)
	[ $# -ge 4 ] && is_int "$2" && is_int "$4" || usage
	kind=new_customer merchant=$2 name=$3 tiers="[{\"threshold_fen\":0,\"off_fen\":$4}]"; shift 4 ;;
free-delivery)
	[ $# -ge 4 ] && is_int "$2" && is_int "$4" || usage
	kind=free_delivery merchant=$2 name=$3 tiers="[{\"threshold_fen\":$4,\"off_fen\":0}]"; shift 4 ;;
pause|resume)
	[ $# -eq 3 ] && is_int "$2" && is_int "$3" || usage
	status=active; [ "$1" = pause ] && status=paused
	api PATCH "/admin/v1/promotions/$2" "$(json_obj "version=$3" "status=$(json_str "$status")")"; exit ;;
add-budget)
	[ $# -eq 4 ] && is_int "$2" && is_int "$3" && is_int "$4" || usage
	api PATCH "/admin/v1/promotions/$2" "$(json_obj "version=$3" "add_budget_fen=$4")"; exit ;;
*) usage ;;
esac

# A create: the kind's tiers above, then the options.
scope="" from="" until="" dfrom="" duntil="" budget="" stackable="" funded_by=merchant
[ "$kind" = new_customer ] && scope=merchant
while [ $# -gt 0 ]; do
	case $1 in
	--not-stackable) stackable=false; shift; continue ;;
	esac
	[ $# -ge 2 ] || usage
	case $1 in
	--scope) scope=$2 ;;
	--from) from=$(json_str "$2") ;;
	--until) until=$(json_str "$2") ;;
	--hours) [[ $2 =~ ^([0-9]{2}:[0-9]{2})-([0-9]{2}:[0-9]{2})$ ]] || usage
		dfrom=$(json_str "${BASH_REMATCH[1]}") duntil=$(json_str "${BASH_REMATCH[2]}") ;;
	--budget) is_int "$2" || usage; budget=$2 ;;
	--funded-by) funded_by=$2 ;;
	*) usage ;;
	esac
	shift 2
done
api POST "/admin/v1/merchants/$merchant/promotions" "$(json_obj "kind=$(json_str "$kind")" "name=$(json_str "$name")" \
	"tiers=$tiers" "new_customer_scope=${scope:+$(json_str "$scope")}" "funded_by=$(json_str "$funded_by")" \
	"starts_on=$from" "ends_on=$until" "daily_from=$dfrom" "daily_until=$duntil" "stackable=$stackable" "budget_fen=$budget")"
