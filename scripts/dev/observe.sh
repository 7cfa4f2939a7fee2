#!/usr/bin/env bash
# make observe: Prometheus (Debian's package, installed when missing)
# scraping the operations listeners of `make run` (TAKEOUT_OBSERVE_TARGETS,
# default that of make run: 127.0.0.1:6060) with takeout's rules loaded,
# in the foreground until Ctrl-C. Its data lives in .dev/observe.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
scripts/dev/services.sh observe-packages

dir=.dev/observe
mkdir -p "$dir/data"
addr=${TAKEOUT_OBSERVE_ADDR:-127.0.0.1:9091}
targets=${TAKEOUT_OBSERVE_TARGETS:-${TAKEOUT_OPS_ADDR:-127.0.0.1:6060}}
{
	echo "global: {scrape_interval: 5s, evaluation_interval: 5s}"
	echo "rule_files: [\"$root/deploy/prometheus/takeout.rules.yml\"]"
	echo "scrape_configs:"
	echo "  - job_name: takeout"
	echo "    static_configs:"
	echo "      - targets: [$(echo "$targets" | sed 's/[^,][^,]*/"&"/g')]"
} >"$dir/prometheus.yml"
promtool check config "$dir/prometheus.yml" >&2

cat >&2 <<TXT

Prometheus: http://$addr   (targets: $targets; alerts http://$addr/alerts)
Grafana: import deploy/grafana/takeout.json with this Prometheus as its data source.
TXT
exec prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
	--web.listen-address="$addr" --storage.tsdb.retention.time=2d --log.level=warn
