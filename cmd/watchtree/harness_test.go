package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

// The CLI's tests share one live runtime with its console (protoactor remote starts once per
// process: its Start replaces gRPC's global logger). They run against mongosim, or against the
// replica set of WATCHTREE_MONGODB_URI when it is set.

const (
	wait      = 20 * time.Second
	testToken = "s3cret-token"
)

type Order struct {
	ID   int64 `bson:"_id"`
	Fail bool  `bson:"fail,omitempty"`
}

// live is the shared runtime.
var live struct {
	rt     *watchtree.Runtime
	client *mongo.Client
	db     *mongo.Database
	addr   string

	mu         sync.Mutex
	deliveries map[string]map[int64]int // stream → _id → deliveries
	healthy    atomic.Bool              // "flaky" handles failing documents once healthy
}

func TestMain(m *testing.M) {
	before := goleak.IgnoreCurrent()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	// Every goroutine of the runtime, the console and the CLI's connections ends with them.
	if code == 0 {
		if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointManager).start.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left:", err)
			os.Exit(1)
		}
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			return 0, err
		}
		defer srv.Close()
		uri = srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return 0, err
	}
	defer client.Disconnect(context.Background())
	live.client = client
	live.db = client.Database(fmt.Sprintf("wt_cli_%d", time.Now().UnixNano()%1e9))
	defer live.db.Drop(context.Background())
	live.deliveries = map[string]map[int64]int{}
	rt, err := watchtree.New(watchtree.Config{
		Client: client, Database: live.db.Name(), InstanceID: "cli-test-instance",
		Console: watchtree.ConsoleConfig{Addr: "127.0.0.1:0", Token: testToken},
		// A released lease goes to the other instance (TestLeaseReleaseHandsOver): this one
		// stands by longer than the other polls.
		Lease: watchtree.LeasePolicy{StandbyPoll: 5 * time.Second, Balance: watchtree.BalanceOff},
	})
	if err != nil {
		return 0, err
	}
	if err := rt.Start(ctx); err != nil {
		return 0, err
	}
	live.rt, live.addr = rt, rt.ConsoleAddr()
	for _, name := range []string{"orders", "flaky", "spare"} {
		if _, err := rt.Spawn(ctx, stream(name)); err != nil {
			return 0, err
		}
	}
	code := m.Run()
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	defer scancel()
	if err := rt.Stop(sctx); err != nil {
		return 0, fmt.Errorf("Runtime.Stop: %w", err)
	}
	return code, nil
}

func stream(name string) watchtree.Stream[Order] {
	return watchtree.Stream[Order]{
		Name: name, Collection: name,
		Retry: watchtree.RetryPolicy{MaxAttempts: 2, InitialDelay: 10 * time.Millisecond},
		OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
			if ev.FullDocument.Fail && !live.healthy.Load() {
				return errors.New("order refused")
			}
			live.mu.Lock()
			defer live.mu.Unlock()
			if live.deliveries[name] == nil {
				live.deliveries[name] = map[int64]int{}
			}
			live.deliveries[name][ev.FullDocument.ID]++
			return nil
		},
	}
}

func delivered(stream string, id int64) int {
	live.mu.Lock()
	defer live.mu.Unlock()
	return live.deliveries[stream][id]
}

func insert(t *testing.T, coll string, docs ...Order) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, d := range docs {
		if _, err := live.db.Collection(coll).InsertOne(ctx, d); err != nil {
			t.Fatalf("insert %v: %v", d, err)
		}
	}
}

// cli runs the CLI in-process against the live console and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--addr", live.addr}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	code = run(ctx, full, &out, &errb)
	return code, out.String(), errb.String()
}

// cliJSON runs a verb with -o json, requires exit 0 and decodes the output into m.
func cliJSON(t *testing.T, m proto.Message, args ...string) {
	t.Helper()
	code, out, errs := cli(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("watchtree %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	if err := unmarshalCLIJSON([]byte(out), m); err != nil {
		t.Fatalf("watchtree %s: output is not %T JSON: %v\n%s", strings.Join(args, " "), m, err, out)
	}
}

// unmarshalCLIJSON decodes the CLI's JSON into m: protojson, once the enums' short names are
// their full names again (protojson reads 64-bit numbers as numbers already).
func unmarshalCLIJSON(b []byte, m proto.Message) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return err
	}
	fullEnums(v, m.ProtoReflect().Descriptor())
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(b, m)
}

// fullEnums rewrites, in the decoded JSON v of a message md, every enum's short name
// ("running") to its full one (SUPERVISOR_STATE_RUNNING).
func fullEnums(v any, md protoreflect.MessageDescriptor) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, val := range obj {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			continue
		}
		conv := func(x any) any {
			switch fd.Kind() {
			case protoreflect.EnumKind:
				if s, ok := x.(string); ok {
					return enumPrefix(string(fd.Enum().Name())) + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
				}
			case protoreflect.MessageKind:
				fullEnums(x, fd.Message())
			}
			return x
		}
		if list, ok := val.([]any); ok {
			for i := range list {
				list[i] = conv(list[i])
			}
			continue
		}
		obj[k] = conv(val)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func status(t *testing.T, name string) watchtree.StreamStatus {
	t.Helper()
	h, err := live.rt.Handle(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var _ = bson.D{}
