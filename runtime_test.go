package watchtree

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// ordersStream returns a stream over the "orders" collection recording every handled event.
func ordersStream(name string, s *seen) Stream[order] {
	return Stream[order]{
		Name:       name,
		Collection: "orders",
		Checkpoint: CheckpointPolicy{SaveInterval: 20 * time.Millisecond},
		Restart:    RestartPolicy{InitialDelay: 10 * time.Millisecond},
		OnInsert: func(_ context.Context, ev *Event[order]) error {
			s.add(ev, fmt.Sprintf("insert:%d:%s", ev.FullDocument.ID, ev.FullDocument.Item))
			return nil
		},
		OnChange: func(_ context.Context, ev *Event[order]) error {
			s.add(ev, string(ev.OperationType()))
			return nil
		},
	}
}

func insertOrders(t *testing.T, e *rtEnv, from, to int) {
	t.Helper()
	docs := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		docs = append(docs, order{ID: i, Item: fmt.Sprintf("item-%d", i), Qty: i})
	}
	if _, err := e.coll("orders").InsertMany(testCtx(t), docs); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// TestRuntimeTypedDispatch: typed handlers get their operation types decoded into T, the
// fallback OnChange gets the rest, end to end through the whole tree.
func TestRuntimeTypedDispatch(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	s := newSeen()
	h, err := rt.Spawn(testCtx(t), Stream[order]{
		Name:         "typed",
		Collection:   "orders",
		FullDocument: FullDocumentUpdateLookup,
		OnInsert: func(_ context.Context, ev *Event[order]) error {
			s.add(ev, fmt.Sprintf("insert:%s:%d", ev.FullDocument.Item, ev.FullDocument.Qty))
			return nil
		},
		OnUpdate: func(_ context.Context, ev *Event[order]) error {
			if !ev.Changed("qty") {
				return Permanent(errors.New("update without qty"))
			}
			s.add(ev, fmt.Sprintf("update:%s:%d", ev.FullDocument.Item, ev.FullDocument.Qty))
			return nil
		},
		OnChange: func(_ context.Context, ev *Event[order]) error {
			s.add(ev, "change:"+string(ev.OperationType()))
			return nil
		},
	})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if h.Name() != "typed" {
		t.Fatalf("Name = %q", h.Name())
	}
	waitState(t, h, StateRunning)
	ctx := testCtx(t)
	c := e.coll("orders")
	if _, err := c.InsertOne(ctx, order{ID: 1, Item: "book", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	// updateLookup reads the document when the event is read: delete only once it was handled.
	if err := h.AwaitCaughtUp(ctx); err != nil {
		t.Fatalf("AwaitCaughtUp after the insert and the update: %v", err)
	}
	if n := s.distinct(); n != 2 {
		t.Fatalf("caught up with %d of the 2 events handled", n)
	}
	if _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 events", func() bool { return s.distinct() == 3 })
	want := []string{"insert:book:1", "update:book:5", "change:delete"}
	if got := s.list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("handled %v, want %v", got, want)
	}
	if n := rec.count(isEvent[observe.Started]); n < 1 {
		t.Fatalf("no Started event: %v", rec.all())
	}
	waitFor(t, "settled counts", func() bool {
		st := mustStreams(t, rt)
		return len(st) == 1 && st[0].Handled == 3 && st[0].Settled == 3
	})
	st := mustStreams(t, rt)[0]
	if st.Name != "typed" || st.State != StateRunning {
		t.Fatalf("Streams()[0] = %+v", st)
	}
}

// TestRuntimeSpawnValidation: Spawn fails fast, naming the field and the rule.
func TestRuntimeSpawnValidation(t *testing.T) {
	e := newRTEnv(t)
	noop := func(context.Context, *Event[order]) error { return nil }

	unstarted, err := New(Config{Client: e.client, Database: e.db})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unstarted.Spawn(testCtx(t), Stream[order]{Name: "x", Collection: "c", OnChange: noop}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Spawn before Start: %v, want ErrNotStarted", err)
	}
	if _, err := unstarted.Checkpoints(testCtx(t), "x"); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Checkpoints before Start: %v, want ErrNotStarted", err)
	}
	if err := unstarted.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of an unstarted runtime: %v", err)
	}

	rt, _ := e.newRuntime(t, nil)
	if err := rt.Start(testCtx(t)); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want ErrAlreadyStarted", err)
	}
	noDB, _ := e.newRuntime(t, func(c *Config) { c.Database = "" })
	if _, err := rt.Spawn(testCtx(t), Stream[order]{Name: "dup", Collection: "c", OnChange: noop}); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	cases := []struct {
		name    string
		rt      *Runtime
		spec    Spec
		field   string
		rule    string
		matches error
	}{
		{"duplicate", rt, Stream[order]{Name: "dup", Collection: "c", OnChange: noop}, "Name", "already spawned", ErrDuplicateStream},
		{"no handler", rt, Stream[order]{Name: "h", Collection: "c"}, "OnChange", "no handler", ErrNoHandler},
		{"bad name", rt, Stream[order]{Name: "a b", Collection: "c", OnChange: noop}, "Name", "[A-Za-z0-9._-]", ErrInvalidConfig},
		{"negative lanes", rt, Stream[order]{Name: "l", Collection: "c", Lanes: -1, OnChange: noop}, "Lanes", "got -1", ErrInvalidConfig},
		{"NaN multiplier", rt, Stream[order]{Name: "m", Collection: "c", Retry: RetryPolicy{Multiplier: math.NaN()}, OnChange: noop}, "Retry.Multiplier", "finite", ErrInvalidConfig},
		{"negative restarts", rt, Stream[order]{Name: "r", Collection: "c", Restart: RestartPolicy{MaxAttempts: -2}, OnChange: noop}, "Restart.MaxAttempts", "got -2", ErrInvalidConfig},
		{"bad pipeline", rt, Stream[order]{Name: "p", Collection: "c", Pipeline: bson.A{bson.D{{Key: "$out", Value: "x"}}}, OnChange: noop}, "Pipeline[0]", "$out", ErrInvalidConfig},
		{"collection without database", noDB, Stream[order]{Name: "d", Collection: "c", OnChange: noop}, "Database", "must be set", ErrInvalidConfig},
		{"cluster without database", noDB, Stream[order]{Name: "cl", OnChange: noop}, "Database", "must be set", ErrInvalidConfig},
		{"nil spec", rt, nil, "Spec", "must not be nil", ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.rt.Spawn(testCtx(t), tc.spec)
			if err == nil {
				t.Fatal("Spawn succeeded")
			}
			if !errors.Is(err, tc.matches) {
				t.Fatalf("%v does not match %v", err, tc.matches)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Rule, tc.rule) {
				t.Fatalf("error %q: want field %q and rule containing %q", err, tc.field, tc.rule)
			}
		})
	}
	if _, err := Props(rt, Stream[order]{Name: "dup", Collection: "c", OnChange: noop}); !errors.Is(err, ErrDuplicateStream) {
		t.Fatalf("Props duplicate: %v", err)
	}
	if len(mustStreams(t, rt)) != 1 {
		t.Fatalf("failed spawns registered streams: %+v", mustStreams(t, rt))
	}
	if _, err := rt.Handle("nope"); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("Handle(nope): %v", err)
	}
	ctx := testCtx(t)
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := rt.Spawn(testCtx(t), Stream[order]{Name: "late", Collection: "c", OnChange: noop}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Spawn after Stop: %v, want ErrStopped", err)
	}
	if err := rt.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
}

