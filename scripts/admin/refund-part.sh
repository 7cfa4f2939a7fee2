#!/usr/bin/env bash
# Refund part of a paid order: units of its lines (LINE:QTY, the line
# numbers of GET order) or an amount in fen, with a reason the customer
# sees; --restock puts the lines' units back on sale (before dispatch).
# Never more than is left to refund; retried with one Idempotency-Key.
# usage: refund-part.sh ORDER_ID REASON (--amount FEN | --line LINE:QTY ...) [--restock]
source "$(dirname "$0")/_lib.sh"
[ $# -ge 3 ] || usage
id=$1 reason=$(json_str "$2"); shift 2
amount="" lines="" restock=""
while [ $# -gt 0 ]; do
	case $1 in
	--amount) is_int "$2" || usage; amount=$2; shift 2 ;;
	--line)
		l=${2%%:*} q=${2#*:}
		is_int "$l" && is_int "$q" || usage
		lines+="${lines:+,}{\"line\":$l,\"qty\":$q}"; shift 2 ;;
	--restock) restock=true; shift ;;
	*) usage ;;
	esac
done
[ -z "$lines" ] || lines="[$lines]"
api POST "/admin/v1/orders/$id/refunds" "$(json_obj "reason=$reason" "amount_fen=$amount" "lines=$lines" "restock=$restock")"
