package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

// gate is a handler that blocks every call until released (or its context ends), counting the
// calls running.
type gate struct {
	release chan struct{}
	started atomic.Int32
	running atomic.Int32
	maxRun  atomic.Int32
}

func newGate() *gate { return &gate{release: make(chan struct{}, 1<<16)} }

func (g *gate) handle(ctx context.Context, _ call) error {
	g.started.Add(1)
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for {
		m := g.maxRun.Load()
		if n <= m || g.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) open(n int) {
	for range n {
		g.release <- struct{}{}
	}
}

// TestCreditNeverExceededAndMemoryBounded: a stream that always sends its whole credit, with a
// slow handler, never has more than Capacity events accepted or granted; credit comes back in
// quarters of the capacity.
func TestCreditNeverExceededAndMemoryBounded(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Capacity = 8; c.Lanes = 4 })
	if c := h.subscribe(1); c != 8 {
		t.Fatalf("initial credit %d, want 8", c)
	}
	var seq uint64
	sendAll := func() {
		var evs []tev
		for range h.credit {
			seq++
			evs = append(evs, mkEvent(seq, fmt.Sprintf("k%d", seq)))
		}
		h.send(evs...)
	}
	sendAll()
	check := func() {
		t.Helper()
		st := h.stats()
		if int(st.InFlight)+int(st.Credit) > 8 {
			t.Fatalf("in flight %d + credit %d > capacity 8", st.InFlight, st.Credit)
		}
	}
	check()
	h.noDemand()
	g.open(1) // one settles: 1 free < a quarter (2): no Demand yet
	eventually(t, "one settled", func() bool { return h.stats().Settled == 1 })
	h.noDemand()
	g.open(1)
	d := h.demand()
	if d.Credit != 2 || d.Incarnation != 1 {
		t.Fatalf("Demand %v, want credit 2", d)
	}
	h.credit += int(d.Credit)
	check()
	for round := 0; round < 20; round++ {
		sendAll()
		check()
		g.open(2)
		select {
		case m := <-h.streamCh:
			d := m.(*wire.Demand)
			h.credit += int(d.Credit)
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: no Demand; stats %v, started %d running %d", round, h.stats(), g.started.Load(), g.running.Load())
		}
		check()
	}
	g.open(1 << 10)
	eventually(t, "all settled", func() bool { return h.stats().InFlight == 0 })
	if g.maxRun.Load() > 8 {
		t.Fatalf("%d handlers ran at once with capacity 8", g.maxRun.Load())
	}
}

// TestBatchOverCreditFailsTheDispatcher: a batch larger than the credit is a protocol error of
// the stream actor; the dispatcher fails loudly instead of dropping events.
func TestBatchOverCreditFailsTheDispatcher(t *testing.T) {
	h := newHarness(t, &fakeRouter{}, func(c *Config) { c.Capacity = 2 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "c"))
	select {
	case reason := <-h.failures:
		if !strings.Contains(fmt.Sprint(reason), "exceeds the credit 2") {
			t.Fatalf("failure reason %v", reason)
		}
	case <-time.After(waitFor):
		t.Fatal("the dispatcher did not fail")
	}
}

func TestBatchBeforeSubscribeFailsTheDispatcher(t *testing.T) {
	h := newHarness(t, &fakeRouter{})
	h.sendInc(3, mkEvent(1, "a"))
	select {
	case reason := <-h.failures:
		if !strings.Contains(fmt.Sprint(reason), "before its Subscribe") {
			t.Fatalf("failure reason %v", reason)
		}
	case <-time.After(waitFor):
		t.Fatal("the dispatcher did not fail")
	}
}

