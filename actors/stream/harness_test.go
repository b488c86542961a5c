package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/test/mongosim"
)

// waitLimit bounds every wait of these tests; nothing sleeps to wait, the tests poll with a
// deadline or block on channels.
const waitLimit = 15 * time.Second

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventually polls cond every millisecond until it holds, failing the test after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", waitLimit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// testWatcher is the test-local Watcher: Collection.Watch through the real driver on mongosim,
// applying every Position field. It records the positions it opened.
type testWatcher struct {
	coll *mongo.Collection

	mu    sync.Mutex
	opens []Position
}

func (w *testWatcher) Open(ctx context.Context, from Position) (Cursor, error) {
	w.mu.Lock()
	w.opens = append(w.opens, from)
	w.mu.Unlock()
	o := options.ChangeStream().SetMaxAwaitTime(from.MaxAwaitTime).SetComment(from.Comment)
	switch from.Kind {
	case messages.StartKind_START_KIND_RESUME_AFTER:
		o.SetResumeAfter(from.Token)
	case messages.StartKind_START_KIND_START_AFTER:
		o.SetStartAfter(from.Token)
	case messages.StartKind_START_KIND_START_AT_OPERATION_TIME:
		ts := from.OperationTime
		o.SetStartAtOperationTime(&ts)
	}
	cs, err := w.coll.Watch(ctx, mongo.Pipeline{}, o)
	if err != nil {
		return nil, err
	}
	return ChangeStreamCursor(cs), nil
}

func (w *testWatcher) positions() []Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Position(nil), w.opens...)
}

// world is the state shared by the test and its fake checkpointer and dispatcher.
type world struct {
	mu sync.Mutex

	// checkpointer side
	startToken bson.Raw                                        // default answer: RESUME_AFTER startToken
	answer     func(w *world, m proto.Message) *wire.StartFrom // nil: the default answer
	cpMsgs     []proto.Message                                 // ResolveStart and HistoryLost received

	// dispatcher side
	stream     *actor.PID // the sender of the latest Subscribe
	subscribes []*wire.Subscribe
	batches    []*wire.EventBatch
	granted    map[uint64]uint64 // per incarnation: credit granted
	received   map[uint64]uint64 // per incarnation: events received
	violations []string
	initCredit uint32
	nonProto   []string
}

func newWorld() *world {
	return &world{granted: map[uint64]uint64{}, received: map[uint64]uint64{}, initCredit: 1000}
}

// lastEvent returns the newest event received (nil when none).
func (w *world) lastEventLocked() *wire.Event {
	for i := len(w.batches) - 1; i >= 0; i-- {
		if ev := eventsOf(w.batches[i]); len(ev) > 0 {
			return ev[len(ev)-1]
		}
	}
	return nil
}

// defaultAnswer resumes after the newest event the fake dispatcher received (as a checkpointer
// with everything settled would), else after startToken.
func (w *world) defaultAnswerLocked(inc uint64) *wire.StartFrom {
	if ev := w.lastEventLocked(); ev != nil {
		return &wire.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_RESUME_AFTER,
			Token: ev.ResumeToken, NextSeq: ev.Seq + 1, Source: "memory"}
	}
	return &wire.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_RESUME_AFTER,
		Token: w.startToken, NextSeq: 1, Source: "initial"}
}

func (w *world) events() []*wire.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*wire.Event
	for _, b := range w.batches {
		out = append(out, eventsOf(b)...)
	}
	return out
}

func (w *world) batchList() []*wire.EventBatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*wire.EventBatch(nil), w.batches...)
}

func (w *world) checkpointerMsgs() []proto.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]proto.Message(nil), w.cpMsgs...)
}

func (w *world) subscribeList() []*wire.Subscribe {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*wire.Subscribe(nil), w.subscribes...)
}

// fakeCheckpointer answers ResolveStart and HistoryLost as scripted by world.answer.
type fakeCheckpointer struct{ w *world }

