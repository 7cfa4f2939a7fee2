#!/usr/bin/env bash
# Set what a dish has on hand: the units in the kitchen, those held by open
# orders included (a cancel after this returns units into a figure that
# already counted them). With IF_ON_HAND, only if on hand is still the
# figure you read (else 409 stock-changed with the current one).
# usage: dish-stock.sh DISH_ID ON_HAND [IF_ON_HAND]
source "$(dirname "$0")/_lib.sh"
[ $# -eq 2 ] || [ $# -eq 3 ] || usage
is_int "$2" && { [ $# -eq 2 ] || is_int "$3"; } || usage
api PUT "/admin/v1/dishes/$1/stock" "$(json_obj "on_hand=$2" "if_on_hand=${3:-}")"
