package watchtree_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxPublicSurface bounds the exported identifiers of the library's importable packages (see
// publicSurface for what counts). It was 843 before the engine, the policies, the console's server
// side and the tree's private messages moved behind internal/; 567 after; 543 once the failure
// reasons and sentinels of the tree (internal/treekit), the on-demand reply codes, the snapshot
// status reading (internal/streamstatus) and mongostore's index names left the public packages;
// 546 with Runtime.ReplayWith, ReplayOptions and console.Client.Replay (a replay that re-reads
// the document); 555 with Handle.AwaitCaughtUp (its request, reply and cluster time,
// ErrStandby) and the NamespaceMissing warning (its event, kind and StatusReply.warnings); 566 with
// the OpenTelemetry adapter (its Options, Source, Telemetry and their functions) and the
// observe.HandlerTracer it needs (the interface, HandlerCall, ErrHandlerAborted); 570 with
// ServerReadings and Runtime.Readings (the console and /metrics answer from memory while MongoDB
// is down) and the metrics adapter's Attach errors (ErrNotAttached, ErrAttached); 577 with
// positions that never move backward (store.ErrBackward, ComparePositions, DescribePosition,
// Checkpoint.Rewind, and the CheckpointRefused event and kind); 579 with Config.Clock's
// types, Clock and Timer (for tests that inject a clock); 583 with
// shared cursors (CursorMode, its String, Dedicated and Shared); 587 with the CursorChanged
// event (the event, its kind) and StreamStatus.Cursor; 588 with CursorDefault (shared cursors
// by default, Dedicated the opt-out); 589 with Version (one module version for the console and
// both metric adapters); 588 with store.DeadLetterCounter folded into DeadLetterStore; 601 with
// the broker sinks (issue 41): sink's contract (Handler, Publisher, Message, Options,
// DefaultSubject, ErrTooLarge), its suite sinktest (Run, Broker, Received) and the JetStream
// sink (natssink.New, Publisher and its Publish, KeyHeader); 603 with dispatcher.LaneOf and
// dispatcher.EventID (the exactly-once fences and applied records key on the dispatcher's own
// lane and event ID); 606 with TxBatchPolicy and the dispatcher's Batcher and BatchOutcome (a
// Transactional stream's batches); 613 with the Kafka sink (issue 41, slice 4: kafkasink.New,
// its Options, Publisher and its Publish and Close, EventIDHeader, and ValidTopic, which says
// whether a subject is a valid Kafka topic name); 621 with the RabbitMQ sink (issue 41, slice 3:
// rabbitmqsink.New, Options, Publisher and its Publish and Close, KeyHeader,
// DefaultMaxMessageSize, ErrUnroutable); 624 with ServerReadings declared in the root with its
// own Reading, DeadLetterCount and OplogReading (issue 40: an internal/readings alias before,
// whose nested types users could not name; the policies moved to the root at no cost); 633 with
// the tests every sink module runs, once in sinktest (Drill and its Run, DrillWorker, Relay and
// its Run, Throughput and its Run, ReplicaSet, PublishOne); 649 once no module imports another's
// internal/ packages (issue 40): store/leasewatch (Hub, its Watch and Notify, Feed: how a lease
// store implements WatchLease, for the Redis store too), the root's CheckpointAges
// (NewCheckpointAges, OnEvent, Age: the metric adapters' one checkpoint-age definition) and
// observe/observetest (Samples, EveryKind, Run with its Options, Order and Scenario, WaitFor,
// Wait: the exporters' shared test scenario); 678 with package status (issue 40: the one
// status type, Stream, Lease and Stop with their methods, the state, role and mode names, Local,
// Read, StateOf, RoleOf, SnapshotOf, NotRunningWhy and Row), which the root's StreamStatus,
// StreamState, LeaseStatus, StopReport and state and role names now alias; the internal reading
// it replaces was not counted; 680 with Stream.Role and RoleAllInstances (the metric adapters'
// one role label, which never calls a SingleLeader copy that is down a leader); 687 with the
// actors' DefaultConfig (six) and snapshot.DefaultOnDemandConfig (issue 40, defaults in one
// place: each is the one source of its actor's default values, which the engine builds the
// tree's configs from and the actor's New fills zero fields from); 702 with package clock
// (issue 40: internal/clock made public, so that Config.Clock's and the actors' Clock is
// documented and users' tests can drive the Fake: Clock, Timer, Monotonic, Mono, Real, Fake,
// NewFake and the Fake's eight methods), which the root's Clock and Timer now alias; 705 with
// package configerr (issue 40: ConfigError declared in a public leaf that internal/policy's
// validators, the actors' and the root's all create; its methods counted before, under
// internal/policy; new are Error, ErrInvalid, which the root's ErrInvalidConfig is, and
// InStream, the constructor of a stream's error whose name may be empty); 723 with messages'
// Outcome and StartKind (issue 40: the enums dispatcher.Router.Route returns and
// stream.Position.Kind holds, moved from the tree's private protocol so that outside code can
// implement a Router or a Watcher: two types, eleven values, their name and value maps and the
// file descriptor); 787 with package policy (issue 40: the policies in the actors' form, moved
// from internal/policy so that outside code can build an actor's Config: Retry, Restart,
// Checkpoint, Lease, Snapshot, StartPosition, HistoryLost, Invalidate with their enums,
// constructors, Validate and String, the Errors collector, and the functions the engine and the
// actors read the opaque values with; the default constants no other package names were
// unexported first); 805 with actors/streamtree (issue 40: the supervisor's contract with the
// actors it supervises, moved from internal/treekit so that outside code can implement or
// supervise a tree's actor and classify its failures: Incarnation, SetIncarnation,
// NotifyResubscribed, Fail, Failure and PanicError with their Error and Unwrap, AsError,
// TerminalOn, and the six sentinels the tree's actors fail with); 802 once RetryPolicy,
// RestartPolicy and CheckpointPolicy are aliases of policy.Retry, Restart and Checkpoint (issue
// 40: one declaration each, documented in package policy; the root's three Validate wrappers
// went); 798 once LeasePolicy, SnapshotPolicy, Balance and SnapshotMode are aliases of package
// policy's too (their Validate and String wrappers went); 779 once policy's plumbing (the Errors
// collector, WithDefaults, ValidateInto, Delay and the readers of the opaque values) went internal;
// 770 once the kinds those readers return (StartKind, HistoryLostKind) followed them.
// A change that grows the public API past the bound has to raise it here, on purpose and in
// review; a change that shrinks it lowers it.
const maxPublicSurface = 770

