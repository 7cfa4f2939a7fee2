# takeout: the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
SQLC  := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: run test build generate services stop-services fuzz clean

## run: start PostgreSQL/Redis if needed, migrate, seed the demo, run wxsim and the API
run:
	@scripts/dev/run.sh

## test: ensure services, then build, vet, gofmt, sqlc check, all tests with -race
test:
	@scripts/dev/test.sh

## build: build bin/api and bin/wxsim
build:
	go build -o bin/api ./cmd/api
	go build -o bin/wxsim ./cmd/wxsim

## generate: regenerate the sqlc code after changing db/queries or db/migrations
generate:
	$(SQLC) generate

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

clean:
	rm -rf bin
