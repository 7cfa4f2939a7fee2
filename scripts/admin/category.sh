#!/usr/bin/env bash
# A merchant's menu categories, shown by position, then id.
# usage: category.sh list MERCHANT_ID
#        category.sh create MERCHANT_ID NAME [POSITION]
#        category.sh update CATEGORY_ID VERSION [--name NAME] [--position N]
#        category.sh delete CATEGORY_ID VERSION    (its dishes stay, uncategorised)
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] || usage
case $1 in
list) api GET "/admin/v1/merchants/$2/categories" ;;
create)
	[ $# -ge 3 ] || usage
	pos=${4:-}
	[ -z "$pos" ] || is_int "$pos" || usage
	api POST "/admin/v1/merchants/$2/categories" "$(json_obj "name=$(json_str "$3")" "position=$pos")"
	;;
update)
	[ $# -ge 3 ] && is_int "$3" || usage
	id=$2 version=$3; shift 3
	name="" pos=""
	while [ $# -gt 0 ]; do
		case $1 in
		--name) name=$(json_str "$2"); shift 2 ;;
		--position) is_int "$2" || usage; pos=$2; shift 2 ;;
		*) usage ;;
		esac
	done
	api PATCH "/admin/v1/categories/$id" "$(json_obj "version=$version" "name=$name" "position=$pos")"
	;;
delete)
	[ $# -eq 3 ] && is_int "$3" || usage
	api DELETE "/admin/v1/categories/$2?version=$3"
	;;
*) usage ;;
esac
