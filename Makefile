# watchtree — the two commands a new machine needs are `make demo` and `make test`.
GO       ?= go
PKGS     ?= ./...
GOBIN    ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION ?= v1.36.12
STATICCHECK_VERSION   ?= v0.8.2

.PHONY: all test demo bench bench-mongosim bench-snapshot snapshot-50k proto lint vet fmt mongosim tools

all: lint test

## test: the whole test suite with the race detector (what CI runs).
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## demo: the end-to-end demo on the embedded mongosim (or MONGODB_URI when set); DEMO_FLAGS
## passes flags, e.g. DEMO_FLAGS='--db mydemo' (go run ./cmd/demo --help lists them).
demo:
	$(GO) run ./cmd/demo $(DEMO_FLAGS)

## bench: every benchmark, reported with its figures.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

## bench-snapshot: the snapshot benchmarks (throughput against a raw find loop, resume).
bench-snapshot:
	$(GO) test -run '^$$' -bench 'BenchmarkSnapshot' -benchtime 3x -timeout 30m ./test/bench/

## snapshot-50k: the snapshot-then-stream integration test with 50,000 existing documents.
snapshot-50k:
	WATCHTREE_IT_SNAPSHOT_DOCS=50000 $(GO) test -race -count=1 -timeout 20m -run 'TestSnapshotThenStream$$' -v ./test/integration/

## bench-mongosim: the simulator's benchmarks only.
bench-mongosim:
	$(GO) test -run '^$$' -bench . -benchmem ./test/mongosim/

## mongosim: run the simulator standalone on port 27017.
mongosim:
	$(GO) run ./cmd/mongosim --port 27017

## proto: regenerate messages/ from proto/ (needs protoc; protoc-gen-go is installed here).
proto:
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	PATH="$(GOBIN):$$PATH" protoc --proto_path=proto --go_out=. --go_opt=module=github.com/watchtree/watchtree \
		$$(find proto -name '*.proto')

## lint: gofmt, go vet and staticcheck.
lint: fmt vet
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
