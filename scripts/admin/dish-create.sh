#!/usr/bin/env bash
# Add a dish to a merchant's menu. Prices are in fen (1 yuan = 100 fen).
# usage: dish-create.sh MERCHANT_ID NAME PRICE_FEN STOCK [on|off]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 4 ] && [ $# -le 5 ] || usage
is_int "$3" && is_int "$4" || usage
on_sale=""
case ${5:-on} in on) on_sale=true ;; off) on_sale=false ;; *) usage ;; esac
api POST "/admin/v1/merchants/$1/dishes" "$(json_obj "name=$(json_str "$2")" "price_fen=$3" "stock=$4" "on_sale=$on_sale")"