func TestProgressPrecedesSettled(t *testing.T) {
	h := newHarness(t, &fakeRouter{}, func(c *Config) { c.Lanes = 3; c.SettleBatch = 0 })
	h.subscribe(1)
	var seq uint64
	for range 20 {
		var evs []tev
		for range 5 {
			seq++
			evs = append(evs, mkEvent(seq, fmt.Sprintf("k%d", seq%7)))
		}
		h.send(evs...)
	}
	h.sys.Root.Send(h.disp, &wire.EventBatch{Incarnation: 1, ThroughSeq: 100, PostBatchResumeToken: []byte("pbrt")}) // empty: its PBRT becomes a Progress too
	var progress []uint64
	settledAfter := map[uint64]uint64{} // seq → highest through_seq seen before it
	var maxThrough uint64
	deadline := time.After(waitFor)
	for len(settledAfter) < int(seq) || len(progress) < 21 {
		select {
		case m := <-h.cpCh:
			switch m := m.(type) {
			case *wire.Progress:
				progress = append(progress, m.ThroughSeq)
				maxThrough = max(maxThrough, m.ThroughSeq)
				if string(m.PostBatchResumeToken) != "pbrt" || m.Incarnation != 1 {
					t.Fatalf("Progress %v", m)
				}
			case *wire.SettledBatch:
				for _, s := range expandRuns(t, m.Runs) {
					settledAfter[s.Seq] = maxThrough
				}
			}
		case <-deadline:
			t.Fatalf("timeout: %d progress, %d settled", len(progress), len(settledAfter))
		}
	}
	for s, through := range settledAfter {
		if through < s {
			t.Fatalf("seq %d settled when Progress had only reached %d", s, through)
		}
	}
	for i := range 20 {
		if progress[i] != uint64(5*(i+1)) {
			t.Fatalf("Progress through_seqs %v", progress)
		}
	}
	if progress[20] != 100 {
		t.Fatalf("empty batch Progress %d, want 100", progress[20])
	}
}

// TestStaleIncarnation: after Subscribe{2}, batches of incarnation 1 still queued are dropped;
// of the events of incarnation 1 accepted before, the one whose handler runs finishes and
// settles under incarnation 1, and the ones queued behind it are skipped unhandled (the new
// cursor reads them again); the new incarnation's credit leaves room for all three until then.
func TestStaleIncarnation(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Capacity = 10; c.Lanes = 1 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "a"))
	eventually(t, "handlers started", func() bool { return g.started.Load() >= 1 })
	if c := h.subscribe(2); c != 7 {
		t.Fatalf("credit of incarnation 2 = %d, want 10-3 in flight", c)
	}
	h.sendInc(1, mkEvent(4, "c")) // stale
	h.sendInc(2, mkEvent(4, "d"), mkEvent(5, "a"))
	g.open(1 << 10)
	h.waitSettled(1, 4, 5)
	for s, want := range map[uint64]uint64{1: 1, 4: 2, 5: 2} {
		if h.setInc[s] != want {
			t.Fatalf("seq %d settled under incarnation %d, want %d", s, h.setInc[s], want)
		}
	}
	if h.settled[2] != nil || h.settled[3] != nil {
		t.Fatalf("superseded seqs settled to the checkpointer: %v", h.order)
	}
	if st := h.stats(); st.StaleBatches != 1 || st.Accepted != 5 || st.Settled != 3 {
		t.Fatalf("stats %v", st)
	}
	if g.started.Load() != 3 {
		t.Fatalf("%d handler calls, want 3 (neither the stale batch nor the superseded events run)", g.started.Load())
	}
	// A repeated Subscribe grants nothing new. First take every replenishing Demand: incarnation
	// 2 was granted 7 and sent 2 events, and the 5 settlements give back 5, so its credit is
	// the full capacity (10) once they all arrived (they trail the settlements: waiting for the
	// exact sum, not for an empty channel, is what makes this deterministic).
	for credit := 7 - 2; credit < 10; {
		if d := h.demand(); d.Incarnation == 2 {
			credit += int(d.Credit)
			if credit > 10 {
				t.Fatalf("incarnation 2 was granted %d credits with nothing in flight, capacity 10", credit)
			}
		}
	}
	if c := h.subscribe(2); c != 0 {
		t.Fatalf("repeated Subscribe granted %d", c)
	}
	// A stale Subscribe changes nothing.
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.Subscribe{Incarnation: 1}, h.stream)
	if st := h.stats(); st.Incarnation != 2 {
		t.Fatalf("incarnation %d after a stale Subscribe", st.Incarnation)
	}
}

