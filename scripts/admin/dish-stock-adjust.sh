#!/usr/bin/env bash
# Add units to what a dish has on hand (a delivery), or remove them with a
# negative DELTA (spoilage). Sent with an Idempotency-Key and retried with
# it, so a flaky link cannot count a delivery twice.
# usage: dish-stock-adjust.sh DISH_ID DELTA
source "$(dirname "$0")/_lib.sh"
[ $# -eq 2 ] || usage
is_int "$2" || usage
api POST "/admin/v1/dishes/$1/stock/adjustments" "$(json_obj "delta=$2")"
