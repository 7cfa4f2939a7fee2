#!/usr/bin/env bash
# Update a merchant: name, status (open|closed) or delivery fee. VERSION is
# the version you read; a stale one is refused (409) so no change is lost.
# usage: merchant-update.sh MERCHANT_ID VERSION [--name NAME] [--status open|closed] [--fee FEN]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] || usage
id=$1 version=$2; shift 2
is_int "$version" || usage
name="" status="" fee=""
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$(json_str "$2"); shift 2 ;;
	--status) status=$(json_str "$2"); shift 2 ;;
	--fee) is_int "$2" || usage; fee=$2; shift 2 ;;
	*) usage ;;
	esac
done
api PATCH "/admin/v1/merchants/$id" "$(json_obj "version=$version" "name=$name" "status=$status" "delivery_fee_fen=$fee")"
