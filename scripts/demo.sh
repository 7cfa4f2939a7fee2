#!/usr/bin/env bash
# The whole demo flow against `make run`: log in through wxsim, read the
# menu, confirm and submit an order, pay it through wxsim's simulated
# WeChat Pay, and let the merchant accept, dispatch and complete it.
#   TAKEOUT_API (default http://127.0.0.1:8080), TAKEOUT_WXSIM (default http://127.0.0.1:8090)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
API=${TAKEOUT_API:-http://127.0.0.1:8080}
SIM=${TAKEOUT_WXSIM:-http://127.0.0.1:8090}
ADMIN=${TAKEOUT_ADMIN_TOKEN:-$(cat "$root/.dev/admin.token")}

field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" | head -1; }
step() { printf '\n== %s\n' "$*"; }
call() { # METHOD PATH TOKEN [BODY] [EXTRA-HEADER]
	local args=(-sS -f -X "$1" "$API$2")
	[ -z "$3" ] || args+=(-H "Authorization: Bearer $3")
	[ -z "${4:-}" ] || args+=(-H 'Content-Type: application/json' --data-binary "$4")
	[ -z "${5:-}" ] || args+=(-H "$5")
	curl "${args[@]}"
}

step "log in as demo-user through wxsim"
token=$(call POST /v1/auth/wx-login "" '{"code":"demo-user"}' | field token)
echo "session token: ${token:0:16}..."

step "the menu"
merchant=$(call GET /v1/merchants "" | field id)
menu=$(call GET "/v1/merchants/$merchant/menu" "")
dish=$(echo "$menu" | sed 's/},{/}\n{/g' | grep '"on_sale":true' | field id)
echo "merchant $merchant, ordering dish $dish"

step "confirm (the server prices the cart)"
confirm=$(call POST /v1/orders/confirm "$token" "{\"merchant_id\":\"$merchant\",\"items\":[{\"dish_id\":\"$dish\",\"qty\":2}],\"address\":{\"name\":\"Demo User\",\"phone\":\"13800138000\",\"detail\":\"1 Demo Road\"},\"repeat\":true}")
echo "$confirm" | sed 's/"confirm_token":"[^"]*"/"confirm_token":"..."/'
ctoken=$(echo "$confirm" | field confirm_token)

step "submit twice with one Idempotency-Key (the second is a replay)"
key="demo-$(date +%s%N)"
call POST /v1/orders "$token" "{\"confirm_token\":\"$ctoken\"}" "Idempotency-Key: $key" >/dev/null
curl -sS -D - -o /dev/null -X POST "$API/v1/orders" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	-H "Idempotency-Key: $key" --data-binary "{\"confirm_token\":\"$ctoken\"}" | grep -i -E '^HTTP|Idempotent-Replayed'
order=$(echo "$confirm" | field order_id)
echo "order $order"

step "pay: wx.requestPayment parameters"
call POST "/v1/orders/$order/pay" "$token"
echo

step "wxsim: the user pays; the callback is delivered 3 times at once"
curl -sS -f -X POST "$SIM/sim/pay" -H 'Content-Type: application/json' \
	--data-binary "{\"out_trade_no\":\"T$order-1\",\"copies\":3,\"concurrent\":true,\"retries\":10,\"retry_base_ms\":100}"

for action in accept dispatch complete; do
	step "merchant: $action"
	call POST "/admin/v1/orders/$order/$action" "$ADMIN" | field status
done

step "the order"
call GET "/v1/orders/$order" "$token"
echo
