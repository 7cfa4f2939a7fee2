#!/usr/bin/env bash
# Show one dish, fresh from the database (version, stock, price).
# usage: dish-get.sh DISH_ID
source "$(dirname "$0")/_lib.sh"
[ $# -eq 1 ] || usage
api GET "/admin/v1/dishes/$1"
