package checkpointer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// waitFor bounds every wait; nothing sleeps, tests wait on channels or poll with a deadline.
const waitFor = 10 * time.Second

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tok returns a resume token document {_data: s}.
func tok(s string) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: s}})
	if err != nil {
		panic(err)
	}
	return b
}

func evTok(seq uint64) bson.Raw { return tok(fmt.Sprintf("ev%06d", seq)) }

// tokData returns the _data of a token, "" for none.
func tokData(r bson.Raw) string {
	if len(r) == 0 {
		return ""
	}
	v, err := r.LookupErr("_data")
	if err != nil {
		return "<bad token>"
	}
	return v.StringValue()
}

// fakePositions is a PositionSource whose answer the test sets.
type fakePositions struct {
	mu    sync.Mutex
	token bson.Raw
	ts    bson.Timestamp
	err   error
	calls int
}

func (f *fakePositions) Current(ctx context.Context) (bson.Raw, bson.Timestamp, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.token, f.ts, f.err
}

func (f *fakePositions) set(token bson.Raw, ts bson.Timestamp, err error) {
	f.mu.Lock()
	f.token, f.ts, f.err = token, ts, err
	f.mu.Unlock()
}

func (f *fakePositions) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// recorder is the checkpointer's Observer; every event goes to a channel. It runs on the
// actor goroutine right after the write an event reports, so it pairs a Checkpointed with the
// record the store holds (cpEvent) and a GapRecorded with the gap record (a store.Gap).
type recorder struct {
	ch chan any
	h  *harness
}

// cpEvent is a Checkpointed event with the checkpoint record it reports, as stored.
type cpEvent struct {
	observe.Checkpointed
	Checkpoint store.Checkpoint
}

// mismatch is what the recorder sends for an event that does not match the store.
type mismatch struct{ why string }

func (r *recorder) OnEvent(ev observe.Event) {
	scope := store.Scope{Stream: r.h.cfg.Stream, Instance: r.h.cfg.Instance}
	if m := ev.EventMeta(); m.Stream != "orders" {
		r.ch <- mismatch{fmt.Sprintf("%v: meta %+v, want stream orders", ev.Kind(), m)}
		return
	}
	switch e := ev.(type) {
	case observe.Checkpointed:
		cp, ok, err := r.h.ms.Load(context.Background(), scope)
		if !ok || err != nil || !bytes.Equal(cp.Token, e.Token) {
			r.ch <- mismatch{fmt.Sprintf("Checkpointed token %q, stored %q (%v, %v)", tokData(e.Token), tokData(cp.Token), ok, err)}
			return
		}
		r.ch <- cpEvent{Checkpointed: e, Checkpoint: cp}
	case observe.GapRecorded:
		gaps, err := r.h.ms.ListGaps(context.Background(), scope)
		if err != nil || len(gaps) == 0 || !bytes.Equal(gaps[len(gaps)-1].FromToken, e.From) ||
			!bytes.Equal(gaps[len(gaps)-1].ToToken, e.To) || e.Policy != r.h.cfg.OnHistoryLost.String() {
			r.ch <- mismatch{fmt.Sprintf("GapRecorded %+v, stored %+v (%v)", e, gaps, err)}
			return
		}
		r.ch <- gaps[len(gaps)-1]
	default:
		r.ch <- ev
	}
}

// probeActor receives every reply (StartFrom, Flushed, FlowControl) and forwards it.
type probeActor struct{ ch chan any }

func (p *probeActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped:
		return
	}
	p.ch <- ctx.Message()
}

// parentActor spawns the checkpointer and is its supervisor: it records each failure and stops
// the child.
type parentActor struct {
	props    *actor.Props
	child    chan *actor.PID
	failures chan any
	written  chan *messages.CheckpointWritten // the checkpointer's reports
	settled  chan *wire.SettledThrough        // its settled-position reports
	resume   bool                             // resume the failed child instead of stopping it
}

// restartChild asks the parent to restart the checkpointer (a test-only message).
type restartChild struct{}

func (p *parentActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.CheckpointWritten); ok {
		p.written <- m
		return
	}
	if m, ok := ctx.Message().(*wire.SettledThrough); ok {
		p.settled <- m
		return
	}
	if _, ok := ctx.Message().(restartChild); ok {
		ctx.(actor.Supervisor).RestartChildren(ctx.Children()...)
		return
	}
	if _, ok := ctx.Message().(*actor.Started); ok {
		pid, err := ctx.SpawnNamed(p.props, "checkpointer")
		if err != nil {
			panic(err)
		}
		p.child <- pid
	}
}

func (p *parentActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	p.failures <- reason
	if p.resume {
		sup.ResumeChildren(child)
		return
	}
	sup.StopChildren(child)
}

type harness struct {
	t         *testing.T
	sys       *actor.ActorSystem
	clk       *clock.Fake
	ms        *memstore.Store
	pos       *fakePositions
	ev        chan any
	probe     chan any
	probePID  *actor.PID
	cp        *actor.PID
	failures  chan any
	written   chan *messages.CheckpointWritten // what the checkpointer reported to its parent
	settled   chan *wire.SettledThrough        // its SettledThrough reports to the parent
	cfg       Config
	parentPID *actor.PID
	resume    bool // the parent resumes a failed checkpointer (set in edit)
}

func newTestSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
}

