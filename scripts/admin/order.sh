#!/usr/bin/env bash
# Move an order through its lifecycle (merchant staff: own merchant; admin: any).
# usage: order.sh accept|reject|ready|dispatch|pick-up|complete|refund ORDER_ID
source "$(dirname "$0")/_lib.sh"
[ $# -eq 2 ] || usage
case $1 in accept | reject | ready | dispatch | pick-up | complete | refund) ;; *) usage ;; esac
api POST "/admin/v1/orders/$2/$1"