func (f *fakeCheckpointer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.ResolveStart, *wire.HistoryLost:
		pm := m.(proto.Message)
		f.w.mu.Lock()
		f.w.cpMsgs = append(f.w.cpMsgs, pm)
		var sf *wire.StartFrom
		if f.w.answer != nil {
			sf = f.w.answer(f.w, pm)
		} else {
			sf = f.w.defaultAnswerLocked(incOf(pm))
		}
		f.w.mu.Unlock()
		if sf != nil {
			ctx.Respond(sf)
		}
	case *wire.Flush: // the last step of a graceful stop or restart
		ctx.Respond(&wire.Flushed{})
	default:
		f.w.checkProto(m)
	}
}

func incOf(m proto.Message) uint64 {
	switch m := m.(type) {
	case *wire.ResolveStart:
		return m.GetIncarnation()
	case *wire.HistoryLost:
		return m.GetIncarnation()
	}
	return 0
}

// grantCmd makes the fake dispatcher grant more credit (a test-only command).
type grantCmd struct{ n uint32 }

// fakeDispatcher grants initCredit on Subscribe, more on grantCmd, and records every batch,
// flagging any batch beyond the credit granted to its incarnation.
type fakeDispatcher struct{ w *world }

func (f *fakeDispatcher) Receive(ctx actor.Context) {
	w := f.w
	switch m := ctx.Message().(type) {
	case *wire.Subscribe:
		w.mu.Lock()
		w.subscribes = append(w.subscribes, m)
		w.stream = ctx.Sender()
		n := w.initCredit
		w.granted[m.GetIncarnation()] += uint64(n)
		w.mu.Unlock()
		ctx.Respond(&wire.Demand{Incarnation: m.GetIncarnation(), Credit: n})
	case *wire.EventBatch:
		w.mu.Lock()
		w.batches = append(w.batches, m)
		inc := m.GetIncarnation()
		w.received[inc] += uint64(len(m.GetRaw()))
		if w.received[inc] > w.granted[inc] {
			w.violations = append(w.violations, fmt.Sprintf("incarnation %d: %d events received, %d granted",
				inc, w.received[inc], w.granted[inc]))
		}
		w.mu.Unlock()
	case grantCmd:
		w.mu.Lock()
		to := w.stream
		var inc uint64
		if len(w.subscribes) > 0 {
			inc = w.subscribes[len(w.subscribes)-1].GetIncarnation()
		}
		w.granted[inc] += uint64(m.n)
		w.mu.Unlock()
		if to != nil {
			ctx.Send(to, &wire.Demand{Incarnation: inc, Credit: m.n})
		}
	case *wire.Drain: // a graceful stop or restart: nothing of the fake's is in flight
		ctx.Respond(&wire.Drained{})
	default:
		w.checkProto(m)
	}
}

func (w *world) checkProto(m any) {
	switch m.(type) {
	case actor.AutoReceiveMessage, actor.SystemMessage, *actor.Started:
		return
	}
	if _, ok := m.(proto.Message); !ok {
		w.mu.Lock()
		w.nonProto = append(w.nonProto, fmt.Sprintf("%T", m))
		w.mu.Unlock()
	}
}

// recEvents records the events the stream actor reports to its Observer.
type recEvents struct {
	mu          sync.Mutex
	opened      []observe.Started
	invalidated []observe.Invalidated
}

// OnEvent implements observe.Observer.
func (r *recEvents) OnEvent(ev observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e := ev.(type) {
	case observe.Started:
		r.opened = append(r.opened, e)
	case observe.Invalidated:
		r.invalidated = append(r.invalidated, e)
	}
}

func (r *recEvents) snapshot() (o []observe.Started, i []observe.Invalidated) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(o, r.opened...), append(i, r.invalidated...)
}

type harness struct {
	t       *testing.T
	ctx     context.Context
	srv     *mongosim.Server
	client  *mongo.Client
	coll    *mongo.Collection
	watcher *testWatcher
	w       *world
	ev      *recEvents
	sys     *actor.ActorSystem
	clk     *clock.Fake
	sup     *actor.PID
	trans   chan supervisor.Transition
}

