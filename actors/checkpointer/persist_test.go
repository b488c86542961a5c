package checkpointer

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// started returns a harness whose stream resolved incarnation 1 (initial position written).
func started(t *testing.T, edit func(*harness, *Config)) *harness {
	t.Helper()
	h := newHarness(t, edit)
	h.resolve(1)
	if ev := event[cpEvent](h); ev.Checkpoint.Source != store.SourceInitial {
		t.Fatalf("first write %+v", ev)
	}
	return h
}

func TestFlushByCount(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) { c.Checkpoint.SaveEvery = 10 })
	h.progress(1, 20, pbrtTok(20))
	h.settle(1, seqRange(1, 9)...)
	h.noEvent()
	h.settle(1, 10)
	ev := event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != tokData(evTok(10)) || ev.Settled != 10 ||
		ev.Checkpoint.Source != store.SourceEvent || ev.Checkpoint.Settled != 10 {
		t.Fatalf("Checkpointed %+v", ev)
	}
	// Out of order: 12..20 settle, 11 still in flight: 9 settlements do not trigger; the 10th
	// (11) does, and the position jumps to the PBRT of the batch.
	h.settle(1, seqRange(12, 20)...)
	h.noEvent()
	h.settle(1, 11)
	ev = event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != "pbrt-000020" || ev.Settled != 10 || ev.Checkpoint.Source != store.SourcePBRT {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

func TestFlushByInterval(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) { c.Checkpoint.SaveInterval = time.Second })
	h.progress(1, 10, pbrtTok(10))
	h.settle(1, 1, 2, 3)
	h.sync()
	if d, ok := h.clk.NextDeadline(); !ok || d != time.Second {
		t.Fatalf("interval timer %v %v, want 1s", d, ok)
	}
	h.clk.Advance(500 * time.Millisecond)
	h.settle(1, 4) // a later change does not re-arm the timer
	h.sync()
	h.clk.Advance(499 * time.Millisecond)
	h.noEvent()
	h.clk.Advance(time.Millisecond)
	ev := event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != tokData(evTok(4)) || ev.Settled != 4 {
		t.Fatalf("Checkpointed %+v", ev)
	}
	if h.clk.Pending() != 0 {
		t.Fatalf("%d timers pending after the write", h.clk.Pending())
	}
}

