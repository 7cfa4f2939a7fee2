#!/usr/bin/env bash
# Change a dish's name, price (fen), sale status, category ("" for none),
# position, image (an https URL, "" for none) or packaging fee (fen per
# unit). VERSION is the version you read; a stale one is refused (409) so
# no change is lost.
# usage: dish-update.sh DISH_ID VERSION [--name NAME] [--price FEN] [--on-sale true|false]
#        [--category ID] [--position N] [--image URL] [--packaging FEN]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] || usage
id=$1 version=$2; shift 2
is_int "$version" || usage
name="" price="" on_sale="" category="" position="" image="" packaging=""
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$(json_str "$2"); shift 2 ;;
	--price) is_int "$2" || usage; price=$2; shift 2 ;;
	--on-sale) [[ $2 == true || $2 == false ]] || usage; on_sale=$2; shift 2 ;;
	--category) category=$(json_str "$2"); shift 2 ;;
	--position) is_int "$2" || usage; position=$2; shift 2 ;;
	--image) image=$(json_str "$2"); shift 2 ;;
	--packaging) is_int "$2" || usage; packaging=$2; shift 2 ;;
	*) usage ;;
	esac
done
api PATCH "/admin/v1/dishes/$id" "$(json_obj "version=$version" "name=$name" "price_fen=$price" "on_sale=$on_sale" \
	"category_id=$category" "position=$position" "image_url=$image" "packaging_fee_fen=$packaging")"
