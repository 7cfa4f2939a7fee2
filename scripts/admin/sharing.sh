#!/usr/bin/env bash
# The service-provider mode's profit sharing (admin): onboard a merchant
# as a WeChat Pay sub-merchant, list requests (FAILED by default, or of a
# status, or all of an order's), or try a FAILED one again.
# usage: sharing.sh onboard MERCHANT_ID SUB_MCHID [SUB_APPID]
#        sharing.sh list [PENDING|PROCESSING|SUCCESS|FAILED|SUPERSEDED|all] [ORDER_ID]
#        sharing.sh retry OUT_NO
source "$(dirname "$0")/_lib.sh"
[ $# -ge 1 ] || usage
case $1 in
onboard)
	[ $# -ge 3 ] && [ $# -le 4 ] && is_int "$2" && is_int "$3" || usage
	body=$(json_obj "sub_mchid=$(json_str "$3")")
	[ $# -eq 4 ] && body=$(json_obj "sub_mchid=$(json_str "$3")" "sub_appid=$(json_str "$4")")
	api PUT "/admin/v1/merchants/$2/sub-merchant" "$body" ;;
list)
	[ $# -le 3 ] || usage
	query="status=${2:-FAILED}"
	if [ $# -eq 3 ]; then is_int "$3" || usage; query+="&order_id=$3"; fi
	api GET "/admin/v1/profit-sharing?$query" ;;
retry)
	[ $# -eq 2 ] && [[ $2 =~ ^[A-Za-z0-9_|*@-]+$ ]] || usage
	api POST "/admin/v1/profit-sharing/$2/retry" ;;
*) usage ;;
esac