func TestFlushRequest(t *testing.T) {
	h := started(t, nil)
	// Clean: answered at once with the stored position.
	fl := h.flush()
	if tokData(fl.GetToken()) != "0now-1" || fl.GetError() != "" {
		t.Fatalf("Flushed %v", fl)
	}
	h.noEvent()
	h.progress(1, 5, pbrtTok(5))
	h.settle(1, 1, 2, 4)
	fl = h.flush()
	if tokData(fl.GetToken()) != tokData(evTok(2)) || fl.GetLowWaterMark() != 2 || fl.GetError() != "" {
		t.Fatalf("Flushed %v", fl)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != tokData(evTok(2)) {
		t.Fatalf("stored %q", tokData(cp.Token))
	}
	if ev := event[cpEvent](h); ev.Settled != 3 {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

func TestFlushDuringWriteWaitsForNewerWrite(t *testing.T) {
	release := make(chan struct{})
	var block atomic.Bool
	h := started(t, func(_ *harness, c *Config) { c.Checkpoint.SaveEvery = 2 })
	block.Store(true)
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave && block.Load() {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})
	h.progress(1, 10, pbrtTok(10))
	h.settle(1, 1, 2) // write of ev2 starts and blocks
	h.settle(1, 3)
	h.request(&wire.Flush{})
	h.sync()
	block.Store(false)
	close(release)
	fl := next[*wire.Flushed](h)
	if tokData(fl.GetToken()) != tokData(evTok(3)) {
		t.Fatalf("Flushed %v, want ev3 (the write issued after the Flush)", fl)
	}
	if a, b := event[cpEvent](h), event[cpEvent](h); tokData(a.Checkpoint.Token) != tokData(evTok(2)) ||
		tokData(b.Checkpoint.Token) != tokData(evTok(3)) {
		t.Fatalf("writes %q then %q", tokData(a.Checkpoint.Token), tokData(b.Checkpoint.Token))
	}
}

func TestIdlePBRTPersistedOncePerInterval(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Checkpoint.SaveInterval = time.Second
		c.Checkpoint.IdleInterval = time.Second
	})
	h.progress(1, 2, pbrtTok(2))
	h.settle(1, 1, 2)
	h.sync()
	h.clk.Advance(time.Second)
	if ev := event[cpEvent](h); tokData(ev.Checkpoint.Token) != "pbrt-000002" {
		t.Fatalf("Checkpointed %+v", ev)
	}
	// Idle: empty batches keep moving the PBRT; one write per interval, with the newest.
	h.progress(1, 2, tok("pbrt-000002-idle-a"))
	h.sync()
	h.clk.Advance(400 * time.Millisecond)
	h.progress(1, 2, tok("pbrt-000002-idle-b"))
	h.progress(1, 2, tok("pbrt-000002-idle-c"))
	h.sync()
	h.clk.Advance(599 * time.Millisecond)
	h.noEvent()
	h.clk.Advance(time.Millisecond)
	ev := event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != "pbrt-000002-idle-c" || ev.Settled != 0 || ev.Checkpoint.Source != store.SourcePBRT {
		t.Fatalf("Checkpointed %+v", ev)
	}
	h.sync()
	// An unchanged PBRT writes nothing and arms nothing.
	h.progress(1, 2, tok("pbrt-000002-idle-c"))
	h.sync()
	if h.clk.Pending() != 0 {
		t.Fatal("an unchanged PBRT armed the interval timer")
	}
	h.clk.Advance(time.Hour)
	h.noEvent()
	// With an event in flight the PBRT of its batch is not a position.
	h.progress(1, 3, tok("busy"))
	h.sync()
	if h.clk.Pending() != 0 {
		t.Fatal("a PBRT ahead of an unsettled event changed the position")
	}
}