type harnessOpts struct {
	edit       func(*Config)
	initCredit uint32 // default 1000
	// before runs before the tree is spawned (scripting answers, preparing data).
	before func(h *harness)
	// noTree: do not spawn the tree with fakes; the test calls spawn itself.
	noTree bool
}

// newHarness starts mongosim, captures a start token, and spawns a real stream supervisor whose
// siblings are the fake checkpointer and dispatcher and whose child is the stream actor under
// test. Cleanup stops the tree, disconnects, closes the server and checks for leaked goroutines.
func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	t.Cleanup(func() { goleak.VerifyNone(t) })

	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatalf("mongosim.Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cl, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), waitLimit)
		defer dcancel()
		if err := cl.Disconnect(dctx); err != nil {
			t.Errorf("disconnect: %v", err)
		}
	})
	h := &harness{t: t, ctx: ctx, srv: srv, client: cl, coll: cl.Database("app").Collection("orders"),
		w: newWorld(), ev: &recEvents{}, clk: clock.NewFake(time.Time{}), trans: make(chan supervisor.Transition, 256)}
	h.watcher = &testWatcher{coll: h.coll}
	h.w.startToken = h.currentToken()
	if o.initCredit != 0 {
		h.w.initCredit = o.initCredit
	}
	if o.before != nil {
		o.before(h)
	}

	if o.noTree {
		return h
	}
	cfg := Config{Stream: "orders", Watcher: h.watcher, MaxAwaitTime: 50 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Observer: h.ev}
	if o.edit != nil {
		o.edit(&cfg)
	}
	child, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := h.w
	h.spawn(supervisor.Config{
		Stream: "orders",
		Child:  child,
		Siblings: []supervisor.Sibling{
			{Name: "checkpointer", Props: actor.PropsFromProducer(func() actor.Actor { return &fakeCheckpointer{w: w} })},
			{Name: "dispatcher", Props: actor.PropsFromProducer(func() actor.Actor { return &fakeDispatcher{w: w} })},
		},
	})
	return h
}

// spawn starts the supervisor of cfg (Classify, Clock, Logger and OnTransition are set here) on a
// fresh actor system; cleanup stops it and checks the credit and that every reader ended.
func (h *harness) spawn(cfg supervisor.Config) {
	t := h.t
	t.Helper()
	cfg.Classify = streamtree.TerminalOn(streamtree.ErrInvalidated)
	cfg.Clock = h.clk
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	cfg.OnTransition = func(tr supervisor.Transition) { h.trans <- tr }
	supProps, err := supervisor.New(cfg)
	if err != nil {
		t.Fatalf("supervisor.New: %v", err)
	}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	h.sup, err = h.sys.Root.SpawnNamed(supProps, "orders")
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	w := h.w
	t.Cleanup(func() {
		if err := h.sys.Root.StopFuture(h.sup).Wait(); err != nil {
			t.Errorf("stop supervisor: %v", err)
		}
		h.sys.Shutdown()
		eventually(t, "every reader goroutine ended", func() bool { return liveReaders.Load() == 0 })
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.violations) > 0 {
			t.Errorf("credit exceeded: %v", w.violations)
		}
		if len(w.nonProto) > 0 {
			t.Errorf("non-proto messages received by the fakes: %v", w.nonProto)
		}
	})
}

// currentToken opens a change stream and returns its initial post-batch resume token (what the
// root's PositionSource does).
func (h *harness) currentToken() bson.Raw {
	h.t.Helper()
	cs, err := h.coll.Watch(h.ctx, mongo.Pipeline{})
	if err != nil {
		h.t.Fatalf("watch: %v", err)
	}
	defer cs.Close(h.ctx)
	tok := cs.ResumeToken()
	if len(tok) == 0 {
		h.t.Fatal("no initial resume token")
	}
	return append(bson.Raw(nil), tok...)
}

