package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store/memstore"
)

// recRouter records every handled event: operation type and document _id.
type recRouter struct {
	mu      sync.Mutex
	handled map[int]int // document _id → calls (inserts)
	ops     map[string]int
}

func (r *recRouter) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	return recCall{r: r, raw: raw}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

func (r *recRouter) Classify(error) (dispatcher.ErrorClass, string) { return dispatcher.Retryable, "" }

// all reports whether every document in [from, to) was handled.
func (r *recRouter) all(from, to int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := from; i < to; i++ {
		if r.handled[i] == 0 {
			return false
		}
	}
	return true
}

func (r *recRouter) op(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops[op]
}

type recCall struct {
	r   *recRouter
	raw bson.Raw
}

func (c recCall) Call(context.Context, int) error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	op := opType(c.raw)
	c.r.ops[op]++
	if op == "insert" {
		c.r.handled[docID(c.raw)]++
	}
	return nil
}

// positions is the checkpointer's PositionSource over the driver (what the root implements).
type positions struct{ coll *mongo.Collection }

func (p positions) Current(ctx context.Context) (bson.Raw, bson.Timestamp, error) {
	cs, err := p.coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		return nil, bson.Timestamp{}, err
	}
	defer cs.Close(ctx)
	return append(bson.Raw(nil), cs.ResumeToken()...), bson.Timestamp{}, nil
}