func TestFlowControlPausesCredit(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Capacity = 4 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "a"), mkEvent(3, "a"), mkEvent(4, "a"))
	h.sys.Root.Send(h.disp, &wire.FlowControl{Paused: true})
	g.open(4)
	eventually(t, "all settled", func() bool { return h.stats().Settled == 4 })
	h.noDemand()
	if st := h.stats(); !st.Paused {
		t.Fatal("not paused")
	}
	// A new incarnation subscribing while paused gets no credit either.
	if c := h.subscribe(2); c != 0 {
		t.Fatalf("credit while paused = %d", c)
	}
	h.sys.Root.Send(h.disp, &wire.FlowControl{Paused: false})
	if d := h.demand(); d.Credit != 4 || d.Incarnation != 2 {
		t.Fatalf("Demand after resume = %v", d)
	}
}

// The settle limit bounds settlements since the attach + events in flight + credit. With
// AwaitSettleLimit a Subscribe attaches again and gets no credit until the checkpointer answers
// that attach; an answer to an earlier attach is ignored; then the limit, not the capacity,
// decides the credit, and capacity freed by settlements is not granted until the limit grows.
func TestSettleLimitBoundsCredit(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Capacity = 8; c.AwaitSettleLimit = true })
	first := h.attach
	if c := h.subscribe(1); c != 0 {
		t.Fatalf("credit %d before any settle limit, want 0", c)
	}
	re, ok := h.nextCP().(*wire.AttachDispatcher)
	if !ok || re.Attach == first {
		t.Fatalf("checkpointer got %v on Subscribe, want a new AttachDispatcher (first was %d)", re, first)
	}
	limit := func(attach, n uint64) {
		h.sys.Root.Send(h.disp, &wire.FlowControl{SettleLimit: &n, Attach: attach})
	}
	limit(first, 100)
	h.noDemand()
	limit(re.Attach, 3)
	if d := h.demand(); d.Credit != 3 {
		t.Fatalf("Demand %v, want the limit 3", d)
	}
	h.credit = 3
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "c"))
	g.open(3)
	h.waitSettled(1, 2, 3)
	h.noDemand()
	limit(re.Attach, 5)
	if d := h.demand(); d.Credit != 2 {
		t.Fatalf("Demand %v, want 2 (limit 5 - 3 settled)", d)
	}
	if st := h.stats(); st.Credit != 2 || st.Paused {
		t.Fatalf("stats %v", st)
	}
}

// TestCountsReportedAtMostEveryInterval: the parent gets SettlementCounts at most every
// countsReportEvery (a catch-up would otherwise wake the supervisor once per batch); counts that
// come sooner go on a later flush tick, whether events are still in flight or not.
func TestCountsReportedAtMostEveryInterval(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) {
		c.SettleBatch = 2
		c.SettleFlushInterval = 40 * time.Millisecond
	})
	report := func(what string) *messages.SettlementCounts {
		t.Helper()
		select {
		case m := <-h.counts:
			return m
		case <-time.After(waitFor):
			t.Fatalf("no SettlementCounts: %s", what)
			return nil
		}
	}
	none := func(what string) {
		t.Helper()
		h.stats() // the dispatcher has handled everything sent to it before
		select {
		case m := <-h.counts:
			t.Fatalf("SettlementCounts %v %s", m, what)
		default:
		}
	}
	// ticks advances the clock by n flush intervals, one armed tick at a time.
	ticks := func(n int) {
		t.Helper()
		for range n {
			if d := h.armed(1); d != 40*time.Millisecond {
				t.Fatalf("flush timer %v", d)
			}
			h.clk.Advance(40 * time.Millisecond)
		}
	}
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "a"), mkEvent(3, "a"), mkEvent(4, "a"), mkEvent(5, "a"))
	g.open(2)
	if m := report("first batch"); m.GetSettled() != 2 || m.GetInFlight() != 3 {
		t.Fatalf("first report %v, want 2 settled, 3 in flight", m)
	}
	g.open(2) // 3 and 4 fill a batch, sent at once; their counts wait
	eventually(t, "4 settled", func() bool { return h.stats().Settled == 4 })
	none("within countsReportEvery of the last")
	ticks(2)
	none("before countsReportEvery")
	ticks(1) // the tick past countsReportEvery reports
	if m := report("tick"); m.GetSettled() != 2 || m.GetInFlight() != 1 {
		t.Fatalf("report on the tick %v, want 2 settled, 1 in flight", m)
	}
	g.open(1) // 5 settles with nothing in flight after it: sent at once, counted on a tick
	eventually(t, "5 settled", func() bool { return h.stats().Settled == 5 })
	none("within countsReportEvery of the last, nothing in flight")
	ticks(2)
	none("before countsReportEvery, nothing in flight")
	ticks(1)
	if m := report("idle"); m.GetSettled() != 1 || m.GetInFlight() != 0 {
		t.Fatalf("last report %v, want 1 settled, 0 in flight", m)
	}
	none("after the last")
	if n := h.clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending once everything is reported", n)
	}
	// Counts held for the tick go at once when the dispatcher drains.
	h.clk.Advance(countsReportEvery)
	h.send(mkEvent(6, "a"), mkEvent(7, "a"))
	g.open(2)
	eventually(t, "7 settled", func() bool { return h.stats().Settled == 7 })
	if m := report("6 and 7, past countsReportEvery"); m.GetSettled() != 2 {
		t.Fatalf("report %v, want 2 settled", m)
	}
	h.send(mkEvent(8, "a"))
	g.open(1)
	eventually(t, "8 settled", func() bool { return h.stats().Settled == 8 })
	none("within countsReportEvery of the last")
	if _, err := h.sys.Root.RequestFuture(h.disp, &wire.Drain{}, waitFor).Result(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if m := report("drain"); m.GetSettled() != 1 {
		t.Fatalf("report on drain %v, want 1 settled", m)
	}
}

