# takeout: the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
SQLC  := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: observe run test build generate sdk sdk-generate schema services stop-services fuzz soak soak-quick soak-ha soak-ha-quick ha ha-packages run-ha bench clean

## run: start PostgreSQL/Redis if needed, migrate, seed the demo, run wxsim and the API
run:
	@scripts/dev/run.sh

## test: ensure services, then build, vet, gofmt, sqlc check, all tests with -race
test:
	@scripts/dev/test.sh

## build: build bin/api, bin/wxsim and bin/soak
build:
	go build -o bin/api ./cmd/api
	go build -o bin/wxsim ./cmd/wxsim
	go build -o bin/soak ./cmd/soak
	go build -o bin/bench ./cmd/bench
	go build -o bin/ha ./cmd/ha

## generate: regenerate the sqlc code after changing db/queries, db/migrations or db/functions
generate:
	$(SQLC) generate

## sdk: build and check the client SDK (clients/miniprogram); sdk-generate regenerates its types from api/openapi.yaml
sdk:
	@scripts/dev/sdk.sh

sdk-generate:
	@scripts/dev/sdk.sh generate

## schema: regenerate db/schema.sql (the live schema) after changing db/migrations or db/functions
schema:
	@eval "$$(scripts/dev/services.sh)" && go test ./internal/db -run '^TestSchemaFileIsTheLiveSchema$$' -count=1 -update

## services: print the test services' URLs, starting them if needed
services:
	@scripts/dev/services.sh

## stop-services: stop the private PostgreSQL/Redis that make run/test started under .dev/
stop-services:
	@scripts/dev/services.sh stop

FUZZTIME ?= 30s
## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$(go list ./...); do \
		for f in $$(go test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# The soak (cmd/soak): 3 api instances, wxsim, a private PostgreSQL and
# Redis behind toxiproxy, duplicate storms, every fault kind, then the
# invariant checker. Exit status 1 when an invariant is broken.
DURATION    ?= 30m
USERS       ?= 64
DUP         ?= 4
INSTANCES   ?= 3
FAULTS      ?= all
FAULT_EVERY ?= 30s
SOAK_FLAGS  = -duration $(DURATION) -users $(USERS) -dup $(DUP) -instances $(INSTANCES) -fault-every $(FAULT_EVERY) \
	$(if $(filter all,$(FAULTS)),,-faults $(FAULTS))

## soak: the long soak; its report goes to docs/soak/ (DURATION, USERS, DUP, INSTANCES, FAULTS, FAULT_EVERY)
soak: build
	TAKEOUT_SOAK_COMMAND="make soak DURATION=$(DURATION) USERS=$(USERS) DUP=$(DUP) INSTANCES=$(INSTANCES) FAULTS=$(FAULTS) FAULT_EVERY=$(FAULT_EVERY)" \
		bin/soak $(SOAK_FLAGS) -report-dir docs/soak

## soak-quick: every fault kind once in about 2 minutes (part of make test); report in .dev/soak/quick
soak-quick: build
	rm -rf .dev/soak/quick
	TAKEOUT_SOAK_COMMAND="make soak-quick" bin/soak -duration 60s -settle 60s -users 24 -dup 4 -fault-every 6s \
		-pay-window 20s -hot-stock 150 -work-dir .dev/soak/quick -report-name soak-quick

# The HA stack (internal/lab/ha): a 3-master Redis Cluster with a replica
# each, 3 PostgreSQL members under Patroni with synchronous replication,
# 3 etcd members. Its engines are installed from Debian's packages first.
ha-packages:
	@scripts/dev/services.sh ha-packages

## ha: run the HA stack under .dev/ha in the foreground (Ctrl-C stops it); its URLs go to .dev/ha/env
ha: ha-packages build
	bin/ha

## run-ha: make run against the stack of a running `make ha`
run-ha:
	@test -s .dev/ha/env || { echo "no .dev/ha/env: start \`make ha\` in another terminal first" >&2; exit 1; }
	@. .dev/ha/env && scripts/dev/run.sh

## soak-ha: the soak on the HA stack, with its faults (master and primary killed, slots migrated, switchover, etcd restart); report in docs/soak/
# SETTLE is the longest wait after the load for the work it left (the
# settle ends as soon as nothing is left): an hour at full load leaves
# minutes of jobs behind it.
HA_FAULT_EVERY ?= 40s
SETTLE ?= 90s
soak-ha: ha-packages build
	TAKEOUT_SOAK_COMMAND="make soak-ha DURATION=$(DURATION) USERS=$(USERS) DUP=$(DUP) INSTANCES=$(INSTANCES) HA_FAULT_EVERY=$(HA_FAULT_EVERY) SETTLE=$(SETTLE)" \
		bin/soak -ha -duration $(DURATION) -users $(USERS) -dup $(DUP) -instances $(INSTANCES) -fault-every $(HA_FAULT_EVERY) -settle $(SETTLE) \
		-report-dir docs/soak -report-name soak-ha-$$(date -u +%F)-$(DURATION)

## soak-ha-quick: the quick HA check (part of make test): a Redis master failover, a PostgreSQL primary killed, a Patroni switchover, under a small storm
soak-ha-quick: ha-packages build
	rm -rf .dev/soak/ha-quick
	TAKEOUT_SOAK_COMMAND="make soak-ha-quick" bin/soak -ha -duration 110s -settle 60s -users 16 -dup 4 -fault-every 30s \
		-faults redis-master-kill,pg-primary-kill,pg-switchover -pay-window 20s -hot-stock 150 -work-dir .dev/soak/ha-quick -report-name soak-ha-quick

## observe: Prometheus scraping the instances of make run, with takeout's rules; prints its URL
observe:
	@scripts/dev/observe.sh

## bench: measure throughput and latency against this machine's floors (hello, pgbench); results in docs/bench/ (BENCH_FLAGS)
bench:
	@scripts/dev/bench.sh

clean:
	rm -rf bin
