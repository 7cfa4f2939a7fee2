#!/usr/bin/env bash
# Makes sure PostgreSQL and Redis answer for takeout's dev and test runs,
# and prints their URLs as shell exports.
#
# Order: URLs already given (TAKEOUT_TEST_DATABASE_URL, TAKEOUT_TEST_REDIS_URL)
# -> a server on the standard local port (5432 with trust auth, 6379)
# -> a private server of this checkout under .dev/ (ports 55432, 56379),
#    started here, installed from Debian's packages first if missing.
#
# Usage: env=$(scripts/dev/services.sh) && eval "$env"   (stop: scripts/dev/services.sh stop)
#        scripts/dev/services.sh ha-packages   (installs what the HA stack runs on)
#        scripts/dev/services.sh observe-packages   (installs Prometheus: promtool)
#        scripts/dev/services.sh browser-packages   (installs Chromium: the board's browser test)
#        scripts/dev/services.sh db-lint-packages   (installs plpgsql_check: the lint of db/functions)
#        scripts/dev/services.sh node-packages   (installs Node.js and npm: the client SDK's build and tests)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dev="$root/.dev"
pg_port=${TAKEOUT_DEV_PG_PORT:-55432}
redis_port=${TAKEOUT_DEV_REDIS_PORT:-56379}
mkdir -p "$dev"

log() { echo "services: $*" >&2; }
die() { echo "services: $*" >&2; exit 1; }