// TestRuntimeStopIsGraceful: Stop drains and flushes, so the checkpoint resumes exactly after
// the last handled event; a new runtime then handles every later event, none twice, none skipped.
func TestRuntimeStopIsGraceful(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	s := newSeen()
	spec := ordersStream("graceful", s)
	spec.Checkpoint = CheckpointPolicy{SaveEvery: 1000, SaveInterval: time.Hour} // only Stop flushes
	h, err := rt.Spawn(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 50)
	waitFor(t, "50 events handled", func() bool { return s.distinct() == 50 })
	if err := rt.Stop(testCtx(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := rec.count(func(ev observe.Event) bool {
		st, ok := ev.(observe.Stopped)
		return ok && st.Reason == observe.Graceful && st.Cause == nil
	}); n != 1 {
		t.Fatalf("want one Stopped{Graceful}, got %d: %v", n, rec.all())
	}
	if err := rt.Stop(testCtx(t)); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// The stored checkpoint resumes right after event 49: the next event is the marker.
	ctx := testCtx(t)
	ms, err := mongostore.New(e.client.Database(e.db), mongostore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, ok, err := ms.Load(ctx, store.Scope{Stream: "graceful", Instance: rt.InstanceName()})
	if err != nil || !ok {
		t.Fatalf("Load: %v %v", ok, err)
	}
	cs, err := e.coll("orders").Watch(ctx, []bson.D{}, options.ChangeStream().SetResumeAfter(cp.Token))
	if err != nil {
		t.Fatalf("resume at the checkpoint: %v", err)
	}
	defer cs.Close(context.Background())
	insertOrders(t, e, 1000, 1001)
	if !cs.Next(ctx) {
		t.Fatalf("no event after the checkpoint: %v", cs.Err())
	}
	if id := cs.Current.Lookup("documentKey", "_id").AsInt64(); id != 1000 {
		t.Fatalf("first event after the checkpoint is document %d, want the marker 1000 (checkpoint %s)", id, cp.Source)
	}

	// A new runtime resumes: every later event once, nothing replayed.
	insertOrders(t, e, 50, 70)
	rt2, _ := e.newRuntime(t, nil)
	h2, err := rt2.Spawn(testCtx(t), ordersStream("graceful", s))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h2, StateRunning)
	waitFor(t, "71 events handled", func() bool { return s.distinct() == 71 })
	if d := s.dups(); d != 0 {
		t.Fatalf("%d events handled twice after a graceful stop", d)
	}
}

// TestRuntimeHandleStopStartRestart: a handle stops its stream (drained, flushed), starts it
// again from the checkpoint, and restarts it in place.
func TestRuntimeHandleStopStartRestart(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	s := newSeen()
	h, err := rt.Spawn(testCtx(t), ordersStream("ctl", s))
	if err != nil {
		t.Fatal(err)
	}
	st := waitState(t, h, StateRunning)
	if st.Incarnation != 1 {
		t.Fatalf("incarnation %d, want 1", st.Incarnation)
	}
	insertOrders(t, e, 0, 10)
	waitFor(t, "10 events", func() bool { return s.distinct() == 10 })

	ctx := testCtx(t)
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st, err = h.Status(ctx)
	if err != nil || st.State != StateStopped {
		t.Fatalf("status after Stop: %+v, %v", st, err)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	insertOrders(t, e, 10, 20) // written while stopped
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Start returns once the cursor is open, as Spawn does: no wait is needed.
	if st, err := h.Status(ctx); err != nil || st.State != StateRunning {
		t.Fatalf("status right after Start: %+v, %v; want running", st, err)
	}
	waitFor(t, "20 events", func() bool { return s.distinct() == 20 })
	if d := s.dups(); d != 0 {
		t.Fatalf("%d events redelivered after a graceful handle stop", d)
	}

	before, err := h.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Incarnation != 2 { // the start after the stop was incarnation 2 of the same tree
		t.Fatalf("incarnation after Stop and Start: %d, want 2", before.Incarnation)
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if st, err := h.Status(ctx); err != nil || st.State != StateRunning || st.Incarnation != 3 {
		t.Fatalf("status right after Restart: %+v, %v; want incarnation 3 running", st, err)
	}
	insertOrders(t, e, 20, 25)
	waitFor(t, "25 events", func() bool { return s.distinct() == 25 })
	if err := h.Start(ctx); err != nil { // already running: no-op
		t.Fatalf("Start of a running stream: %v", err)
	}
}

// TestRuntimeRestartsAfterCursorDeath: a getMore failing without the resumable label kills the
// cursor; the supervisor restarts the stream after the RestartPolicy delay and nothing is lost.
func TestRuntimeRestartsAfterCursorDeath(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	rt, rec := e.newRuntime(t, nil)
	s := newSeen()
	// A dedicated cursor: its death is the stream's (a shared cursor's death detaches its
	// members instead, test/integration TestSharedCursorChangesReported).
	spec := ordersStream("dies", s)
	spec.Cursor = Dedicated
	h, err := rt.Spawn(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 5)
	waitFor(t, "5 events", func() bool { return s.distinct() == 5 })
	err = e.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 6}}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Restarted event", func() bool { return rec.count(isEvent[observe.Restarted]) > 0 })
	insertOrders(t, e, 5, 10)
	waitFor(t, "10 events", func() bool { return s.distinct() == 10 })
	st := waitState(t, h, StateRunning)
	if st.Deaths != 1 || st.Restarts != 1 || st.Incarnation != 2 {
		t.Fatalf("status %+v: want 1 death, 1 restart, incarnation 2", st)
	}
	var crashed []observe.Stopped
	for _, ev := range rec.all() {
		if sv, ok := ev.(observe.Stopped); ok && sv.Reason == observe.Crashed {
			crashed = append(crashed, sv)
		}
	}
	if len(crashed) != 1 || crashed[0].Terminal || crashed[0].Cause == nil {
		t.Fatalf("want one non-terminal Stopped{Crashed}, got %+v", crashed)
	}
	// The backoff is reported as it starts: which attempt, and how long until it.
	if c := crashed[0]; c.Attempt != 1 || c.RestartIn <= 0 || !strings.Contains(c.String(), "restart attempt 1 in ") {
		t.Errorf("Stopped{Crashed} = attempt %d, restart in %v (%q); want attempt 1 with its delay", c.Attempt, c.RestartIn, c)
	}
}

// TestRuntimeDeadLettersReplay: a poison event is dead-lettered (the stream goes on), listed
// through the API, replayed: a failing replay keeps the record and counts it, a successful one
// deletes it.
func TestRuntimeDeadLettersReplay(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	s := newSeen()
	fixed := make(chan struct{})
	h, err := rt.Spawn(testCtx(t), Stream[order]{
		Name:       "poison",
		Collection: "orders",
		Retry:      RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, DisableJitter: true},
		OnInsert: func(_ context.Context, ev *Event[order]) error {
			if ev.FullDocument.Poison {
				select {
				case <-fixed:
				default:
					panic("poison order")
				}
			}
			s.add(ev, fmt.Sprint(ev.FullDocument.ID))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	ctx := testCtx(t)
	if _, err := e.coll("orders").InsertMany(ctx, []any{order{ID: 1}, order{ID: 2, Poison: true}, order{ID: 3}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the healthy events", func() bool { return s.distinct() == 2 })
	waitFor(t, "a DeadLettered event", func() bool { return rec.count(isEvent[observe.DeadLettered]) == 1 })
	for _, ev := range rec.all() {
		if d, ok := ev.(observe.DeadLettered); ok && (OperationType(d.OperationType) != OpInsert || d.Attempts != 2 || d.Dropped) {
			t.Fatalf("DeadLettered %+v: want an insert, 2 attempts, written", d)
		}
	}

	dls, err := rt.DeadLetters(ctx, "poison", 0)
	if err != nil {
		t.Fatalf("DeadLetters: %v", err)
	}
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if dl.Stream != "poison" || dl.OperationType != OpInsert || dl.Attempts != 2 || dl.ErrorType != "panic" ||
		!strings.Contains(dl.Stack, "runtime_test.go") || len(dl.Event) == 0 || dl.ID == "" {
		t.Fatalf("dead letter %+v", dl)
	}

	err = rt.Replay(ctx, "poison", dl.ID)
	if err == nil || !strings.Contains(err.Error(), "handler panicked: poison order") {
		t.Fatalf("failing Replay: %v", err)
	}
	if strings.Contains(err.Error(), "\n") { // the stack is logged and kept in the record, not in the error
		t.Fatalf("a panicking replay's error has more than one line:\n%v", err)
	}
	dls, err = rt.DeadLetters(ctx, "poison", 10)
	if err != nil || len(dls) != 1 || dls[0].ReplayCount != 1 {
		t.Fatalf("after a failed replay: %+v, %v", dls, err)
	}

	close(fixed)
	if err := rt.Replay(ctx, "poison", dl.ID); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if s.distinct() != 3 {
		t.Fatalf("replayed event not handled: %v", s.list())
	}
	if dls, err := rt.DeadLetters(ctx, "poison", 10); err != nil || len(dls) != 0 {
		t.Fatalf("after a successful replay: %+v, %v", dls, err)
	}
	if err := rt.Replay(ctx, "poison", dl.ID); err == nil {
		t.Fatal("replaying a deleted dead letter succeeded")
	}
	if err := rt.Replay(ctx, "unknown", dl.ID); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("Replay on an unknown stream: %v", err)
	}
	// Dead letters are read through the stream that wrote them, even with Config.Database set.
	if dls, err := rt.DeadLetters(ctx, "unknown", 0); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("DeadLetters of an unknown stream: %+v, %v; want ErrUnknownStream", dls, err)
	}
}

// TestRuntimeProps: the supervisor's props run the stream under the caller's own actor; the
// runtime's handle reaches it and Runtime.Stop stops it.
func TestRuntimeProps(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	s := newSeen()
	props, err := Props(rt, ordersStream("user-owned", s))
	if err != nil {
		t.Fatalf("Props: %v", err)
	}
	pid, err := rt.e.ActorSystem().Root.SpawnNamed(props, "my-supervisor")
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.Handle("user-owned")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 3)
	waitFor(t, "3 events", func() bool { return s.distinct() == 3 })
	ctx := testCtx(t)
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitState(t, h, StateStopped)
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitState(t, h, StateRunning)
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("runtime Stop: %v", err)
	}
	if h.e.SupervisorPID() != nil {
		t.Fatalf("supervisor %v still tracked after Stop", pid)
	}
}

// TestRuntimeStopLeavesNoGoroutine: after Stop (and closing the client and the server) no
// goroutine of the runtime, the actors or the driver is left.
func TestRuntimeStopLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Run("run", func(t *testing.T) {
		e := newRTEnv(t)
		rt, _ := e.newRuntime(t, nil)
		var all []*seen
		for i := range 3 {
			s := newSeen()
			all = append(all, s)
			h, err := rt.Spawn(testCtx(t), ordersStream(fmt.Sprintf("leak-%d", i), s))
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, h, StateRunning)
		}
		insertOrders(t, e, 0, 20)
		waitFor(t, "20 events per stream", func() bool {
			return all[0].distinct() == 20 && all[1].distinct() == 20 && all[2].distinct() == 20
		})
	})
	goleak.VerifyNone(t, before)
}

