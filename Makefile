# Tidemark build and test entry points. `make test` is the one command that
# runs every test, MinIO and Docker tests included; it installs what they
# need first (the pinned MinIO server, built from its Go source module).

GO        ?= go
TIDEMARK_CACHE ?= $(HOME)/.cache/tidemark
export TIDEMARK_CACHE
# The Ryuk reaper image cannot be pulled here; tests remove what they start.
export TESTCONTAINERS_RYUK_DISABLED = true

.PHONY: test deps lint unit bench bench-peers docker no-docker build dst

# The CLI image (make docker) is built and checked by make test wherever a
# Docker daemon answers; where none does, make test says so loudly.
DOCKER_IMAGE ?= tidemark:dev
DOCKER_STAGE := bin/docker
CA_BUNDLE    ?= /etc/ssl/certs/ca-certificates.crt
HAVE_DOCKER  := $(shell command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_DOCKER),yes)
TEST_DOCKER := docker
else
TEST_DOCKER := no-docker
endif

## test: install test dependencies, check formatting and vet, build the CLI image, run all tests with -race
test: deps lint $(TEST_DOCKER)
	$(GO) test -race -count=1 -timeout 40m ./...

## deps: install the pinned MinIO server, versitygw and SeaweedFS (the
## second and third S3 implementations the tests run on) and the peers of the peer benchmark
## (rclone, mc) into $(TIDEMARK_CACHE)/bin; each is built once from the Go
## module proxy and reused while its version stamp matches
deps:
	bash scripts/install-minio.sh
	bash scripts/install-versitygw.sh
	bash scripts/install-seaweedfs.sh
	bash scripts/install-peers.sh
	bash scripts/install-nats-server.sh

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

## build: build the CLI into bin/tidemark, stamped with its VCS revision where the go command can
build:
	$(GO) build -trimpath -buildvcs=auto -o bin/tidemark ./cmd/tidemark

## docker: build the CLI image $(DOCKER_IMAGE) (FROM scratch + a static binary built here) and check that it runs
# The binary is built on the host and copied in, so the build needs no base
# image and no registry. -buildvcs=auto stamps the revision where the go
# command can (a clone; not a git worktree), overriding a go env file that
# turns stamping off. The image it replaces is removed by id. The image
# runs as 65532, so the check runs the demo in it: that writes /data and
# /tmp as that user.
docker:
	rm -rf $(DOCKER_STAGE)
	mkdir -p $(DOCKER_STAGE)/tmp $(DOCKER_STAGE)/data
	@test -r $(CA_BUNDLE) || { echo "make docker: no CA bundle at $(CA_BUNDLE) (install ca-certificates, or set CA_BUNDLE)" >&2; exit 1; }
	cp $(CA_BUNDLE) $(DOCKER_STAGE)/ca-certificates.crt
	CGO_ENABLED=0 GOOS=linux GOARCH=$$($(GO) env GOARCH) $(GO) build -trimpath -buildvcs=auto -o $(DOCKER_STAGE)/tidemark ./cmd/tidemark
	@old=$$(docker image inspect -f '{{.Id}}' $(DOCKER_IMAGE) 2>/dev/null || true); \
	  docker build -f Dockerfile -t $(DOCKER_IMAGE) . || exit 1; \
	  new=$$(docker image inspect -f '{{.Id}}' $(DOCKER_IMAGE)); \
	  if [ -n "$$old" ] && [ "$$old" != "$$new" ]; then docker rmi "$$old" >/dev/null 2>&1 || true; fi
	docker run --rm $(DOCKER_IMAGE) --help >/dev/null
	@out=$$(docker run --rm $(DOCKER_IMAGE) demo --records 2000 --slow 0 2>&1) || { echo "$$out" >&2; echo "make docker: the demo failed in $(DOCKER_IMAGE)" >&2; exit 1; }; \
	  echo "$$out" | grep -q 'exactly-once: OK' || { echo "$$out" >&2; echo "make docker: the demo in $(DOCKER_IMAGE) did not report exactly-once: OK" >&2; exit 1; }
	@echo "make docker: $(DOCKER_IMAGE) built; --help and the demo run in it as user 65532"

