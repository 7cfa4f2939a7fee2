#!/usr/bin/env bash
# govulncheck against the Go vulnerability database. vuln.go.dev is used
# when it answers; otherwise (as on machines without outside access) the
# database is built locally from the pinned golang.org/x/vulndb module
# (its OSV files) into .dev/vulndb-<version>, once per version.
#
# Any vulnerability our code reaches in a module fails the check. One in
# the standard library of the Go toolchain on this machine is printed with
# its fixed Go version and does not fail it: the fix is a toolchain
# upgrade (GOTOOLCHAIN=go1.27.3), not a change to this repository.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
govulncheck=golang.org/x/vuln/cmd/govulncheck@v1.9.0
vulndb_version=v0.0.0-20261105234957-e22db6528018

if [ -n "${TAKEOUT_VULNDB:-}" ]; then
	db=$TAKEOUT_VULNDB
elif curl -fsS -m 5 -o /dev/null https://vuln.go.dev/index/db.json.gz 2>/dev/null; then
	db=https://vuln.go.dev
else
	dir="$root/.dev/vulndb-$vulndb_version"
	if [ ! -s "$dir/index/db.json" ]; then
		echo "vuln.go.dev does not answer: building the database from golang.org/x/vulndb@$vulndb_version" >&2
		src=$(go mod download -json "golang.org/x/vulndb@$vulndb_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		rm -rf "$dir.tmp"
		go run "golang.org/x/vulndb/cmd/indexdb@$vulndb_version" -vulns "$src/data/osv" -out "$dir.tmp"
		mv "$dir.tmp" "$dir"
	fi
	db="file://$dir"
fi
echo "vulnerability database: $db"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go run "$govulncheck" -db "$db" ./... >"$out" 2>&1 || status=$?
cat "$out"
# go run reports govulncheck's "found" (exit 3) as its own failure.
if [ "$status" = 0 ]; then
	exit 0
elif ! grep -q '^Your code is affected by' "$out"; then
	exit "$status"
fi
if grep -E '^[[:space:]]+Found in: ' "$out" | grep -v -E 'Found in: [a-z0-9/]+@go[0-9]' >/dev/null; then
	echo "govulncheck: vulnerable module versions are reached from our code (above): upgrade them" >&2
	exit 1
fi
fixed=$(grep -E '^[[:space:]]+Fixed in: ' "$out" | sed -E 's/.*@go//' | sort -V | tail -1)
echo "govulncheck: only the standard library of $(go env GOVERSION) is affected; build with Go $fixed or newer (e.g. GOTOOLCHAIN=go1.27.3) for production" >&2
