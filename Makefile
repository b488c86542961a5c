# watchtree — the two commands a new machine needs are `make demo` and `make test`.
GO       ?= go
# MODULES are the repository's Go modules, each a directory with its own go.mod (README,
# "Modules"); test-go, vet, lint, tidy and bench run in every one, PKGS within each.
MODULES  ?= . test/mongosim cmd/watchtree metrics/prometheus otel store/redisstore sink/nats sink/kafka sink/rabbitmq examples/relay test
PKGS     ?= ./...
GOBIN    ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION ?= v1.36.12
STATICCHECK_VERSION   ?= v0.8.2

.PHONY: all test test-go test-dedicated test-clients test-mongosh chaos demo dashboard-png bench bench-mongosim bench-snapshot snapshot-50k drill-exactly proto lint vet fmt tidy modules mongosim tools

all: lint test

## test: the whole test suite with the race detector, then the Node.js client suite (what CI runs).
test: test-go test-dedicated test-clients

# in_modules runs the shell command $(1) in each of MODULES, every one even after a failure, and
# fails naming the modules it failed in.
in_modules = fail=; for m in $(MODULES); do echo "== $$m: $(1)"; (cd "$$m" && $(1)) || fail="$$fail $$m"; done; \
	if [ -n "$$fail" ]; then echo "failed in:$$fail"; exit 1; fi

## test-go: the Go tests with the race detector, in every module; first `chaos -cleanup` removes
## what killed chaos soaks left behind (processes, network namespaces, links, routes, folders in
## /tmp; running soaks are spared; without root the network is left alone). It never fails the
## target: a removal that failed is reported and the tests run.
test-go:
	@cd test && $(GO) run ./chaos/cmd/chaos -cleanup || echo "test-go: chaos -cleanup failed (above); the tests run anyway"
	@$(call in_modules,$(GO) test -race -count=1 -timeout 15m $(PKGS))

## test-dedicated: the integration tests again, with every Collection stream they spawn
## without choosing a cursor Dedicated (WATCHTREE_TEST_CURSOR=dedicated; by default such a
## stream is Shared): delivery, restarts, SIGKILL, lost history, Spawn and SingleLeader
## failover on the opt-out too. The second run reuses test-go's compiled binary.
test-dedicated:
	cd test && WATCHTREE_TEST_CURSOR=dedicated $(GO) test -race -count=1 -timeout 15m ./integration/

## test-clients: the official Node.js driver (test/mongosim/clients, pinned in its package-lock.json)
## against a standalone test/mongosim/cmd/mongosim on a free port; `npm ci` first when node_modules is missing.
test-clients:
	@command -v node >/dev/null 2>&1 || { echo "test-clients: node not found (apt-get install -y nodejs npm)"; exit 1; }
	@[ -d test/mongosim/clients/node_modules ] || (cd test/mongosim/clients && npm ci --no-audit --no-fund)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd test/mongosim && $(GO) build -o "$$tmp/mongosim" ./cmd/mongosim) && test/mongosim/clients/run.sh "$$tmp/mongosim"

## test-mongosh: a mongosh --eval smoke run against a standalone mongosim (mongosh is installed
## on demand into test/mongosim/clients/mongosh; not part of `make test` because of its size).
test-mongosh:
	@command -v node >/dev/null 2>&1 || { echo "test-mongosh: node not found (apt-get install -y nodejs npm)"; exit 1; }
	@[ -d test/mongosim/clients/mongosh/node_modules ] || (cd test/mongosim/clients/mongosh && npm ci --no-audit --no-fund)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd test/mongosim && $(GO) build -o "$$tmp/mongosim" ./cmd/mongosim) && test/mongosim/clients/mongosh/smoke.sh "$$tmp/mongosim"

## chaos: the chaos soak (test/chaos): 3 node processes, mongosim, a keyed load and a seeded
## nemesis for CHAOS_SECONDS (default 600), then the checker's report; a fresh seed is drawn and
## printed, CHAOS_SEED=<seed> reruns one. CHAOS_DIR keeps the histories there; CHAOS_FAULTS
## picks fault kinds (e.g. CHAOS_FAULTS=-corrupt-token leaves one out); CHAOS_NETWORK=proxy
## keeps the nodes on loopback instead of network namespaces; CHAOS_CURSOR=shared (or dedicated)
## sets the nodes' Stream.Cursor. Exit 1 on a
## violation. make test runs a 60-second seeded soak (TestSoak). A killed soak's processes die
## with it; its namespaces, links, routes, folder and Redis keys go with the next soak's start
## or with `cd test && go run ./chaos/cmd/chaos -cleanup` (which test-go runs first).
CHAOS_SECONDS ?= 600
chaos:
	cd test && $(GO) run ./chaos/cmd/chaos -seconds $(CHAOS_SECONDS) -seed $${CHAOS_SEED:-0} $${CHAOS_DIR:+-dir $$CHAOS_DIR} $${CHAOS_FAULTS:+-faults=$$CHAOS_FAULTS} $${CHAOS_NETWORK:+-network=$$CHAOS_NETWORK} $${CHAOS_CURSOR:+-cursor=$$CHAOS_CURSOR}

