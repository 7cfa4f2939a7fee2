#!/usr/bin/env bash
# make run: bring up PostgreSQL and Redis (installing them if needed),
# migrate, seed the demo merchant, and run wxsim and the API in the
# foreground until Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

services_env=$(scripts/dev/services.sh)
eval "$services_env"
secrets_env=$(scripts/dev/secrets.sh)
eval "$secrets_env"

admin_url=$TAKEOUT_TEST_DATABASE_URL
export TAKEOUT_DATABASE_URL=${TAKEOUT_DATABASE_URL:-${admin_url/\/postgres\?//takeout?}}
export TAKEOUT_REDIS_URL=${TAKEOUT_REDIS_URL-$TAKEOUT_TEST_REDIS_URL}
export TAKEOUT_HTTP_ADDR=${TAKEOUT_HTTP_ADDR:-127.0.0.1:8080}
export TAKEOUT_WXSIM_ADDR=${TAKEOUT_WXSIM_ADDR:-127.0.0.1:8090}
export TAKEOUT_WECHAT_API_BASE=${TAKEOUT_WECHAT_API_BASE:-http://$TAKEOUT_WXSIM_ADDR}

if [ "$(psql "$admin_url" -Atqc "SELECT count(*) FROM pg_database WHERE datname = 'takeout'")" = 0 ]; then
	psql "$admin_url" -qc 'CREATE DATABASE takeout' >&2
fi

mkdir -p bin
go build -o bin/api ./cmd/api
go build -o bin/wxsim ./cmd/wxsim

bin/api migrate
merchant=$(bin/api seed-demo)
bin/api token -role admin -subject "$(id -un)@dev" -ttl 168h >.dev/admin.token
chmod 600 .dev/admin.token

# wxsim plays WeChat (login and pay). On first run it generates the
# merchant and platform keys into .dev/wxsim and writes the API's payment
# configuration there.
export TAKEOUT_WXSIM_DIR=${TAKEOUT_WXSIM_DIR:-$root/.dev/wxsim}
rm -f "$TAKEOUT_WXSIM_DIR/api.env"
bin/wxsim 2>>.dev/wxsim.log &
wxsim_pid=$!
trap 'kill $wxsim_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	[ -s "$TAKEOUT_WXSIM_DIR/api.env" ] && break
	kill -0 $wxsim_pid 2>/dev/null || { echo "wxsim failed; see .dev/wxsim.log" >&2; exit 1; }
	sleep 0.1
done
# shellcheck disable=SC1091
source "$TAKEOUT_WXSIM_DIR/api.env"
export TAKEOUT_WXPAY_API_BASE=${TAKEOUT_WXPAY_API_BASE:-$TAKEOUT_WECHAT_API_BASE}
export TAKEOUT_WXPAY_NOTIFY_URL=${TAKEOUT_WXPAY_NOTIFY_URL:-http://$TAKEOUT_HTTP_ADDR/v1/payments/wechat/notify}

# Customers are messaged on these statuses (wxsim plays WeChat's side).
export TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES=${TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES:-ACCEPTED=demo-accepted,DELIVERING=demo-delivering,COMPLETED=demo-completed,CANCELLED=demo-cancelled,REFUNDED=demo-refunded}

api=http://$TAKEOUT_HTTP_ADDR
# The demo kitchen's board login: its password is made on first run and
# kept in .dev/ (never in the repository); the account is created once
# the API answers.
[ -s .dev/board.password ] || { head -c 18 /dev/urandom | base64 | tr -d '/+=' >.dev/board.password; chmod 600 .dev/board.password; }
(
	for _ in $(seq 200); do curl -fsS "$api/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	TAKEOUT_API=$api TAKEOUT_STAFF_PASSWORD=$(cat .dev/board.password) \
		scripts/admin/staff.sh create "$merchant" demo.kitchen >/dev/null 2>&1 || true # exists after the first run
) &
cat >&2 <<TXT

takeout is starting:
  API        $api   (health $api/healthz, readiness $api/readyz)
  operations http://${TAKEOUT_OPS_ADDR:-127.0.0.1:6060}   (metrics /metrics, pprof /debug/pprof/)
  wxsim      $TAKEOUT_WECHAT_API_BASE   (log: .dev/wxsim.log)
  PostgreSQL $TAKEOUT_DATABASE_URL
  Redis      ${TAKEOUT_REDIS_URL:-disabled}
  admin token in .dev/admin.token (for scripts/admin/*.sh)
  order board $api/board/   (user demo.kitchen, password in .dev/board.password)

Try:
  scripts/demo.sh        (login, confirm, submit, pay via wxsim, accept, dispatch, complete)
  curl -s $api/v1/merchants/$merchant/menu
  scripts/admin/courier.sh dispatch $merchant accept   (couriers in wxsim carry accepted orders)
  curl -s -X POST $api/v1/auth/wx-login -H 'Content-Type: application/json' -d '{"code":"alice"}'

Logs follow (JSON). Ctrl-C stops the API and wxsim.
TXT
bin/api serve
