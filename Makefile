# Thin wrappers; .ci/run is what CI runs.
GO ?= go

# make bench DB=<dsn> SCENARIO=<name>
DB ?=
SCENARIO ?=

.PHONY: test test-race lint bench generate ci

test:
	$(GO) test ./...

test-race:
	$(GO) test -race -count=1 -timeout 30m ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; else echo "staticcheck not installed; skipped"; fi

bench:
	@if [ -z "$(DB)" ] || [ -z "$(SCENARIO)" ]; then echo "usage: make bench DB=<dsn> SCENARIO=<name>"; exit 2; fi
	$(GO) run ./cmd/sluice bench --db "$(DB)" --scenario "$(SCENARIO)"

generate:
	$(GO) generate ./api

ci:
	bash .ci/run