func TestSettleBatching(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) {
		c.SettleBatch = 3
		c.SettleFlushInterval = 40 * time.Millisecond
	})
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "a"), mkEvent(3, "a"), mkEvent(4, "a"), mkEvent(5, "a"))
	// Settle 1..3 while 4 and 5 keep the lane busy: the third fills a batch, so the lane wakes
	// the actor, which sends one batch of 3.
	g.open(3)
	eventually(t, "settled", func() bool { return h.stats().Settled == 3 })
	// 4 settles while 5 keeps the lane busy: it stays in the lanes' buffer until the flush tick.
	g.open(1)
	eventually(t, "5 started", func() bool { return g.started.Load() == 5 })
	if n := h.stats().Settled; n != 3 {
		t.Fatalf("settled %d before the flush tick, want 3", n)
	}
	var batches [][]uint64
	collect := func() {
		h.stats()
		for {
			select {
			case m := <-h.cpCh:
				if b, ok := m.(*wire.SettledBatch); ok {
					var s []uint64
					for _, x := range expandRuns(t, b.Runs) {
						s = append(s, x.Seq)
					}
					batches = append(batches, s)
				}
				continue
			default:
			}
			return
		}
	}
	collect()
	if fmt.Sprint(batches) != "[[1 2 3]]" {
		t.Fatalf("batches %v, want [[1 2 3]] before the flush interval", batches)
	}
	if d := h.armed(1); d != 40*time.Millisecond {
		t.Fatalf("flush timer %v", d)
	}
	h.clk.Advance(40 * time.Millisecond)
	eventually(t, "flushed", func() bool { collect(); return len(batches) == 2 })
	if fmt.Sprint(batches) != "[[1 2 3] [4]]" {
		t.Fatalf("batches %v", batches)
	}
	// The last event settles with nothing in flight: sent at once.
	g.open(1)
	eventually(t, "last", func() bool { collect(); return len(batches) == 3 })
	if fmt.Sprint(batches[2]) != "[5]" {
		t.Fatalf("batches %v", batches)
	}
}

