#!/usr/bin/env bash
# A merchant's cloud printers: list them, add one (a kitchen printer
# prints the dishes of the categories given, all when none; a receipt
# printer the whole order), or turn one off or on.
# usage: printer.sh list MERCHANT_ID
#        printer.sh add MERCHANT_ID NAME (yilianyun|feie) DEVICE (kitchen|receipt) [CATEGORY_ID ...]
#        printer.sh enable PRINTER_ID VERSION (true|false)
source "$(dirname "$0")/_lib.sh"
[ $# -ge 2 ] || usage
case $1 in
list) [ $# -eq 2 ] && is_int "$2" || usage; api GET "/admin/v1/merchants/$2/printers" ;;
add)
	[ $# -ge 6 ] && is_int "$2" || usage
	merchant=$2 name=$(json_str "$3") provider=$(json_str "$4") device=$(json_str "$5") role=$(json_str "$6"); shift 6
	cats=""
	for c in "$@"; do is_int "$c" || usage; cats+="${cats:+,}\"$c\""; done
	api POST "/admin/v1/merchants/$merchant/printers" "$(json_obj "name=$name" "provider=$provider" "device=$device" "role=$role" "category_ids=[$cats]")" ;;
enable)
	[ $# -eq 4 ] && is_int "$2" && is_int "$3" || usage
	case $4 in true | false) ;; *) usage ;; esac
	api PATCH "/admin/v1/printers/$2" "$(json_obj "version=$3" "enabled=$4")" ;;
*) usage ;;
esac
