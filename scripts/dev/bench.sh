#!/usr/bin/env bash
# make bench: ensure PostgreSQL and Redis, build the binaries, and measure
# takeout against this machine's own floors in one run (cmd/bench); the
# results go to docs/bench/results-<date>.{json,md,svg}.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
services_env=$(scripts/dev/services.sh)
eval "$services_env"
mkdir -p bin
go build -o bin/api ./cmd/api
go build -o bin/wxsim ./cmd/wxsim
go build -o bin/bench ./cmd/bench
TAKEOUT_BENCH_COMMAND="make bench${BENCH_FLAGS:+ BENCH_FLAGS='$BENCH_FLAGS'}" bin/bench -out docs/bench ${BENCH_FLAGS:-}
