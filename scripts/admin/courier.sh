#!/usr/bin/env bash
# Courier providers: when a merchant's delivery orders go to a courier
# (off, on accept, when ready), and the deliveries (one row per
# placement; `failed`: the orders the couriers gave up on).
# usage: courier.sh dispatch MERCHANT_ID off|accept|ready
#        courier.sh list [MERCHANT_ID] [active|failed|STATUS]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 1 ] || usage
case $1 in
dispatch)
	[ $# -eq 3 ] && is_int "$2" && [[ $3 =~ ^(off|accept|ready)$ ]] || usage
	api PUT "/admin/v1/merchants/$2/courier" "$(json_obj "dispatch=$(json_str "$3")")" ;;
list)
	[ $# -le 3 ] || usage
	query=""
	if [ $# -ge 2 ]; then is_int "$2" || usage; query="merchant_id=$2"; fi
	case ${3:-} in
	"") ;;
	active) query+="&active=true" ;;
	failed) query+="&final=true" ;;
	QUOTED|PLACED|ASSIGNED|ARRIVED|PICKED_UP|DELIVERED|CANCELLED|FAILED) query+="&status=$3" ;;
	*) usage ;;
	esac
	api GET "/admin/v1/deliveries?${query#&}" ;;
*) usage ;;
esac