// TestPublicSurface keeps the public API small: it counts the exported identifiers of every
// importable package of the library and its adapters and fails above maxPublicSurface. The
// per-package counts are logged (go test -v -run TestPublicSurface).
func TestPublicSurface(t *testing.T) {
	counts, err := publicSurface(".")
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(counts))
	total := 0
	for dir, n := range counts {
		dirs = append(dirs, dir)
		total += n
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		t.Logf("%4d %s", counts[dir], dir)
	}
	t.Logf("%4d in %d packages", total, len(dirs))
	if len(dirs) < 10 {
		t.Fatalf("only %d packages found: the walk is broken", len(dirs))
	}
	if total > maxPublicSurface {
		t.Errorf("the public surface has %d exported identifiers, more than %d", total, maxPublicSurface)
	}
}

// publicSurface counts, per package directory below root, the exported identifiers a user can
// name: top-level types, functions, variables and constants, and the exported methods of
// exported types. Left out: internal/ (not importable), main packages, tests, examples/ and
// test/ (test/mongosim is a product of its own, with its own module; test/integration and
// test/bench are test code), and the methods protoc generates on every message and enum (Reset,
// String, ProtoReflect, Descriptor and a getter per field: they come with the type, which
// counts). A type of an internal package that a public package re-exports with an alias is
// public through it: its exported methods count, under the internal package's directory.
func publicSurface(root string) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	// aliased: internal import path → the type names public packages alias from it.
	aliased := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case name == "internal", name == "testdata", name == "node_modules", name == "examples",
				strings.HasPrefix(name, "."), path == filepath.Join(root, "test"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		generated := strings.HasSuffix(path, ".pb.go")
		dir := filepath.Dir(path)
		noteInternalAliases(f, aliased)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() {
					continue
				}
				if decl.Recv != nil && (generated || !exportedReceiver(decl.Recv.List[0].Type)) {
					continue
				}
				counts[dir]++
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							counts[dir]++
						}
					case *ast.ValueSpec:
						for _, name := range spec.Names {
							if name.IsExported() {
								counts[dir]++
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	const module = "github.com/watchtree/watchtree/"
	for path, types := range aliased {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, module)))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if ok && fn.Recv != nil && fn.Name.IsExported() && types[receiverName(fn.Recv.List[0].Type)] {
					counts[dir]++
				}
			}
		}
	}
	return counts, nil
}

// noteInternalAliases records in aliased the types f re-exports from internal packages
// (type X = pkg.Y, pkg imported from a path with an internal/ element).
func noteInternalAliases(f *ast.File, aliased map[string]map[string]bool) {
	internalAliases(f, func(_ *ast.TypeSpec, path, name string) {
		if aliased[path] == nil {
			aliased[path] = map[string]bool{}
		}
		aliased[path][name] = true
	})
}

// internalAliases calls found for every exported type f declares as an alias of a type of an
// internal package: the declaration, the package's import path and the aliased type's name.
func internalAliases(f *ast.File, found func(ts *ast.TypeSpec, path, name string)) {
	imports := map[string]string{} // local name → path
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			sel, ok := ts.Type.(*ast.SelectorExpr)
			if !ts.Assign.IsValid() || !ok || !ts.Name.IsExported() {
				continue
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || !strings.Contains(imports[pkg.Name], "/internal/") {
				continue
			}
			found(ts, imports[pkg.Name], sel.Sel.Name)
		}
	}
}

// TestNoExportedAliasOfInternal walks the root package's source: an exported type declared as an
// alias of a type of an internal/ package shows users `type X = internalpkg.Y` in go doc and
// nothing of its fields or values, which they cannot look up either. What users fill in is
// declared in the root, or in a public leaf package the root aliases (clock, configerr, status),
// with its docs. No exception is left.
func TestNoExportedAliasOfInternal(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	fset := token.NewFileSet()
	parsed := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		internalAliases(f, func(ts *ast.TypeSpec, path, name string) {
			found[ts.Name.Name] = fmt.Sprintf("%s: type %s = %s.%s", fset.Position(ts.Pos()), ts.Name.Name, path, name)
		})
	}
	if parsed < 10 {
		t.Fatalf("only %d files parsed: the walk is broken", parsed)
	}
	for _, where := range found {
		t.Errorf("%s: declare the type in the root (or a public leaf package it aliases) with its fields documented, not as an alias of an internal type", where)
	}
}

// receiverName returns the type name of a method's receiver (T, *T, T[P], *T[P]).
func receiverName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(t ast.Expr) bool { return ast.IsExported(receiverName(t)) }
