#!/usr/bin/env bash
# The client SDK (clients/miniprogram): installs Node.js if needed and the
# SDK's pinned packages (npm ci, again only when package-lock.json
# changed), checks that its types are what openapi-typescript makes of
# api/openapi.yaml, and compiles it under --strict: the library against
# the ECMAScript library alone (no DOM, no Node), the tests, and the
# example mini-program against WeChat's typings. Its tests run in
# `go test ./cmd/api -run TestClientSDK`, against a live instance.
#
# Usage: scripts/dev/sdk.sh            (check and build)
#        scripts/dev/sdk.sh generate   (regenerate src/openapi.ts after changing api/openapi.yaml)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/scripts/dev/services.sh" node-packages
cd "$root/clients/miniprogram"

stamp=node_modules/.takeout-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -s "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	npm ci --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
fi

if [ "${1:-}" = generate ]; then
	npm run --silent generate
	exit 0
fi

node scripts/check-generated.mjs
tsc=node_modules/.bin/tsc
"$tsc" -p tsconfig.lib.json --noEmit
"$tsc" -p tsconfig.json
"$tsc" -p example/tsconfig.json
echo "SDK: the library, its tests and the example compile under --strict"