// TestRuntimeObserverEvents: the tree's reports reach the Observer as typed events, and an
// Observer that panics on every event breaks nothing.
func TestRuntimeObserverEvents(t *testing.T) {
	e := newRTEnv(t)
	var panics obsRecorder
	rt, rec := e.newRuntime(t, func(c *Config) {
		inner := c.Observer
		c.Observer = observe.Multi(inner, observe.Func(func(ev observe.Event) {
			panics.OnEvent(ev)
			panic("observer bug")
		}))
	})
	s := newSeen()
	h, err := rt.Spawn(testCtx(t), ordersStream("observed", s))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 5)
	waitFor(t, "5 events", func() bool { return s.distinct() == 5 })
	waitFor(t, "a Checkpointed event covering events", func() bool {
		return rec.count(func(ev observe.Event) bool {
			c, ok := ev.(observe.Checkpointed)
			return ok && c.Settled > 0 && len(c.Token) > 0
		}) > 0
	})
	ctx := testCtx(t)
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two Started events", func() bool { return rec.count(isEvent[observe.Started]) == 2 })
	var positions []string
	for _, ev := range rec.all() {
		if st, ok := ev.(observe.Started); ok {
			positions = append(positions, st.Position)
			if st.Stream != "observed" || st.Time.IsZero() {
				t.Fatalf("Started %+v", st)
			}
		}
	}
	if strings.Join(positions, ",") != "initial,checkpoint" {
		t.Fatalf("Started positions %v, want initial,checkpoint", positions)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Stopped{Graceful}", func() bool {
		return rec.count(func(ev observe.Event) bool {
			st, ok := ev.(observe.Stopped)
			return ok && st.Reason == observe.Graceful
		}) == 1
	})
	st := mustStreams(t, rt)[0]
	if st.State != StateStopped || st.Handled != 5 || st.Checkpoint == nil || st.CheckpointAt.IsZero() {
		t.Fatalf("Streams()[0] = %+v", st)
	}
	if rt.ObserverStats().Panicked == 0 || panics.count(func(observe.Event) bool { return true }) != len(rec.all()) {
		t.Fatalf("panicking observer: %d panics, %d vs %d events", rt.ObserverStats().Panicked, len(panics.all()), len(rec.all()))
	}
}

