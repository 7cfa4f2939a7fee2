#!/usr/bin/env bash
# Create a merchant (admin only).
# usage: merchant-create.sh NAME [DELIVERY_FEE_FEN] [open|closed]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 1 ] && [ $# -le 3 ] || usage
fee=${2:-}; status=${3:-}
[ -z "$fee" ] || is_int "$fee" || usage
api POST /admin/v1/merchants "$(json_obj "name=$(json_str "$1")" "delivery_fee_fen=$fee" "status=${status:+$(json_str "$status")}")"
