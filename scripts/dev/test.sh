#!/usr/bin/env bash
# make test: ensure PostgreSQL and Redis (and the HA stack's engines), then
# build, vet, check formatting and generated code, build the client SDK,
# run every test with the race detector (the SDK's Node tests among them),
# every fuzz target briefly, the quick soak (make soak-quick) and the quick
# HA check (make soak-ha-quick). The test runner's summary is printed
# again last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

step() { printf '\n== %s\n' "$*"; }

step "services"
services_env=$(scripts/dev/services.sh)
eval "$services_env"
echo "PostgreSQL: $TAKEOUT_TEST_DATABASE_URL"
echo "Redis:      $TAKEOUT_TEST_REDIS_URL"
scripts/dev/services.sh ha-packages
scripts/dev/services.sh observe-packages
scripts/dev/services.sh browser-packages
scripts/dev/services.sh db-lint-packages

step "build"
go build ./...

step "go vet"
go vet ./...

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.dev/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "golangci-lint (with gosec; .golangci.yml)"
go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...

step "govulncheck"
scripts/dev/vulncheck.sh

step "alerting rules: promtool check rules and the rules' unit tests"
promtool check rules deploy/prometheus/takeout.rules.yml
promtool test rules deploy/prometheus/takeout.rules.test.yml

step "sqlc generated code is up to date"
go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1 diff
go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1 vet

# The published WeChat Pay vectors, read in place when shared/ is beside us.
if [ -z "${TAKEOUT_WXPAY_VECTORS:-}" ] && [ -d "$root/../shared/wechatpay-vectors" ]; then
	export TAKEOUT_WXPAY_VECTORS="$root/../shared/wechatpay-vectors"
fi
echo "WeChat Pay vectors: ${TAKEOUT_WXPAY_VECTORS:-none (the vector test will skip and say why)}"

step "client SDK: its packages, its types up to date with api/openapi.yaml, tsc --strict (its tests run in TestClientSDK)"
scripts/dev/sdk.sh

step "tests (-race)"
go run gotest.tools/gotestsum@v1.13.0 --format testname -- -race -count=1 -timeout 20m ./... | tee .dev/test-summary.log

step "fuzz: every target briefly (make fuzz runs them longer)"
if ! make --no-print-directory fuzz FUZZTIME="${TAKEOUT_FUZZTIME:-500x}" >.dev/fuzz.log 2>&1; then
	cat .dev/fuzz.log
	exit 1
fi
echo "$(grep -c '^== ' .dev/fuzz.log) fuzz targets ran without a failure"

step "soak-quick: 3 api instances under duplicate storms and every fault kind, then the invariant checker"
if ! make --no-print-directory soak-quick >.dev/soak-quick.log 2>&1; then
	cat .dev/soak-quick.log
	exit 1
fi
grep -E '^(PASS|FAIL)|submit attempts|orders created' .dev/soak-quick.log

step "soak-ha-quick: a Redis master failover, a PostgreSQL primary killed and a Patroni switchover under a small storm, then the invariant checker"
if ! make --no-print-directory soak-ha-quick >.dev/soak-ha-quick.log 2>&1; then
	cat .dev/soak-ha-quick.log
	exit 1
fi
grep -E '^(PASS|FAIL)|submit attempts|orders created|^\| (redis-master-kill|pg-primary-kill|pg-switchover) ' .dev/soak-ha-quick.log

step "summary"
tail -n 1 .dev/test-summary.log