// TestRuntimeStopBoundedByContext: a handler that never returns cannot hold Stop past its
// context: Stop returns DeadlineExceeded, the handler's context is cancelled, the event stays
// unsettled and is delivered again by the next runtime.
func TestRuntimeStopBoundedByContext(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	stuck := make(chan struct{}, 1)
	var cancelled sync.WaitGroup
	cancelled.Add(1)
	var once sync.Once
	h, err := rt.Spawn(testCtx(t), Stream[order]{
		Name: "stuck", Collection: "orders",
		OnInsert: func(ctx context.Context, ev *Event[order]) error {
			stuck <- struct{}{}
			<-ctx.Done()
			once.Do(cancelled.Done)
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 1)
	<-stuck
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = rt.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Stop took %v", d)
	}
	cancelled.Wait() // the handler's context was cancelled

	s := newSeen()
	rt2, _ := e.newRuntime(t, nil)
	if _, err := rt2.Spawn(testCtx(t), ordersStream("stuck", s)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the unsettled event redelivered", func() bool { return s.distinct() == 1 })
}

// TestRuntimeWideStreamsSkipStoreCollections: database- and cluster-wide streams whose scope
// holds the stores never see watchtree's own writes (checkpoints, dead letters), which would
// otherwise feed back into the stream.
func TestRuntimeWideStreamsSkipStoreCollections(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	var mu sync.Mutex
	nss := map[string]map[string]int{}
	handler := func(stream string) Handler[bson.Raw] {
		return func(_ context.Context, ev *Event[bson.Raw]) error {
			mu.Lock()
			defer mu.Unlock()
			if nss[stream] == nil {
				nss[stream] = map[string]int{}
			}
			nss[stream][ev.Namespace().String()]++
			if ev.Namespace().Coll == "poison" {
				return Permanent(errors.New("poison")) // a dead-letter write in the store database
			}
			return nil
		}
	}
	for _, spec := range []Stream[bson.Raw]{
		{Name: "db-wide", Database: e.db, OnChange: handler("db-wide")},
		{Name: "cluster-wide", OnChange: handler("cluster-wide")},
	} {
		spec.Checkpoint = CheckpointPolicy{SaveEvery: 1, SaveInterval: 5 * time.Millisecond}
		h, err := rt.Spawn(testCtx(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, h, StateRunning)
	}
	insertOrders(t, e, 0, 5)
	if _, err := e.coll("poison").InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both dead letters and checkpoints of both streams", func() bool {
		return rec.count(isEvent[observe.DeadLettered]) == 2 &&
			rec.count(func(ev observe.Event) bool {
				c, ok := ev.(observe.Checkpointed)
				return ok && c.Settled > 0 && c.Stream == "db-wide"
			}) > 0 &&
			rec.count(func(ev observe.Event) bool {
				c, ok := ev.(observe.Checkpointed)
				return ok && c.Settled > 0 && c.Stream == "cluster-wide"
			}) > 0
	})
	insertOrders(t, e, 5, 6) // a marker: once it is seen, every earlier store write was too
	orders := e.db + ".orders"
	waitFor(t, "the marker", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return nss["db-wide"][orders] == 6 && nss["cluster-wide"][orders] == 6
	})
	mu.Lock()
	defer mu.Unlock()
	for stream, m := range nss {
		for ns := range m {
			if strings.Contains(ns, "._wt_") {
				t.Errorf("stream %s saw an event of %s: %v", stream, ns, m)
			}
		}
	}
}