// A moved PBRT alone waits IdleInterval, not SaveInterval (checkpoint writes are oplog entries
// that move every idle stream's PBRT: a short period would make idle streams write forever); a
// settlement during that wait brings the write back to SaveInterval.
func TestIdlePBRTWaitsIdleInterval(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Checkpoint.SaveInterval = time.Second
		c.Checkpoint.IdleInterval = time.Minute
	})
	h.progress(1, 2, pbrtTok(2))
	h.settle(1, 1, 2)
	h.sync()
	h.clk.Advance(time.Second)
	if ev := event[cpEvent](h); tokData(ev.Checkpoint.Token) != "pbrt-000002" {
		t.Fatalf("Checkpointed %+v", ev)
	}
	h.sync()
	h.progress(1, 2, tok("pbrt-000002-idle-a"))
	h.sync()
	if d, ok := h.clk.NextDeadline(); !ok || d != time.Minute {
		t.Fatalf("idle PBRT armed a %v timer, want IdleInterval (1m)", d)
	}
	h.clk.Advance(59 * time.Second)
	h.noEvent()
	h.clk.Advance(time.Second)
	if ev := event[cpEvent](h); tokData(ev.Checkpoint.Token) != "pbrt-000002-idle-a" {
		t.Fatalf("Checkpointed %+v", ev)
	}
	h.sync()
	// Idle wait, then an event settles: the write is due SaveInterval after it, not after the minute.
	h.progress(1, 2, tok("pbrt-000002-idle-b"))
	h.sync()
	h.clk.Advance(10 * time.Second)
	h.progress(1, 3, pbrtTok(3))
	h.settle(1, 3, 3)
	h.sync()
	h.clk.Advance(time.Second)
	if ev := event[cpEvent](h); tokData(ev.Checkpoint.Token) != "pbrt-000003" || ev.Settled != 1 {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

func TestStoreDownRetriesWithBackoffAndPauses(t *testing.T) {
	var down atomic.Bool
	h := started(t, func(_ *harness, c *Config) {
		c.Checkpoint.SaveEvery = 2
		c.Checkpoint.MaxUnflushed = 5
		c.Checkpoint.SaveInterval = time.Hour
		c.RetryInitialDelay = 100 * time.Millisecond
		c.RetryMaxDelay = 400 * time.Millisecond
	})
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave && down.Load() {
			return errors.New("store unreachable")
		}
		return nil
	})
	down.Store(true)
	h.progress(1, 100, pbrtTok(100))
	h.settle(1, 1, 2)
	for i, want := range []time.Duration{100, 200, 400, 400} {
		want *= time.Millisecond
		f := event[observe.CheckpointFailed](h)
		if f.Unflushed != 2 || f.Err == nil {
			t.Fatalf("failure %d: %+v", i+1, f)
		}
		h.sync()
		if d, _ := h.clk.NextDeadline(); d != want {
			t.Fatalf("retry %d in %v, want %v", i+1, d, want)
		}
		if i < 3 {
			h.clk.Advance(want)
		}
	}
	// The dispatcher may let MaxUnflushed events settle past the last successful write (the
	// start position, written before any settled): its settle limit is 5.
	if fc := next[*wire.FlowControl](h); fc.SettleLimit == nil || fc.GetSettleLimit() != 5 || fc.GetPaused() {
		t.Fatalf("FlowControl %v, want settle_limit 5, not paused", fc)
	}
	// Processing goes on; at MaxUnflushed, with the store down, the dispatcher is paused.
	h.settle(1, 3, 4)
	h.sync()
	select {
	case m := <-h.probe:
		t.Fatalf("unexpected %v at 4 unflushed", m)
	default:
	}
	h.settle(1, 5)
	if fc := next[*wire.FlowControl](h); !fc.GetPaused() || fc.GetSettleLimit() != 5 {
		t.Fatalf("FlowControl %v, want paused at settle_limit 5", fc)
	}
	// The store comes back: the pending retry writes the newest position, raises the limit by
	// what it covered and unpauses.
	down.Store(false)
	h.clk.Advance(400 * time.Millisecond)
	ev := event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != tokData(evTok(5)) || ev.Settled != 5 {
		t.Fatalf("Checkpointed %+v", ev)
	}
	if fc := next[*wire.FlowControl](h); fc.GetPaused() || fc.GetSettleLimit() != 10 {
		t.Fatalf("FlowControl %v, want unpaused with settle_limit 10", fc)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != tokData(evTok(5)) {
		t.Fatalf("stored %q", tokData(cp.Token))
	}
	// The backoff starts over after a success.
	down.Store(true)
	h.settle(1, 6, 7)
	event[observe.CheckpointFailed](h)
	h.sync()
	if d, _ := h.clk.NextDeadline(); d != 100*time.Millisecond {
		t.Fatalf("retry after recovery in %v, want the first delay again", d)
	}
	// A Flush during the outage answers with the error.
	fl := h.flush()
	if fl.GetError() == "" || tokData(fl.GetToken()) != tokData(evTok(5)) {
		t.Fatalf("Flushed %v, want the error and the last durable position", fl)
	}
	event[observe.CheckpointFailed](h)
	down.Store(false)
}

func TestAttachDispatcherGetsCurrentPause(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Dispatcher = nil
		c.Checkpoint.SaveEvery = 1
		c.Checkpoint.MaxUnflushed = 1
	})
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave {
			return errors.New("down")
		}
		return nil
	})
	h.progress(1, 3, nil)
	h.settle(1, 1, 2)
	event[observe.CheckpointFailed](h)
	h.sync()
	h.sys.Root.Send(h.cp, &wire.AttachDispatcher{Address: h.probePID.Address, Id: h.probePID.Id, Attach: 7})
	// Both settlements received before the attach are unwritten, more than MaxUnflushed: the
	// newly attached dispatcher may let nothing more settle.
	if fc := next[*wire.FlowControl](h); !fc.GetPaused() || fc.SettleLimit == nil || fc.GetSettleLimit() != 0 ||
		fc.GetAttach() != 7 {
		t.Fatalf("FlowControl %v, want paused, settle_limit 0, attach 7", fc)
	}
	h.ms.SetFault(nil)
}

