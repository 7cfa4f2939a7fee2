#!/usr/bin/env bash
# Update a merchant: name, status (open|closed), delivery fee, minimum
# order, location, distance bands, hours, closed dates, and the accept
# deadline (seconds the kitchen has to accept a paid order, 0 for none,
# and what happens then: accept, or reject with a full refund), and the
# ways of fulfilment (delivery, pickup, time slots; the whole object). VERSION is the
# version you read; a stale one is refused (409) so no change is lost.
#   --bands '[{"up_to_m":3000,"fee_fen":300},{"up_to_m":5000,"fee_fen":600}]'
#   --hours '[{"day":"mon","open":"10:00","close":"14:00"},{"day":"fri","open":"18:00","close":"02:00"}]'
#   --closed '["2026-12-25"]'
#   --fulfilment '{"delivery":true,"pickup":true,"scheduled":{"slot_minutes":30,"lead_minutes":45,
#                  "days_ahead":2,"capacity":20,"same_day_cutoff":"20:00","print_before_minutes":30}}'
# usage: merchant-update.sh MERCHANT_ID VERSION [--name NAME] [--status open|closed] [--fee FEN]
#        [--min-order FEN] [--location LAT,LNG] [--bands JSON] [--time-zone ZONE] [--hours JSON] [--closed JSON]
#        [--accept-within SECONDS] [--then accept|reject] [--fulfilment JSON]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] || usage
id=$1 version=$2; shift 2
is_int "$version" || usage
name="" status="" fee="" min="" location="" bands="" tz="" hours="" closed="" within="" then="" ways=""
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$(json_str "$2"); shift 2 ;;
	--status) status=$(json_str "$2"); shift 2 ;;
	--fee) is_int "$2" || usage; fee=$2; shift 2 ;;
	--min-order) is_int "$2" || usage; min=$2; shift 2 ;;
	--location) location="{\"lat\":${2%%,*},\"lng\":${2#*,}}"; shift 2 ;;
	--bands) bands=$2; shift 2 ;;
	--time-zone) tz=$(json_str "$2"); shift 2 ;;
	--hours) hours=$2; shift 2 ;;
	--closed) closed=$2; shift 2 ;;
	--accept-within) is_int "$2" || usage; within=$2; shift 2 ;;
	--then) then=$(json_str "$2"); shift 2 ;;
	--fulfilment) ways=$2; shift 2 ;;
	*) usage ;;
	esac
done
api PATCH "/admin/v1/merchants/$id" "$(json_obj "version=$version" "name=$name" "status=$status" "delivery_fee_fen=$fee" \
	"min_order_fen=$min" "location=$location" "delivery_bands=$bands" "time_zone=$tz" "hours=$hours" "closed_dates=$closed" \
	"accept_within_seconds=$within" "accept_timeout_action=$then" "fulfilment=$ways")"