// newHarness spawns a checkpointer (under a recording parent) with a memstore, a fake clock and
// fake positions; edit may change the Config. Cleanup stops everything and checks for leaks.
func newHarness(t *testing.T, edit func(*harness, *Config)) *harness {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	h := &harness{
		t: t, sys: newTestSystem(), clk: clk, ms: memstore.New(memstore.Options{Now: clk.Now}),
		pos: &fakePositions{token: tok("0now-1"), ts: bson.Timestamp{T: 1000, I: 1}},
		ev:  make(chan any, 4096), probe: make(chan any, 4096), failures: make(chan any, 16),
		written: make(chan *messages.CheckpointWritten, 4096), settled: make(chan *wire.SettledThrough, 4096),
	}
	h.probePID = h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probeActor{ch: h.probe} }))
	cfg := Config{
		Stream: "orders", Store: h.ms, Gaps: h.ms, Positions: h.pos, Clock: clk,
		Dispatcher: h.probePID,
		Logger:     testLogger(), Owner: "instance-a",
	}
	if edit != nil {
		edit(h, &cfg)
	}
	if cfg.Observer == nil {
		cfg.Observer = &recorder{ch: h.ev, h: h}
	}
	h.cfg = cfg
	props, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	childCh := make(chan *actor.PID, 1)
	parent := &parentActor{props: props, child: childCh, failures: h.failures, written: h.written, settled: h.settled, resume: h.resume}
	h.parentPID = h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return parent }))
	select {
	case h.cp = <-childCh:
	case <-time.After(waitFor):
		t.Fatal("checkpointer not spawned")
	}
	t.Cleanup(func() {
		_ = h.sys.Root.StopFuture(h.parentPID).Wait()
		_ = h.sys.Root.StopFuture(h.probePID).Wait()
		h.sys.Shutdown()
		goleak.VerifyNone(t)
	})
	return h
}

// sync returns once the checkpointer processed every message sent before.
func (h *harness) sync() {
	h.t.Helper()
	if _, err := h.sys.Root.RequestFuture(h.cp, &actor.Touch{}, waitFor).Result(); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

func (h *harness) request(msg any) { h.sys.Root.RequestWithCustomSender(h.cp, msg, h.probePID) }

// next returns the next reply of type T sent to the probe, failing on any other type except
// FlowControl, which is skipped unless T is FlowControl.
func next[T any](h *harness) T {
	h.t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case m := <-h.probe:
			if v, ok := m.(T); ok {
				return v
			}
			if _, ok := m.(*wire.FlowControl); ok {
				continue
			}
			h.t.Fatalf("probe got %T %v, want %T", m, m, *new(T))
		case <-deadline:
			h.t.Fatalf("no %T within %v", *new(T), waitFor)
		}
	}
}

func (h *harness) resolve(inc uint64) *wire.StartFrom {
	h.t.Helper()
	h.request(&wire.ResolveStart{Incarnation: inc})
	sf := next[*wire.StartFrom](h)
	if sf.GetIncarnation() != inc {
		h.t.Fatalf("StartFrom incarnation %d, want %d", sf.GetIncarnation(), inc)
	}
	return sf
}

func (h *harness) historyLost(inc uint64, code int32, msg string) *wire.StartFrom {
	h.t.Helper()
	h.request(&wire.HistoryLost{Incarnation: inc, Code: code, Message: msg})
	return next[*wire.StartFrom](h)
}

func (h *harness) flush() *wire.Flushed {
	h.t.Helper()
	h.request(&wire.Flush{})
	return next[*wire.Flushed](h)
}

func (h *harness) progress(inc, through uint64, pbrt bson.Raw) {
	h.sys.Root.Send(h.cp, &wire.Progress{Incarnation: inc, ThroughSeq: through, PostBatchResumeToken: pbrt})
}

// settle sends one SettledBatch settling seqs with their event tokens, one run per seq (so any
// seq may become the position).
func (h *harness) settle(inc uint64, seqs ...uint64) {
	h.sys.Root.Send(h.cp, &wire.SettledBatch{Incarnation: inc, Runs: singleRuns(seqs...)})
}

// singleRuns returns one SettledRun per seq, each with the seq's event token.
func singleRuns(seqs ...uint64) []*wire.SettledRun {
	runs := make([]*wire.SettledRun, 0, len(seqs))
	for _, s := range seqs {
		runs = append(runs, &wire.SettledRun{FirstSeq: s, Count: 1, LastToken: evTok(s), Outcome: messages.Outcome_OUTCOME_HANDLED})
	}
	return runs
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// event returns the next Observer event of type T, skipping others when skip is true.
func event[T any](h *harness) T {
	h.t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case e := <-h.ev:
			if v, ok := e.(T); ok {
				return v
			}
			h.t.Fatalf("event %T %+v, want %T", e, e, *new(T))
		case <-deadline:
			h.t.Fatalf("no %T event within %v", *new(T), waitFor)
		}
	}
}

// noEvent asserts no Observer event is pending (after a sync).
func (h *harness) noEvent() {
	h.t.Helper()
	h.sync()
	select {
	case e := <-h.ev:
		h.t.Fatalf("unexpected event %T %+v", e, e)
	default:
	}
}

// stored returns the stored checkpoint.
func (h *harness) stored() (store.Checkpoint, bool) {
	h.t.Helper()
	cp, ok, err := h.ms.Load(context.Background(), store.Scope{Stream: "orders"})
	if err != nil {
		h.t.Fatalf("load: %v", err)
	}
	return cp, ok
}

func (h *harness) failure() error {
	h.t.Helper()
	select {
	case r := <-h.failures:
		err, ok := r.(error)
		if !ok {
			h.t.Fatalf("failure reason %T %v is not an error", r, r)
		}
		return err
	case <-time.After(waitFor):
		h.t.Fatal("no failure escalated")
	}
	return nil
}

// armed waits until n timers are pending on the fake clock.
func (h *harness) armed(n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.BlockUntil(ctx, n); err != nil {
		h.t.Fatalf("%d timers not armed: %v (pending %d)", n, err, h.clk.Pending())
	}
}

func testLogger() *zap.Logger {
	if testing.Verbose() {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}
