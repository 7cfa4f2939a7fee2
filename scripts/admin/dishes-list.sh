#!/usr/bin/env bash
# List a merchant's dishes with their current versions and stock (uncached).
# usage: dishes-list.sh MERCHANT_ID
source "$(dirname "$0")/_lib.sh"
[ $# -eq 1 ] || usage
api GET "/admin/v1/merchants/$1/dishes"