// TestRuntimeEmbeddedActorSystem: with Config.ActorSystem the trees run in the user's system,
// which Stop leaves running; two runtimes share it without name clashes.
func TestRuntimeEmbeddedActorSystem(t *testing.T) {
	e := newRTEnv(t)
	sys := engine.NewActorSystem(zap.NewNop())
	defer sys.Shutdown()
	s1, s2 := newSeen(), newSeen()
	rt1, _ := e.newRuntime(t, func(c *Config) { c.ActorSystem = sys })
	rt2, _ := e.newRuntime(t, func(c *Config) { c.ActorSystem = sys; c.Database = e.db + "_2" })
	h1, err := rt1.Spawn(testCtx(t), ordersStream("same", s1))
	if err != nil {
		t.Fatal(err)
	}
	spec2 := ordersStream("same", s2)
	spec2.Database = e.db // watch the same collection; the stores live in the other database
	h2, err := rt2.Spawn(testCtx(t), spec2)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h1, StateRunning)
	waitState(t, h2, StateRunning)
	insertOrders(t, e, 0, 3)
	waitFor(t, "3 events in both", func() bool { return s1.distinct() == 3 && s2.distinct() == 3 })
	if err := rt1.Stop(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	insertOrders(t, e, 3, 4)
	waitFor(t, "the other runtime goes on", func() bool { return s2.distinct() == 4 })
	res, err := sys.Root.RequestFuture(h2.e.SupervisorPID(), &messages.StatusRequest{}, rtWait).Result()
	if err != nil {
		t.Fatalf("the shared system stopped with the first runtime: %v", err)
	}
	if st, ok := res.(*messages.StatusReply); !ok || st.GetStream() != "same" {
		t.Fatalf("status reply %v", res)
	}
}