// The settle limit answers every AttachDispatcher, counted from that attach (settlements
// received before it and not covered by a successful write count against it), and grows by what
// each successful write covered, or at once when the durable position is already the current
// one. Settlements of a stale incarnation count too: the dispatcher counts every settlement it
// sends.
func TestSettleLimitCountsFromAttach(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Dispatcher = nil
		c.Checkpoint.SaveEvery = 3
		c.Checkpoint.MaxUnflushed = 10
		c.Checkpoint.SaveInterval = time.Hour
	})
	attach := func(id uint64) {
		h.sys.Root.Send(h.cp, &wire.AttachDispatcher{Address: h.probePID.Address, Id: h.probePID.Id, Attach: id})
	}
	wantLimit := func(attach, limit uint64) {
		t.Helper()
		fc := next[*wire.FlowControl](h)
		if fc.SettleLimit == nil || fc.GetSettleLimit() != limit || fc.GetAttach() != attach || fc.GetPaused() {
			t.Fatalf("FlowControl %v, want settle_limit %d, attach %d, not paused", fc, limit, attach)
		}
	}
	h.progress(1, 20, nil)
	h.settle(1, 1, 2) // fewer than SaveEvery: not written
	h.sync()
	attach(7)
	wantLimit(7, 8) // 10 - the 2 unwritten
	h.settle(1, 3)  // a write of 1..3, covering 3 settlements
	event[cpEvent](h)
	wantLimit(7, 11) // 3 + 10 - the 2 received before the attach
	h.settle(2, 4)   // a stale incarnation: dropped, but counted
	h.settle(1, 4, 5, 6)
	event[cpEvent](h)
	wantLimit(7, 15) // 7 received, 2 of them before the attach
	// 7 stays unsettled: the low-water mark cannot move, the durable position is the current
	// one, so 8 and 9 count as covered without a write.
	h.settle(1, 8, 9)
	wantLimit(7, 17)
	h.noEvent()
	// A new attach counts from itself: nothing received is unwritten.
	attach(9)
	wantLimit(9, 10)
}