func TestDrainFinishesInFlightEventsIncludingRetries(t *testing.T) {
	var fails atomic.Int32
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		if c.key == "flaky" && fails.Add(1) == 1 {
			return fmt.Errorf("transient")
		}
		return nil
	}}
	h := newHarness(t, r)
	h.subscribe(1)
	h.send(mkEvent(1, "flaky"), mkEvent(2, "b"))
	h.armed(1) // seq 1's retry
	fut := h.sys.Root.RequestFuture(h.disp, &wire.Drain{}, waitFor)
	h.send(mkEvent(3, "c")) // after Drain: dropped, stays unsettled
	h.stats()
	h.clk.Advance(time.Second)
	res, err := fut.Result()
	if err != nil {
		t.Fatal(err)
	}
	dr := res.(*wire.Drained)
	if dr.Settled != 2 || dr.Unsettled != 0 || dr.TimedOut {
		t.Fatalf("Drained %v", dr)
	}
	h.waitSettled(1, 2)
	h.drainCP()
	if h.settled[3] != nil {
		t.Fatal("a batch sent after Drain was processed")
	}
	// After the drain, a new Subscribe gets no credit and a second Drain answers at once.
	if c := h.subscribe(2); c != 0 {
		t.Fatalf("credit after drain %d", c)
	}
	res, err = h.sys.Root.RequestFuture(h.disp, &wire.Drain{}, waitFor).Result()
	if err != nil || res.(*wire.Drained).Settled != 2 {
		t.Fatalf("second Drain: %v %v", res, err)
	}
}

func TestDrainDeadlineCancelsHandlers(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Lanes = 2 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "a"))
	eventually(t, "handlers running", func() bool { return g.running.Load() >= 1 })
	fut := h.sys.Root.RequestFuture(h.disp, &wire.Drain{TimeoutMs: 1500}, waitFor)
	if d := h.armed(1); d != 1500*time.Millisecond {
		t.Fatalf("drain deadline %v", d)
	}
	h.clk.Advance(1500 * time.Millisecond)
	res, err := fut.Result()
	if err != nil {
		t.Fatal(err)
	}
	dr := res.(*wire.Drained)
	if !dr.TimedOut || dr.Unsettled != 3 || dr.Settled != 0 {
		t.Fatalf("Drained %v", dr)
	}
	if g.running.Load() != 0 {
		t.Fatal("handlers still running after the drain deadline")
	}
	h.drainCP()
	if len(h.order) != 0 {
		t.Fatalf("cancelled events settled: %v", h.order)
	}
}

// TestStopCancelsHandlersAndEndsLanes: stopping cancels the handlers' context and ends the lane
// goroutines (goleak in the harness cleanup).
func TestStopCancelsHandlersAndEndsLanes(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Lanes = 8 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"))
	eventually(t, "handlers running", func() bool { return g.running.Load() >= 1 })
	if err := h.sys.Root.StopFuture(h.disp).Wait(); err != nil {
		t.Fatal(err)
	}
	if g.running.Load() != 0 {
		t.Fatal("handlers still running after Stop")
	}
}