// The stream actor speaks the real checkpointer's and dispatcher's protocols: first start from a
// captured position, every event handled, a cursor death resumed from the checkpointer's newest
// settled position, an invalidate handled and followed by startAfter.
func TestStreamWithRealCheckpointerAndDispatcher(t *testing.T) {
	h := newHarness(t, harnessOpts{before: func(h *harness) {}, noTree: true})
	router := &recRouter{handled: map[int]int{}, ops: map[string]int{}}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	store := memstore.New(memstore.Options{})
	cpProps, err := checkpointer.New(checkpointer.Config{Stream: "orders", Store: store, Positions: positions{h.coll},
		Checkpoint: policy.Checkpoint{SaveEvery: 5}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	dProps, err := dispatcher.New(dispatcher.Config{Stream: "orders", Router: router, Capacity: 8, Lanes: 2, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	child, err := New(Config{Stream: "orders", Watcher: h.watcher, MaxAwaitTime: 50 * time.Millisecond, MaxBatch: 3,
		InvalidateRestart: true, Logger: log, Observer: h.ev})
	if err != nil {
		t.Fatal(err)
	}
	h.spawn(supervisor.Config{Stream: "orders", Child: child, Siblings: []supervisor.Sibling{
		{Name: "checkpointer", Props: cpProps}, {Name: "dispatcher", Props: dProps}}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)

	h.insert(0, 30)
	eventually(t, "30 inserts handled", func() bool { return router.all(0, 30) })
	h.failGetMore(bson.D{{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.clk.Advance(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(30, 40)
	eventually(t, "40 inserts handled", func() bool { return router.all(0, 40) })

	if err := h.coll.Drop(h.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalidate handled", func() bool { return router.op("invalidate") == 1 })
	eventually(t, "reopened after the invalidate", func() bool {
		pos := h.watcher.positions()
		return pos[len(pos)-1].Kind == messages.StartKind_START_KIND_START_AFTER
	})
	h.insert(100, 105)
	eventually(t, "inserts after the invalidate handled", func() bool { return router.all(100, 105) })
	h.noTransition()
}

// A restart whose resolved position is an invalidate token for resumeAfter (the server refuses
// it with InvalidResumeToken 260) reopens with startAfter that token instead of dying forever.
func TestStreamResumeAfterInvalidateTokenReopensWithStartAfter(t *testing.T) {
	h := newHarness(t, harnessOpts{edit: func(c *Config) { c.InvalidateRestart = true }})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 1)
	if err := h.coll.Drop(h.ctx); err != nil {
		t.Fatal(err)
	}
	evs := h.waitEvents(3)
	eventually(t, "reopened with startAfter", func() bool { return len(h.watcher.positions()) == 2 })

	// The fake checkpointer resumes after the newest event it saw: the invalidate.
	h.failGetMore(bson.D{{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.clk.Advance(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	pos := h.watcher.positions()
	if len(pos) != 4 || pos[2].Kind != messages.StartKind_START_KIND_RESUME_AFTER ||
		pos[3].Kind != messages.StartKind_START_KIND_START_AFTER || string(pos[3].Token) != string(evs[2].GetResumeToken()) {
		t.Fatalf("opens %+v, want resumeAfter then startAfter the invalidate token", pos)
	}
	h.insert(10, 11)
	evs = h.waitEvents(4)
	checkSeqs(t, evs, 1)
	if docID(evs[3].GetRaw()) != 10 {
		t.Fatalf("event 4 is of document %d", docID(evs[3].GetRaw()))
	}
	opened, _ := h.ev.snapshot()
	// The retry with startAfter reopens the checkpointer's position: Started says so.
	if last := opened[len(opened)-1]; len(opened) != 3 || last.Position != "checkpoint" {
		t.Fatalf("Started events %+v", opened)
	}
}

// failedWrites reports the checkpointer's failed writes on a channel.
type failedWrites struct {
	ch chan observe.CheckpointFailed
}

func (f failedWrites) OnEvent(ev observe.Event) {
	e, ok := ev.(observe.CheckpointFailed)
	if !ok {
		return
	}
	select {
	case f.ch <- e:
	default: // the test waits for the first only
	}
}

// While the checkpoint store is down, the settled events no successful write covers (those a
// crash would replay) never exceed MaxUnflushed: the tree stops taking events once MaxUnflushed
// of them settled, not MaxUnflushed plus the dispatcher's credit later. Once a write succeeds
// the stream goes on.
func TestStreamUnflushedBoundWhileStoreDown(t *testing.T) {
	const maxUnflushed, total = 40, 1500
	h := newHarness(t, harnessOpts{noTree: true})
	router := &recRouter{handled: map[int]int{}, ops: map[string]int{}}
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	ms := memstore.New(memstore.Options{})
	var down atomic.Bool
	ms.SetFault(func(_ context.Context, op memstore.Op) error {
		if op == memstore.OpSave && down.Load() {
			return errors.New("test: checkpoint store down")
		}
		return nil
	})
	failed := failedWrites{ch: make(chan observe.CheckpointFailed, 1)}
	cpProps, err := checkpointer.New(checkpointer.Config{Stream: "orders", Store: ms, Positions: positions{h.coll},
		Checkpoint: policy.Checkpoint{SaveEvery: 10, MaxUnflushed: maxUnflushed}, Clock: h.clk, Logger: log, Observer: failed})
	if err != nil {
		t.Fatal(err)
	}
	dProps, err := dispatcher.New(dispatcher.Config{Stream: "orders", Router: router, Capacity: 256, Lanes: 4,
		AwaitSettleLimit: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	child, err := New(Config{Stream: "orders", Watcher: h.watcher, MaxAwaitTime: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h.spawn(supervisor.Config{Stream: "orders", Child: child, Siblings: []supervisor.Sibling{
		{Name: "checkpointer", Props: cpProps}, {Name: "dispatcher", Props: dProps}}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING) // the first start wrote the initial position
	down.Store(true)
	h.insert(0, total)

	// Every event handled from now on is settled and unwritten. Wait until the dispatcher holds
	// neither events nor credit: nothing more can be handled until a write succeeds.
	disp := actor.NewPID(h.sup.Address, h.sup.Id+"/dispatcher")
	stats := func() *wire.DispatcherStats {
		res, err := h.sys.Root.RequestFuture(disp, &wire.DispatcherStatsRequest{}, waitLimit).Result()
		if err != nil {
			t.Fatalf("dispatcher stats: %v", err)
		}
		return res.(*wire.DispatcherStats)
	}
	var st *wire.DispatcherStats
	defer func() {
		if t.Failed() {
			t.Logf("last dispatcher stats: %v", st)
		}
	}()
	eventually(t, "the dispatcher holds no event and no credit", func() bool {
		st = stats()
		return st.GetSettled() > 0 && st.GetInFlight() == 0 && st.GetCredit() == 0
	})
	handled := router.op("insert")
	if st.GetSettled() != maxUnflushed || handled != maxUnflushed {
		t.Fatalf("store down: %d events settled, %d handled; want exactly MaxUnflushed = %d (no more, and no pause before)",
			st.GetSettled(), handled, maxUnflushed)
	}

	// The store is back: the retry (armed before the failure is reported) writes, and the stream
	// handles the rest.
	select {
	case <-failed.ch:
	case <-time.After(waitLimit):
		t.Fatal("no failed checkpoint write reported")
	}
	down.Store(false)
	h.clk.Advance(time.Minute)
	eventually(t, "every order handled after the store came back", func() bool { return router.all(0, total) })
	h.noTransition()
}