// The settle limit a write raises goes to the dispatcher only when it grew by a quarter of
// MaxUnflushed since the last one sent, or when the dispatcher has used half of the one it has
// (a FlowControl per write would wake it once more per batch).
func TestSettleLimitSentWhenItMatters(t *testing.T) {
	release := make(chan struct{})
	var hold atomic.Bool
	h := started(t, func(_ *harness, c *Config) {
		c.Dispatcher = nil
		c.Checkpoint.SaveEvery = 10
		c.Checkpoint.MaxUnflushed = 100
		c.Checkpoint.SaveInterval = time.Hour
	})
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave && hold.Load() {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	h.sys.Root.Send(h.cp, &wire.AttachDispatcher{Address: h.probePID.Address, Id: h.probePID.Id, Attach: 1})
	limit := func(want uint64) {
		t.Helper()
		fc := next[*wire.FlowControl](h)
		if fc.GetSettleLimit() != want || fc.GetPaused() {
			t.Fatalf("FlowControl %v, want settle_limit %d", fc, want)
		}
	}
	noLimit := func(why string) {
		t.Helper()
		h.sync()
		for {
			select {
			case m := <-h.probe:
				if fc, ok := m.(*wire.FlowControl); ok {
					t.Fatalf("FlowControl %v %s", fc, why)
				}
				continue
			default:
			}
			return
		}
	}
	seqs := func(from, to uint64) []uint64 {
		var s []uint64
		for q := from; q <= to; q++ {
			s = append(s, q)
		}
		return s
	}
	limit(100)
	h.progress(1, 1000, nil)
	h.settle(1, seqs(1, 10)...)
	event[cpEvent](h)
	noLimit("for a limit 10 higher, 10 of 100 used")
	h.settle(1, seqs(11, 20)...)
	event[cpEvent](h)
	noLimit("for a limit 20 higher, 20 of 100 used")
	h.settle(1, seqs(21, 30)...)
	event[cpEvent](h)
	limit(130) // a quarter of MaxUnflushed higher
	// A slow write: settlements pile up behind it until half of the limit sent is used.
	hold.Store(true)
	h.settle(1, seqs(31, 40)...) // the write of 31..40 waits in the store
	h.settle(1, seqs(41, 80)...) // 80 of 130 used: more than half
	noLimit("while the write is held: the limit has not moved")
	hold.Store(false)
	close(release)
	event[cpEvent](h) // covers 31..40: limit 140, only 10 higher, but 80 used
	limit(140)
}

// The supervisor hears of writes at most every writeReportEvery: a later write waits, the
// newest one is reported when the interval has passed, and a report still held goes on stop.
func TestWritesReportedAtMostEveryInterval(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Checkpoint.SaveEvery = 1
		c.Checkpoint.SaveInterval = time.Hour
	})
	report := func(want uint64) {
		t.Helper()
		select {
		case m := <-h.written:
			if tokData(m.GetToken()) != tokData(evTok(want)) {
				t.Fatalf("CheckpointWritten %q, want the token of %d", tokData(m.GetToken()), want)
			}
		case <-time.After(waitFor):
			t.Fatalf("no CheckpointWritten for %d", want)
		}
	}
	none := func(why string) {
		t.Helper()
		h.sync()
		select {
		case m := <-h.written:
			t.Fatalf("CheckpointWritten %q %s", tokData(m.GetToken()), why)
		default:
		}
	}
	select {
	case m := <-h.written: // the start position's, written by started
		if tokData(m.GetToken()) != tokData(tok("0now-1")) {
			t.Fatalf("first CheckpointWritten %q, want the start position", tokData(m.GetToken()))
		}
	case <-time.After(waitFor):
		t.Fatal("the start position was not reported")
	}
	h.clk.Advance(writeReportEvery)
	h.progress(1, 10, nil)
	h.settle(1, 1)
	event[cpEvent](h)
	report(1)
	h.settle(1, 2)
	event[cpEvent](h)
	h.settle(1, 3)
	event[cpEvent](h)
	none("within writeReportEvery of the last report")
	h.clk.Advance(writeReportEvery - time.Nanosecond)
	none("before writeReportEvery")
	h.clk.Advance(time.Nanosecond)
	report(3) // the newest write; 2's report is not sent
	none("after the held report")
	h.settle(1, 4)
	event[cpEvent](h)
	none("within writeReportEvery of the last report")
	h.sys.Root.Stop(h.cp)
	report(4)
}

func TestFencedWriteIsTerminal(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.Epoch = func() int64 { return 3 } })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("saved"), Epoch: 2, Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	h.resolve(1)
	// Another owner takes over with epoch 4.
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("theirs"), Epoch: 4, Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	h.progress(1, 2, nil)
	h.settle(1, 1, 2)
	fl := h.flush()
	if !fl.GetFenced() || fl.GetError() == "" {
		t.Fatalf("Flushed %v, want fenced", fl)
	}
	if err := h.failure(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("error %v does not match store.ErrFenced", err)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != "theirs" {
		t.Fatalf("stored %q, the newer owner's record was overwritten", tokData(cp.Token))
	}
}

func TestFencedInitialWriteFailsStartTerminally(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.StartPosition = policy.Latest })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("theirs"), Epoch: 9}); err != nil {
		t.Fatal(err)
	}
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || !sf.GetTerminal() {
		t.Fatalf("StartFrom %v, want terminal FAIL", sf)
	}
	if err := h.failure(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("escalated %v", err)
	}
}

