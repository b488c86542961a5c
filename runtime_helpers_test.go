package watchtree

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/watchtree/watchtree/internal/protocheck"
	"github.com/watchtree/watchtree/internal/testenv"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestMain fails the package's tests if any goroutine (a runtime's observer queue, a stream
// tree) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rtWait bounds every wait of the runtime tests; nothing sleeps, they poll with a deadline.
const rtWait = 20 * time.Second

// rtEnv is one test's server (nil against a real replica set), client and database.
type rtEnv struct {
	srv    *mongosim.Server
	client *mongo.Client
	db     string
}

// newRTEnv connects to testenv.URIEnv's replica set when set, else starts a mongosim, with a
// database unique to the test.
func newRTEnv(t *testing.T) *rtEnv {
	te := testenv.New(t, "wt_rt_")
	return &rtEnv{srv: te.Srv, client: te.Client, db: te.DB}
}

// needSim skips t against a real replica set: it needs mongosim's hooks.
func (e *rtEnv) needSim(t *testing.T) { (&testenv.Env{Srv: e.srv}).NeedSim(t) }

func (e *rtEnv) coll(name string) *mongo.Collection { return e.client.Database(e.db).Collection(name) }

// newRuntime creates and starts a runtime on e's database with a recording observer; edit may
// change the Config. The runtime is stopped when t ends (before the client disconnects).
func (e *rtEnv) newRuntime(t *testing.T, edit func(*Config)) (*Runtime, *obsRecorder) {
	t.Helper()
	rec := &obsRecorder{}
	cfg := Config{Client: e.client, Database: e.db, Observer: rec, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	checkProtocol(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), rtWait)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return rt, rec
}

// obsRecorder is an Observer that keeps every event.
type obsRecorder struct {
	mu     sync.Mutex
	events []observe.Event
}

func (r *obsRecorder) OnEvent(ev observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *obsRecorder) all() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Event(nil), r.events...)
}

// count returns how many recorded events match.
func (r *obsRecorder) count(match func(observe.Event) bool) int {
	n := 0
	for _, ev := range r.all() {
		if match(ev) {
			n++
		}
	}
	return n
}

func isEvent[E observe.Event](ev observe.Event) bool {
	_, ok := ev.(E)
	return ok
}

// waitFor polls cond every millisecond until it holds, failing t after rtWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rtWait)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", rtWait, what)
		}
		<-tick.C
	}
}

// waitState polls the handle's status until it is in state want.
func waitState(t *testing.T, h *Handle, want StreamState) StreamStatus {
	t.Helper()
	var st StreamStatus
	waitFor(t, "stream "+h.Name()+" "+string(want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), rtWait)
		defer cancel()
		var err error
		st, err = h.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		return st.State == want
	})
	return st
}

// order is the document type of the tests.
type order struct {
	ID     int    `bson:"_id"`
	Item   string `bson:"item"`
	Qty    int    `bson:"qty"`
	Poison bool   `bson:"poison,omitempty"`
}

// seen records handled events by ID, counting redeliveries.
type seen struct {
	mu    sync.Mutex
	byID  map[string]int
	order []string // operation:doc id, in handling order
}

func newSeen() *seen { return &seen{byID: map[string]int{}} }

func (s *seen) add(ev *Event[order], what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[ev.ID()]++
	s.order = append(s.order, what)
}

func (s *seen) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

func (s *seen) dups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.byID {
		n += c - 1
	}
	return n
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	t.Cleanup(cancel)
	return ctx
}

// mustStreams returns rt.Streams, failing the test on an error.
func mustStreams(t *testing.T, rt *Runtime) []StreamStatus {
	t.Helper()
	sts, err := rt.Streams(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return sts
}

// checkProtocol fails the test when an actor of any of rt's stream trees sends another actor a
// message that is not protobuf (what an actor sends itself may be plain Go).
func checkProtocol(t *testing.T, rt *Runtime) {
	rt.e.UseTreeSenderMiddleware(protocheck.SenderMiddleware(func(v protocheck.Violation) {
		t.Errorf("%v sent %v a non-protobuf message %T", v.From, v.To, v.Message)
	}))
}