// TestRestartingInstanceEndsItsLanes: a protoactor restart (here of a root actor, after a protocol
// error) cancels the old instance's handlers and ends its lanes; the new instance starts afresh.
func TestRestartingInstanceEndsItsLanes(t *testing.T) {
	g := newGate()
	sys := newTestSystem()
	defer sys.Shutdown()
	cp := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	props, err := New(Config{Stream: "s", Router: &fakeRouter{handle: g.handle}, Lanes: 4, Checkpointer: cp})
	if err != nil {
		t.Fatal(err)
	}
	pid := sys.Root.Spawn(props) // a root actor: protoactor restarts it on failure
	sys.Root.RequestWithCustomSender(pid, &wire.Subscribe{Incarnation: 1}, cp)
	e := mkEvent(1, "a").build()
	sys.Root.Send(pid, &wire.EventBatch{Incarnation: 1, ThroughSeq: 1, Raw: [][]byte{e.raw}})
	eventually(t, "handler running", func() bool { return g.running.Load() == 1 })
	// An over-credit batch of a newer incarnation fails the instance; protoactor restarts it.
	sys.Root.Send(pid, &wire.EventBatch{Incarnation: 9})
	eventually(t, "old handler cancelled by the restart", func() bool { return g.running.Load() == 0 })
	res, err := sys.Root.RequestFuture(pid, &wire.DispatcherStatsRequest{}, waitFor).Result()
	if err != nil {
		t.Fatal(err)
	}
	if st := res.(*wire.DispatcherStats); st.Incarnation != 0 || st.Accepted != 0 {
		t.Fatalf("after the restart: %v, want a fresh instance", st)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	_ = sys.Root.StopFuture(cp).Wait()
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Stream: "s", Router: &fakeRouter{}}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Stream = "" }, "dispatcher: Config.Stream must not be empty"},
		{func(c *Config) { c.Router = nil }, "dispatcher: Config.Router must not be nil"},
		{func(c *Config) { c.Lanes = -1 }, "dispatcher: Config.Lanes must be between 1 and 1024 (0 means the default 1), got -1"},
		{func(c *Config) { c.Lanes = 1025 }, "Config.Lanes must be between 1 and 1024"},
		{func(c *Config) { c.Capacity = -5 }, "dispatcher: Config.Capacity must be between 1 and 16777216 (0 means the default 4096), got -5"},
		{func(c *Config) { c.DeadLetterRetention = -1 }, "dispatcher: Config.DeadLetterRetention must be >= 0"},
		{func(c *Config) { c.DeadLetterTimeout = -1 }, "dispatcher: Config.DeadLetterTimeout must be >= 0"},
		{func(c *Config) { c.SettleFlushInterval = -1 }, "dispatcher: Config.SettleFlushInterval must be >= 0"},
		{func(c *Config) { c.DrainTimeout = -1 }, "dispatcher: Config.DrainTimeout must be >= 0"},
		{func(c *Config) { c.StopTimeout = -1 }, "dispatcher: Config.StopTimeout must be >= 0"},
		{func(c *Config) { c.SettleBatch = -1 }, "dispatcher: Config.SettleBatch must be >= 1 (0 means the default 1024), got -1"},
	}
	for _, tc := range cases {
		c := ok
		tc.edit(&c)
		err := c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New accepted an invalid config (%s)", tc.want)
		}
	}
	multi := Config{Lanes: -1}.validate()
	for _, f := range []string{"Config.Stream", "Config.Router", "Config.Lanes"} {
		if !strings.Contains(multi.Error(), f) {
			t.Errorf("joined error %q misses %s", multi, f)
		}
	}
}

// TestConfigValidateRetryUsesThePolicy: Config.Retry is validated by policy.Retry's own
// validator (whose rules are tested in package policy), named by its path in Config, and
// refused by New.
func TestConfigValidateRetryUsesThePolicy(t *testing.T) {
	c := Config{Stream: "s", Router: &fakeRouter{}, Retry: policy.Retry{Multiplier: 0.5, MaxAttempts: -1}}
	err := c.validate()
	var fields []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		ce, ok := e.(*configerr.Error)
		if !ok {
			t.Fatalf("Retry error %v is a %T, not a *configerr.Error", e, e)
		}
		fields = append(fields, ce.Field)
	}
	walk(err)
	if fmt.Sprint(fields) != "[Config.Retry.MaxAttempts Config.Retry.Multiplier]" {
		t.Fatalf("fields %v (error %v)", fields, err)
	}
	if !errors.Is(err, configerr.ErrInvalid) {
		t.Error("a Retry rule must match configerr.ErrInvalid")
	}
	if _, err := New(c); err == nil {
		t.Error("New accepted an invalid Retry")
	}
}

// siblingParent spawns a checkpointer probe and then the dispatcher, like the stream supervisor.
type siblingParent struct {
	props *actor.Props
	cpCh  chan any
	pidCh chan *actor.PID
}

func (p *siblingParent) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		ch := p.cpCh
		if _, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: ch, nonProt: make(chan string, 8)} }), "checkpointer"); err != nil {
			panic(err)
		}
		pid, err := ctx.SpawnNamed(p.props, "dispatcher")
		if err != nil {
			panic(err)
		}
		p.pidCh <- pid
	}
}

