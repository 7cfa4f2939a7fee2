#!/usr/bin/env bash
# The whole demo flow against `make run`: log in through wxsim, read the
# menu, confirm and submit an order with options, pay it through wxsim's
# simulated WeChat Pay, urge it, let the merchant accept it, mark it ready
# and dispatch it (the customer gets a WeChat message for each, having
# subscribed), confirm receipt, refund part of it, and order it again.
# Watch it arrive on the board: /board/ (user demo.kitchen).
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
# id_of NAME: the id of the menu's dish or option choice of that name.
id_of() { echo "$menu" | sed 's/{"id":"/\n/g' | grep "\"name\":\"$1\"" | head -1 | cut -d'"' -f1; }
chicken=$(id_of "Kung Pao Chicken") rice=$(id_of "Egg Fried Rice")
large=$(id_of Large) fiery=$(id_of Fiery) peanuts=$(id_of Peanuts)
echo "merchant $merchant (open now: $(echo "$menu" | sed -n 's/.*"open_now":\([a-z]*\).*/\1/p')): a large fiery Kung Pao Chicken with peanuts, and 2 egg fried rice"

step "confirm (the server prices the cart: options, packaging, delivery)"
cart="{\"merchant_id\":\"$merchant\",\"items\":[{\"dish_id\":\"$chicken\",\"qty\":1,\"options\":[\"$large\",\"$fiery\",\"$peanuts\"]},{\"dish_id\":\"$rice\",\"qty\":2}],\"address\":{\"name\":\"Demo User\",\"phone\":\"13800138000\",\"detail\":\"1 Demo Road\"},\"repeat\":true}"
confirm=$(call POST /v1/orders/confirm "$token" "$cart")
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

step "the customer accepts status messages (wx.requestSubscribeMessage) and the mini-program reports them"
curl -sS -f -X POST "$SIM/sim/subscribe" -H 'Content-Type: application/json' \
	--data-binary '{"openid":"sim-demo-user","template_ids":["demo-accepted","demo-delivering"]}'
call PUT "/v1/orders/$order/subscriptions" "$token" '{"template_ids":["demo-accepted","demo-delivering"]}'
echo

step "wxsim: the user pays; the callback is delivered 3 times at once"
curl -sS -f -X POST "$SIM/sim/pay" -H 'Content-Type: application/json' \
	--data-binary "{\"out_trade_no\":\"T$order-1\",\"copies\":3,\"concurrent\":true,\"retries\":10,\"retry_base_ms\":100}"

step "the customer urges the merchant (a second urge within the interval is 429)"
call POST "/v1/orders/$order/urge" "$token"
echo

for action in accept ready dispatch; do
	step "merchant: $action"
	call POST "/admin/v1/orders/$order/$action" "$ADMIN" | field status
done

step "the customer confirms receipt"
call POST "/v1/orders/$order/complete" "$token" | field status

step "staff refund one egg fried rice (line 1), its packaging with it"
call POST "/admin/v1/orders/$order/refunds" "$ADMIN" '{"lines":[{"line":1,"qty":1}],"reason":"one rice was missing"}' "Idempotency-Key: demo-refund-$order"
echo

step "the order"
call GET "/v1/orders/$order" "$token"
echo

step "the WeChat messages the customer got (accepted, delivering: one each)"
sleep 2 # the message jobs run in the background
curl -sS -f "$SIM/sim/messages"
echo

step "order it again (a new quote at today's prices)"
call POST "/v1/orders/$order/reorder" "$token" | sed 's/"confirm_token":"[^"]*"/"confirm_token":"..."/'
echo