// TestRuntimePipelineRemovingIDIsTerminal: a Pipeline that drops the event's _id makes the server
// fail with ChangeStreamFatalError (280) — the code it also uses for a resume token no longer
// found. It is a configuration error: the stream crashes terminally at once, and OnHistoryLost
// (here ResumeFromNow) must not treat it as lost history and skip events behind a gap record.
// Spawn refuses such a stage (TestPipelineKeepsID); the test puts it past the check, into the
// compiled spec, for the server's verdict on whatever the check cannot see.
func TestRuntimePipelineRemovingIDIsTerminal(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	cs, err := compileSpec(Stream[order]{
		Name:          "no-id",
		Collection:    "orders",
		OnHistoryLost: ResumeFromNow,
		Restart:       RestartPolicy{InitialDelay: time.Millisecond},
		OnInsert:      func(context.Context, *Event[order]) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	stage, err := bson.Marshal(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}})
	if err != nil {
		t.Fatal(err)
	}
	cs.Pipeline = []bson.Raw{stage}
	eh, err := rt.e.Spawn(testCtx(t), cs)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handle{e: eh}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 1)
	st := waitState(t, h, StateCrashed)
	if !strings.Contains(st.LastCause, "280") && !strings.Contains(st.LastCause, "modified by the pipeline") {
		t.Fatalf("crash cause %q, want the server's 280 about the modified _id", st.LastCause)
	}
	if st.Deaths != 1 {
		t.Fatalf("status %+v: want exactly one death (terminal at once, no restart loop)", st)
	}
	if n := rec.count(isEvent[observe.GapRecorded]); n != 0 {
		t.Fatalf("%d gap records: a modified _id is not lost history", n)
	}
	if n := rec.count(isEvent[observe.HistoryLost]); n != 0 {
		t.Fatalf("%d HistoryLost events: a modified _id is not lost history", n)
	}
}

// TestStatusAfterRuntimeStop: once the runtime stopped, Status answers the last status the
// supervisor reported (the entry keeps it encoded), with its counts and transitions.
func TestStatusAfterRuntimeStop(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	s := newSeen()
	h, err := rt.Spawn(testCtx(t), ordersStream("after", s))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	insertOrders(t, e, 0, 3)
	waitFor(t, "3 events", func() bool { return s.distinct() == 3 })
	ctx := testCtx(t)
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st, err := h.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "after" || st.State != StateStopped || st.Incarnation != 1 || st.Handled != 3 || st.Since.IsZero() {
		t.Fatalf("status after the runtime's Stop: %+v; want stopped, incarnation 1, 3 handled", st)
	}
}
