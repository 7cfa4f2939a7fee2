#!/usr/bin/env bash
# Generates the development secrets into .dev/secrets.env on first run and
# prints them as shell exports. They never leave the machine: .dev/ is
# ignored by git.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
file="$root/.dev/secrets.env"
if [ ! -s "$file" ] || ! grep -q TAKEOUT_CONFIRM_SECRET "$file"; then
	mkdir -p "$root/.dev"
	umask 077
	rnd() { head -c 32 /dev/urandom | base64 | tr -d '=+/\n'; }
	{
		echo "export TAKEOUT_SESSION_SECRET='$(rnd)$(rnd)'"
		echo "export TAKEOUT_STAFF_SECRET='$(rnd)$(rnd)'"
		echo "export TAKEOUT_WECHAT_APP_SECRET='$(rnd)'"
		echo "export TAKEOUT_CONFIRM_SECRET='$(rnd)$(rnd)'"
	} >"$file"
	echo "secrets: generated development secrets into .dev/secrets.env" >&2
fi
cat "$file"