## demo: the end-to-end demo on the embedded mongosim (or MONGODB_URI when set); DEMO_FLAGS
## passes flags, e.g. DEMO_FLAGS='--db mydemo' (go run ./cmd/demo --help lists them).
demo:
	$(GO) run ./cmd/demo $(DEMO_FLAGS)

## dashboard-png: docs/dashboard.png, dashboards/watchtree.json rendered from a real run
## (metrics/prometheus/internal/cmd/dashrender): mongosim, two instances with the Prometheus
## adapter driven through retries, dead letters, lag, restarts and leader changes for
## DASHBOARD_SECONDS (default 150), a Prometheus server of its own evaluating every panel's
## PromQL, headless chromium for the screenshot. Needs Debian's prometheus and chromium (this
## target only; not part of make test). About 3 minutes.
DASHBOARD_SECONDS ?= 150
dashboard-png:
	cd metrics/prometheus && $(GO) run ./internal/cmd/dashrender -duration $(DASHBOARD_SECONDS)s -out ../../docs/dashboard.png

## bench: every benchmark of every module, BENCH_COUNT times each (default 3), written to docs/benchmarks.md:
## each figure with the baseline measured in the same run, the ratio, the range over the runs,
## the machine, its load and the date (internal/cmd/benchreport; raw output in
## docs/benchmarks.txt). BENCH is a go test -bench filter, e.g. make bench BENCH=Lanes
## BENCH_COUNT=1; BENCH_FLAGS passes more, e.g. BENCH_FLAGS='-benchtime 2x'. About 20 min on 2 cores.
BENCH_COUNT ?= 3
BENCH       ?= .
bench:
	GO=$(GO) $(GO) run ./internal/cmd/benchreport -count $(BENCH_COUNT) -bench '$(BENCH)' -modules '$(MODULES)' -pkgs '$(PKGS)' $(BENCH_FLAGS)

## bench-snapshot: the snapshot benchmarks (throughput against a raw find loop, resume).
bench-snapshot:
	cd test && $(GO) test -run '^$$' -bench 'BenchmarkSnapshot' -benchtime 3x -timeout 30m ./bench/

## snapshot-50k: the snapshot-then-stream integration test with 50,000 existing documents.
snapshot-50k:
	cd test && WATCHTREE_IT_SNAPSHOT_DOCS=50000 $(GO) test -race -count=1 -timeout 20m -run 'TestSnapshotThenStream$$' -v ./integration/

## drill-exactly: the exactly-once crash drill (TestTransactionalCrashDrill) at 10 times its size:
## 600 orders, 200 events per term before each of its 4 SIGKILLs and its SIGSTOP, and the load
## kept up to 24,000 writes. About 5 min (270 s here: 24,000 writes, 0 lost, 0 duplicates).
drill-exactly:
	cd test && WATCHTREE_IT_TXN_DRILL_SCALE=10 $(GO) test -count=1 -timeout 20m -run 'TestTransactionalCrashDrill$$' -v ./integration/

## bench-mongosim: the simulator's benchmarks only.
bench-mongosim:
	cd test/mongosim && $(GO) test -run '^$$' -bench . -benchmem .

## mongosim: run the simulator standalone on port 27017.
mongosim:
	cd test/mongosim && $(GO) run ./cmd/mongosim --port 27017

## proto: regenerate messages/ from proto/ (needs protoc; protoc-gen-go is installed here).
proto:
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	PATH="$(GOBIN):$$PATH" protoc --proto_path=proto --go_out=. --go_opt=module=github.com/watchtree/watchtree \
		$$(find proto -name '*.proto')

## lint: gofmt, go vet and staticcheck (in every module).
lint: fmt vet
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@$(call in_modules,$(GOBIN)/staticcheck $(PKGS))

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@$(call in_modules,$(GO) vet $(PKGS))

## tidy: go mod tidy in every module.
tidy:
	@$(call in_modules,$(GO) mod tidy)

## modules: print MODULES (.ci/run reads the list from here).
modules:
	@echo $(MODULES)
