# Tidemark build and test entry points. `make test` is the one command that
# runs every test, MinIO and Docker tests included; it installs what they
# need first (the pinned MinIO server, built from its Go source module).

GO        ?= go
TIDEMARK_CACHE ?= $(HOME)/.cache/tidemark
export TIDEMARK_CACHE
# The Ryuk reaper image cannot be pulled here; tests remove what they start.
export TESTCONTAINERS_RYUK_DISABLED = true

.PHONY: test deps lint unit bench bench-peers

## test: install test dependencies, check formatting and vet, run all tests with -race
test: deps lint
	$(GO) test -race -count=1 -timeout 40m ./...

## deps: install the pinned MinIO server, versitygw (the second S3
## implementation the tests run on) and the peers of the peer benchmark
## (rclone, mc) into $(TIDEMARK_CACHE)/bin; each is built once from the Go
## module proxy and reused while its version stamp matches
deps:
	bash scripts/install-minio.sh
	bash scripts/install-versitygw.sh
	bash scripts/install-peers.sh

## lint: gofmt, go vet, staticcheck (unused code and more; pinned by go.mod's
## tool directive) and the docker-compose file
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@if docker compose version >/dev/null 2>&1; then docker compose config -q; \
	  elif command -v docker-compose >/dev/null 2>&1; then docker-compose config -q; \
	  else echo "docker compose not installed: docker-compose.yml not checked" >&2; fi

## unit: every package whose tests need no MinIO or Docker
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /s3store -e /integration -e /cmd/)
unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

## bench: benchmarks on MinIO as a local process (in Docker here MinIO
## writes through fuse-overlayfs and is slower), printing figures
bench: deps
	TIDEMARK_MINIO=process $(GO) test -run '^$$' -bench . -benchtime=1x -timeout 60m ./s3store/ ./integration/

## bench-peers: Tidemark side by side with mc and rclone on a private MinIO
## (integration/peerbench): prints the table, writes results.csv and
## results.png into $(PEERBENCH_OUT). PEERBENCH_FLAGS passes flags, for
## example PEERBENCH_FLAGS="-rounds 3 -stream-size 64MiB".
PEERBENCH_OUT   ?= $(TIDEMARK_CACHE)/peerbench
PEERBENCH_FLAGS ?=
bench-peers: deps
	$(GO) build -o $(TIDEMARK_CACHE)/bin/peerbench ./integration/peerbench
	$(TIDEMARK_CACHE)/bin/peerbench -out $(PEERBENCH_OUT) $(PEERBENCH_FLAGS)