func TestObserverPanicDoesNotBreakCheckpointer(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) {
		c.Observer = observe.Func(func(observe.Event) { panic("observer bug") })
	})
	h.resolve(1)
	h.progress(1, 1, nil)
	h.settle(1, 1)
	if fl := h.flush(); tokData(fl.GetToken()) != tokData(evTok(1)) {
		t.Fatalf("Flushed %v", fl)
	}
}

func TestStaleProgressAndSettlementsDropped(t *testing.T) {
	h := started(t, nil)
	h.resolve(2) // rebase: incarnation 1 is stale
	h.progress(1, 3, pbrtTok(3))
	h.settle(1, 1, 2, 3)
	fl := h.flush()
	if tokData(fl.GetToken()) != "0now-1" || fl.GetLowWaterMark() != 0 {
		t.Fatalf("Flushed %v: stale messages were applied", fl)
	}
	_ = bson.Raw(nil)
}

// TestResumedAfterTerminalFailureStillAnswers: after escalating (history lost under Fail, or
// fenced) the checkpointer's state is consistent, so a supervisor that resumes it instead of
// leaving it suspended gets answers: Flush replies (fenced: with fenced set) and a start fails
// terminally again.
func TestResumedAfterTerminalFailureStillAnswers(t *testing.T) {
	t.Run("history lost", func(t *testing.T) {
		h := newHarness(t, func(h *harness, c *Config) { h.resume = true })
		h.resolve(1)
		h.progress(1, 1, nil)
		h.settle(1, 1)
		if sf := h.historyLost(1, 286, "gone"); !sf.GetTerminal() {
			t.Fatalf("StartFrom %v", sf)
		}
		h.failure()
		if fl := h.flush(); tokData(fl.GetToken()) != tokData(evTok(1)) || fl.GetError() != "" {
			t.Fatalf("Flushed %v", fl)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		h := newHarness(t, func(h *harness, c *Config) { h.resume = true })
		h.resolve(1)
		if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("theirs"), Epoch: 4}); err != nil {
			t.Fatal(err)
		}
		h.progress(1, 1, nil)
		h.settle(1, 1)
		if fl := h.flush(); !fl.GetFenced() {
			t.Fatalf("Flushed %v", fl)
		}
		h.failure()
		if fl := h.flush(); !fl.GetFenced() {
			t.Fatalf("Flushed after resume %v", fl)
		}
		if sf := h.resolve(2); sf.GetKind() != messages.StartKind_START_KIND_FAIL || !sf.GetTerminal() {
			t.Fatalf("StartFrom after fencing %v", sf)
		}
	})
}

// TestSettledRunsMoveTheLowWaterMarkWhole checks the run encoding of settlements: the low-water
// mark passes a run whole and takes its last token; a run behind a gap waits; damaged runs (empty,
// wrapping past the last seq) and seqs beyond every Progress are dropped without a hang, and
// the others of the batch still count.
func TestSettledRunsMoveTheLowWaterMarkWhole(t *testing.T) {
	h := started(t, nil)
	h.progress(1, 300, pbrtTok(300))
	run := func(first uint64, n uint32) *wire.SettledRun {
		return &wire.SettledRun{FirstSeq: first, Count: n, LastToken: evTok(first + uint64(n) - 1),
			Outcome: messages.Outcome_OUTCOME_HANDLED}
	}
	h.sys.Root.Send(h.cp, &wire.SettledBatch{Incarnation: 1, Runs: []*wire.SettledRun{
		run(1, 100), run(102, 99), // 1-100, then 102-200 behind the gap at 101
		{FirstSeq: 5, Count: 0}, {FirstSeq: math.MaxUint64, Count: 2}, // damaged: dropped
	}})
	if fl := h.flush(); tokData(fl.GetToken()) != tokData(evTok(100)) || fl.GetLowWaterMark() != 100 {
		t.Fatalf("after 1-100 and 102-200: Flushed %v, want the token of 100", fl)
	}
	h.settle(1, 101)
	if fl := h.flush(); tokData(fl.GetToken()) != tokData(evTok(200)) || fl.GetLowWaterMark() != 200 {
		t.Fatalf("after 101: Flushed %v, want the token of 200", fl)
	}
	// 201-300 and 301-310 in one run: the seqs past the last Progress are dropped, the rest
	// settle, and the batch's PBRT (through 300) becomes the position.
	h.sys.Root.Send(h.cp, &wire.SettledBatch{Incarnation: 1, Runs: []*wire.SettledRun{run(201, 110)}})
	if fl := h.flush(); tokData(fl.GetToken()) != "pbrt-000300" || fl.GetLowWaterMark() != 300 {
		t.Fatalf("after 201-310: Flushed %v, want the PBRT of 300", fl)
	}
}

