#!/usr/bin/env bash
# Set a dish's whole option set from a JSON array of groups (a file, or -
# for standard input). VERSION is the dish's version you read. Groups and
# choices that keep an "id" keep it; left out ones are removed. Example:
#   [{"name":"Size","min_choices":1,"max_choices":1,"choices":[{"name":"Regular"},{"name":"Large","price_delta_fen":300}]},
#    {"name":"Extras","max_choices":2,"choices":[{"name":"Egg","price_delta_fen":150},{"name":"Tofu","available":false}]}]
# usage: dish-options.sh DISH_ID VERSION GROUPS.json|-
source "$(dirname "$0")/_lib.sh"
[ $# -eq 3 ] && is_int "$2" || usage
groups=$(cat "$3")
api PUT "/admin/v1/dishes/$1/options" "$(json_obj "version=$2" "groups=$groups")"