// TestCheckpointerResolution: without Config.Checkpointer the dispatcher talks to its sibling
// "checkpointer"; AttachCheckpointer redirects it.
func TestCheckpointerResolution(t *testing.T) {
	sys := newTestSystem()
	defer sys.Shutdown()
	props, err := New(Config{Stream: "s", Router: &fakeRouter{}})
	if err != nil {
		t.Fatal(err)
	}
	cpCh, other, streamCh := make(chan any, 64), make(chan any, 64), make(chan any, 64)
	pidCh := make(chan *actor.PID, 1)
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &siblingParent{props: props, cpCh: cpCh, pidCh: pidCh}
	}))
	disp := <-pidCh
	next := func(ch chan any) any {
		select {
		case m := <-ch:
			return m
		case <-time.After(waitFor):
			t.Fatal("nothing received")
		}
		return nil
	}
	if m, ok := next(cpCh).(*wire.AttachDispatcher); !ok || m.Id != disp.Id {
		t.Fatalf("sibling checkpointer got %v, want AttachDispatcher", m)
	}
	otherPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: other, nonProt: make(chan string, 8)} }))
	stream := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: streamCh, nonProt: make(chan string, 8)} }))
	sys.Root.Send(disp, &wire.AttachCheckpointer{Address: otherPID.Address, Id: otherPID.Id})
	if _, ok := next(other).(*wire.AttachDispatcher); !ok {
		t.Fatal("attached checkpointer not told")
	}
	sys.Root.RequestWithCustomSender(disp, &wire.Subscribe{Incarnation: 1}, stream)
	next(streamCh)
	e := mkEvent(1, "a").build()
	sys.Root.Send(disp, &wire.EventBatch{Incarnation: 1, ThroughSeq: 1, Raw: [][]byte{e.raw}})
	if _, ok := next(other).(*wire.Progress); !ok {
		t.Fatal("Progress did not go to the attached checkpointer")
	}
	if b, ok := next(other).(*wire.SettledBatch); !ok || b.Runs[0].FirstSeq != 1 {
		t.Fatalf("got %v, want SettledBatch", b)
	}
	for _, p := range []*actor.PID{parent, otherPID, stream} {
		_ = sys.Root.StopFuture(p).Wait()
	}
}

// The stream actor flags a batch that ends with an invalidate; the dispatcher must carry the flag
// to the invalidate's settlement, because the checkpointer may use an invalidate's token only as
// a startAfter position.
func TestInvalidateFlagReachesSettled(t *testing.T) {
	h := newHarness(t, &fakeRouter{handle: func(context.Context, call) error { return nil }})
	h.subscribe(1)
	ins := mkEvent(1, "a").build()
	inv := tev{seq: 2, op: "invalidate"}.build()
	h.sys.Root.Send(h.disp, &wire.EventBatch{Incarnation: 1, ThroughSeq: 2, Raw: [][]byte{ins.raw, inv.raw},
		EndsWithInvalidate: true})
	h.credit -= 2
	h.waitSettled(1, 2)
	if h.settled[1].GetInvalidate() || !h.settled[2].GetInvalidate() {
		t.Fatalf("Settled.invalidate = %v, %v; want false, true", h.settled[1].GetInvalidate(), h.settled[2].GetInvalidate())
	}
}

// TestSupersededEventInRetryRunsToItsEnd: an event of the old incarnation whose first attempt
// ran (it waits for its retry) is not taken back by a new Subscribe: it is retried and settles
// under its incarnation; the event queued behind it on the lane is skipped unhandled, and the
// new incarnation's events run after it, in order.
func TestSupersededEventInRetryRunsToItsEnd(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	failed := false
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%d:%d", c.seq, c.attempt))
		if c.seq == 1 && !failed {
			failed = true
			return errors.New("transient")
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Capacity = 10; c.Lanes = 1; c.Retry.MaxAttempts = 3 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "a"))
	h.armed(1) // seq 1 waits for its retry; seq 2 behind it
	h.subscribe(2)
	h.sendInc(2, mkEvent(1, "a"), mkEvent(2, "a"))
	h.clk.Advance(time.Second)
	eventually(t, "the new incarnation's seq 2 handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 4
	})
	mu.Lock()
	got := strings.Join(calls, " ")
	mu.Unlock()
	if got != "1:1 1:2 1:1 2:1" {
		t.Fatalf("calls %q, want the old seq 1 and its retry, then the new incarnation's 1 and 2", got)
	}
	eventually(t, "nothing in flight", func() bool { return h.stats().InFlight == 0 })
}