// A store holding a later position than a write (another writer of the same scope got there
// first, or a write the checkpointer gave up on was applied late) refuses it with
// store.ErrBackward. What the write would cover is covered already: the checkpointer reports the
// refusal, does not retry or pause the flow, answers its Flush waiters, and goes on writing; the
// stored position stands until a write passes it.
func TestBackwardWriteRefusedAndFlowGoesOn(t *testing.T) {
	h := started(t, func(_ *harness, c *Config) {
		c.Checkpoint.SaveEvery = 2
		c.Checkpoint.MaxUnflushed = 4
		c.Checkpoint.SaveInterval = time.Hour
	})
	ahead, ok := h.stored()
	if !ok {
		t.Fatal("no start checkpoint")
	}
	ahead.Token, ahead.Source = evTok(50), store.SourceEvent
	h.save(ahead)

	h.progress(1, 100, pbrtTok(100))
	h.settle(1, 1, 2)
	r := event[observe.CheckpointRefused](h)
	if !errors.Is(r.Err, store.ErrBackward) || tokData(r.Token) != tokData(evTok(2)) {
		t.Fatalf("CheckpointRefused %+v, want ev2 refused with ErrBackward", r)
	}
	h.sync()
	if n := h.clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after a refused write: it was scheduled for a retry", n)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != tokData(evTok(50)) {
		t.Fatalf("stored %q, want ev50 to stand", tokData(cp.Token))
	}
	// Past MaxUnflushed in settlements: a refused write counts as covered, nothing pauses.
	h.settle(1, 3, 4)
	event[observe.CheckpointRefused](h)
	h.settle(1, 5, 6)
	event[observe.CheckpointRefused](h)
	fl := h.flush()
	if fl.GetError() != "" || tokData(fl.GetToken()) != tokData(evTok(6)) {
		t.Fatalf("Flushed %v, want no error at ev6 (covered by the stored ev50)", fl)
	}
	for {
		select {
		case m := <-h.probe:
			if fc, ok := m.(*wire.FlowControl); ok && fc.GetPaused() {
				t.Fatalf("FlowControl %v: a refused write paused the dispatcher", fc)
			}
			continue
		default:
		}
		break
	}
	// A write past the stored position is stored and reported as usual.
	h.progress(1, 100, pbrtTok(100))
	h.settle(1, seqRange(7, 60)...)
	for {
		ev := event[any](h)
		if c, ok := ev.(cpEvent); ok {
			if tokData(c.Checkpoint.Token) <= tokData(evTok(50)) {
				t.Fatalf("Checkpointed %q, not past the stored ev50", tokData(c.Checkpoint.Token))
			}
			break
		}
		if _, ok := ev.(observe.CheckpointRefused); !ok {
			t.Fatalf("event %T %+v", ev, ev)
		}
	}
	if cp, _ := h.stored(); tokData(cp.Token) <= tokData(evTok(50)) {
		t.Fatalf("stored %q, want past ev50", tokData(cp.Token))
	}
}