apt_updated=
install_packages() {
	if [ "$(id -u)" != 0 ]; then
		die "need the Debian packages $*; install them (sudo apt-get install -y $*) and run again"
	fi
	log "installing $* from Debian's packages"
	if [ -z "$apt_updated" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

pg_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		[ -x "$d/initdb" ] && { echo "$d"; return 0; }
	done
	return 1
}

pg_answers() { psql "$1" -Atqc 'SELECT 1' >/dev/null 2>&1; }
redis_answers() { [ "$(redis-cli -u "$1" ping 2>/dev/null)" = PONG ]; }

# The private cluster's data directory must be reachable by the postgres
# user; when the checkout is not (e.g. under /root), keep it under /tmp and
# link it from .dev/pg.
pg_data_dir() {
	if [ "$(id -u)" != 0 ] || runuser -u postgres -- test -x "$dev" 2>/dev/null; then
		[ -L "$dev/pg" ] || mkdir -p "$dev/pg"
		readlink -f "$dev/pg"
		return
	fi
	local alt="/tmp/takeout-dev-$(echo -n "$root" | sha1sum | cut -c1-12)/pg"
	mkdir -p "$alt"
	ln -sfn "$alt" "$dev/pg"
	echo "$alt"
}

ensure_postgres() {
	if [ -n "${TAKEOUT_TEST_DATABASE_URL:-}" ]; then
		command -v psql >/dev/null || install_packages postgresql-client
		pg_answers "$TAKEOUT_TEST_DATABASE_URL" || die "TAKEOUT_TEST_DATABASE_URL does not answer"
		pg_url=$TAKEOUT_TEST_DATABASE_URL
		return
	fi
	command -v psql >/dev/null && pg_bin >/dev/null || install_packages postgresql
	local system="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	if pg_answers "$system"; then
		pg_url=$system
		return
	fi
	pg_url="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
	if pg_answers "$pg_url"; then
		return
	fi
	local bin data run_as=()
	bin=$(pg_bin)
	data=$(pg_data_dir)
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres:postgres "$data"
		run_as=(runuser -u postgres --)
	fi
	# The postgres user's programs run from its data directory: the
	# checkout may be one only its owner can enter.
	cd "$data"
	if [ ! -s "$data/PG_VERSION" ]; then
		log "creating a private PostgreSQL cluster in $data"
		"${run_as[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >"$dev/pg-initdb.log" 2>&1 ||
			die "initdb failed; see $dev/pg-initdb.log"
	fi
	# Durable, as PostgreSQL ships: make run's orders and payments live
	# here, and an acknowledged one must survive a power cut. (The soak's
	# and the HA lab's throwaway clusters run with fsync off: their faults
	# kill processes, never the machine. This one is shared with make run,
	# so make test does not trade it away.)
	log "starting PostgreSQL on 127.0.0.1:$pg_port"
	"${run_as[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start \
		-o "-p $pg_port -c listen_addresses=127.0.0.1 -k /tmp -c max_connections=300" >&2 ||
		die "PostgreSQL did not start; see $data/server.log"
	pg_answers "$pg_url" || die "PostgreSQL started but does not answer at $pg_url"
}

ensure_redis() {
	if [ -n "${TAKEOUT_TEST_REDIS_URL:-}" ]; then
		command -v redis-cli >/dev/null || install_packages redis-tools
		redis_answers "$TAKEOUT_TEST_REDIS_URL" || die "TAKEOUT_TEST_REDIS_URL does not answer"
		redis_url=$TAKEOUT_TEST_REDIS_URL
		return
	fi
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null || install_packages redis-server
	if redis_answers "redis://127.0.0.1:6379/0"; then
		redis_url="redis://127.0.0.1:6379/0"
		return
	fi
	redis_url="redis://127.0.0.1:$redis_port/0"
	if redis_answers "$redis_url"; then
		return
	fi
	mkdir -p "$dev/redis"
	log "starting Redis on 127.0.0.1:$redis_port"
	redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
		--dir "$dev/redis" --pidfile "$dev/redis/redis.pid" --logfile "$dev/redis/redis.log" >&2
	for _ in $(seq 50); do
		redis_answers "$redis_url" && return
		sleep 0.1
	done
	die "Redis did not start; see $dev/redis/redis.log"
}

# The HA stack's engines (make ha, make soak-ha, the quick HA check):
# Redis in cluster mode, Patroni and etcd, PostgreSQL's server programs.
ensure_ha_packages() {
	local missing=()
	command -v redis-server >/dev/null || missing+=(redis-server)
	command -v redis-cli >/dev/null || missing+=(redis-tools)
	command -v patroni >/dev/null || missing+=(patroni)
	command -v etcd >/dev/null || missing+=(etcd-server)
	pg_bin >/dev/null || missing+=(postgresql)
	if [ ${#missing[@]} -gt 0 ]; then
		install_packages "${missing[@]}"
	fi
	# Debian's PostgreSQL package starts a cluster of its own; the HA stack
	# runs its members on free ports and leaves it alone.
}

# Prometheus's promtool tests the alerting rules (deploy/prometheus) and
# checks the dashboard's queries; make observe runs Prometheus itself.
ensure_observe_packages() {
	command -v promtool >/dev/null || install_packages prometheus
}

# plpgsql_check, which make test runs over every PL/pgSQL function of
# db/functions (internal/db's TestLiveCodeLints), built for the
# PostgreSQL these scripts run.
ensure_db_lint_packages() {
	local bin major
	bin=$(pg_bin) || install_packages postgresql
	bin=$(pg_bin)
	major=$(basename "$(dirname "$bin")")
	[ -f "/usr/share/postgresql/$major/extension/plpgsql_check.control" ] ||
		install_packages "postgresql-$major-plpgsql-check"
}

# Headless Chromium for the order board's browser test (chromedp).
ensure_browser_packages() {
	command -v chromium >/dev/null || install_packages chromium
	# The board speaks Chinese: without a CJK font its screenshots are boxes.
	[ -d /usr/share/fonts/opentype/noto ] || install_packages fonts-noto-cjk
}

ensure_node_packages() {
	command -v node >/dev/null || install_packages nodejs
	command -v npm >/dev/null || install_packages npm
}

stop() {
	local bin
	if [ -s "$dev/pg/postmaster.pid" ] && bin=$(pg_bin); then
		if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$bin/pg_ctl" -D "$dev/pg" -m fast stop >&2) || true
		else "$bin/pg_ctl" -D "$dev/pg" -m fast stop >&2 || true; fi
	fi
	if [ -s "$dev/redis/redis.pid" ]; then
		kill "$(cat "$dev/redis/redis.pid")" 2>/dev/null || true
	fi
}

case "${1:-env}" in
env)
	ensure_postgres
	ensure_redis
	echo "export TAKEOUT_TEST_DATABASE_URL='$pg_url'"
	echo "export TAKEOUT_TEST_REDIS_URL='$redis_url'"
	;;
stop) stop ;;
ha-packages) ensure_ha_packages ;;
observe-packages) ensure_observe_packages ;;
browser-packages) ensure_browser_packages ;;
db-lint-packages) ensure_db_lint_packages ;;
node-packages) ensure_node_packages ;;
*) die "usage: $0 [env|stop|ha-packages|observe-packages|browser-packages|db-lint-packages|node-packages]" ;;
esac