// await returns the next supervisor transition, failing unless it enters want.
func (h *harness) await(want messages.SupervisorState) supervisor.Transition {
	h.t.Helper()
	for {
		select {
		case tr := <-h.trans:
			if tr.To == want {
				return tr
			}
			if tr.To == messages.SupervisorState_SUPERVISOR_STATE_STARTING {
				continue // starting precedes running and a death in Started
			}
			h.t.Fatalf("transition %v → %v (%s, cause %v), want → %v", tr.From, tr.To, tr.Why, tr.Cause, want)
		case <-time.After(waitLimit):
			h.t.Fatalf("no transition to %v within %v", want, waitLimit)
		}
	}
}

// noTransition asserts that no transition is pending after a status round trip through the
// supervisor (which processes everything sent to it before).
func (h *harness) noTransition() {
	h.t.Helper()
	if _, err := h.sys.Root.RequestFuture(h.sup, &messages.StatusRequest{}, waitLimit).Result(); err != nil {
		h.t.Fatalf("status: %v", err)
	}
	select {
	case tr := <-h.trans:
		h.t.Fatalf("unexpected transition %v → %v (%s, cause %v)", tr.From, tr.To, tr.Why, tr.Cause)
	default:
	}
}

// streamPID is the stream actor's PID under the supervisor.
func (h *harness) streamPID() *actor.PID {
	return actor.NewPID(h.sup.Address, h.sup.Id+"/stream") // the supervisor's default child name
}

// stats asks the stream actor for its StreamStats.
func (h *harness) stats() *wire.StreamStats {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.streamPID(), &wire.StreamStatsRequest{}, waitLimit).Result()
	if err != nil {
		h.t.Fatalf("stream stats: %v", err)
	}
	st, ok := res.(*wire.StreamStats)
	if !ok {
		h.t.Fatalf("stream stats: got %T", res)
	}
	return st
}

func (h *harness) grant(n uint32) {
	h.sys.Root.Send(actor.NewPID(h.sup.Address, h.sup.Id+"/dispatcher"), grantCmd{n: n})
}

func (h *harness) insert(from, to int) {
	h.t.Helper()
	docs := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: i}})
	}
	if _, err := h.coll.InsertMany(h.ctx, docs); err != nil {
		h.t.Fatalf("insert: %v", err)
	}
}

// waitEvents waits until the fake dispatcher received n events and returns them.
func (h *harness) waitEvents(n int) []*wire.Event {
	h.t.Helper()
	var evs []*wire.Event
	eventually(h.t, fmt.Sprintf("%d events delivered", n), func() bool {
		evs = h.w.events()
		return len(evs) >= n
	})
	return evs
}

// failGetMore arms a failCommand fail point on getMore.
func (h *harness) failGetMore(data bson.D) {
	h.t.Helper()
	err := h.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: append(bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}}, data...)}})
	if err != nil {
		h.t.Fatalf("configureFailPoint: %v", err)
	}
}

// docID returns the documentKey._id of a raw change event (-1 when absent).
func docID(raw []byte) int {
	v, err := bson.Raw(raw).LookupErr("documentKey", "_id")
	if err != nil {
		return -1
	}
	if n, ok := v.AsInt64OK(); ok {
		return int(n)
	}
	return -1
}

func opType(raw []byte) string {
	s, _ := bson.Raw(raw).Lookup("operationType").StringValueOK()
	return s
}

// eventsOf expands an EventBatch into one Event per raw event: seqs counted back from
// through_seq, the token read from the event's _id, the invalidate flag on the last one when
// the batch ends with an invalidate.
func eventsOf(b *wire.EventBatch) []*wire.Event {
	raws := b.GetRaw()
	out := make([]*wire.Event, len(raws))
	first := b.GetThroughSeq() - uint64(len(raws)) + 1
	for i, raw := range raws {
		out[i] = &wire.Event{Seq: first + uint64(i), Raw: raw, ResumeToken: scanEnvelope(raw, false).id,
			Invalidate: i == len(raws)-1 && b.GetEndsWithInvalidate()}
	}
	return out
}