no-docker:
	@echo "" >&2
	@echo "**************************************************************" >&2
	@echo "** WARNING: no Docker daemon answers here, so the CLI image  **" >&2
	@echo "** (make docker) was NOT built or checked by this make test. **" >&2
	@echo "**************************************************************" >&2
	@echo "" >&2

## dst: the deterministic simulation at scale (docs/simulation.md): DST_SEEDS
## seeds of writers, zombies and an operator on a faulted simulated store, in
## two processes (one per core), then the runtime mode (with local and with
## remote state) and the workers mode (a coordinator and workers), the
## regression seeds, the replay check and
## every deliberate bug; prints store calls, runs and faults per kind, and
## the command that replays any failing seed
DST_SEEDS ?= 600
DST_RUNTIME_SEEDS ?= 20
DST_WORKERS_SEEDS ?= 10
DST_REMOTE_SEEDS ?= 10
dst:
	@mkdir -p bin
	$(GO) test -c -o bin/dst.test ./integration/dst
	@cd integration/dst && half=$$(( $(DST_SEEDS) / 2 )); start=$$(date +%s); \
	  ../../bin/dst.test -test.run 'TestSim$$' -test.timeout 30m -seeds=$$half -first-seed=1 > ../../bin/dst-1.log 2>&1 & p1=$$!; \
	  ../../bin/dst.test -test.run 'TestSim$$' -test.timeout 30m -seeds=$$(( $(DST_SEEDS) - half )) -first-seed=$$(( half + 1 )) > ../../bin/dst-2.log 2>&1 & p2=$$!; \
	  ../../bin/dst.test -test.run 'TestSimRuntime$$' -test.timeout 30m -seeds=$(DST_RUNTIME_SEEDS) -first-seed=1 > ../../bin/dst-3.log 2>&1; r3=$$?; \
	  ../../bin/dst.test -test.run 'TestSimWorkers$$' -test.timeout 30m -seeds=$(DST_WORKERS_SEEDS) -first-seed=1 >> ../../bin/dst-3.log 2>&1; r3=$$(( r3 + $$? )); \
	  ../../bin/dst.test -test.run 'TestSimRemote$$' -test.timeout 30m -seeds=$(DST_REMOTE_SEEDS) -first-seed=1 >> ../../bin/dst-3.log 2>&1; r3=$$(( r3 + $$? )); \
	  wait $$p1; r1=$$?; wait $$p2; r2=$$?; secs=$$(( $$(date +%s) - start )); \
	  cat ../../bin/dst-1.log ../../bin/dst-2.log ../../bin/dst-3.log | grep -v -e '^DST-TOTAL' -e '^PASS$$'; \
	  cat ../../bin/dst-1.log ../../bin/dst-2.log ../../bin/dst-3.log | grep '^DST-TOTAL' | tr ' ' '\n' | grep = | \
	    awk -F= -v secs=$$secs '{s[$$1]+=$$2} END {printf "make dst: %d runs, %d store calls (%d scheduling steps) in %d s\n", s["runs"], s["calls"], s["steps"], secs; fflush(); for (k in s) if (k ~ /^fault:/) printf "  %-16s %d\n", substr(k, 7), s[k] | "sort"}'; \
	  test $$r1 -eq 0 -a $$r2 -eq 0 -a $$r3 -eq 0
	@cd integration/dst && ../../bin/dst.test -test.run 'TestRegressions|TestReplay|TestBugs' -test.timeout 30m -test.v -bug-seeds=300 > ../../bin/dst-4.log 2>&1; r=$$?; \
	  grep -E -e '^(--- |FAIL|PASS)' -e 'caught|identical twice|^ +\|' ../../bin/dst-4.log; test $$r -eq 0
