#!/usr/bin/env bash
# Set a dish's stock to an absolute number. VERSION is the version you read,
# so that a restock based on an old count cannot overwrite sales made since.
# usage: dish-stock.sh DISH_ID VERSION STOCK
source "$(dirname "$0")/_lib.sh"
[ $# -eq 3 ] || usage
is_int "$2" && is_int "$3" || usage
api PUT "/admin/v1/dishes/$1/stock" "$(json_obj "version=$2" "stock=$3")"
