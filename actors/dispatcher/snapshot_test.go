package dispatcher

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// snapProbe is the snapshot source of a test: its SnapshotDemand and SnapshotSettled messages.
type snapProbe struct {
	pid *actor.PID
	ch  chan any
}

func newSnapProbe(h *harness) *snapProbe {
	p := &snapProbe{ch: make(chan any, 1<<12)}
	p.pid = h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: p.ch, nonProt: h.nonProto} }))
	h.t.Cleanup(func() { _ = h.sys.Root.StopFuture(p.pid).Wait() })
	return p
}

func (p *snapProbe) next(t *testing.T) any {
	t.Helper()
	select {
	case m := <-p.ch:
		return m
	case <-time.After(waitFor):
		t.Fatal("the snapshot source received nothing")
		return nil
	}
}

func snapBatch(run uint64, evs ...tev) *wire.SnapshotBatch {
	b := &wire.SnapshotBatch{Run: run}
	for _, e := range evs {
		e = e.build()
		b.Events = append(b.Events, &wire.Event{Seq: e.seq, Raw: e.raw})
	}
	return b
}

// TestSnapshotSource: snapshot events run in the lanes with their own capacity, settle back to
// the snapshot source (never to the checkpointer, never in the stream's counts), a batch of an
// older run is dropped, and a drain waits for the snapshot events in flight.
func TestSnapshotSource(t *testing.T) {
	g := newGate()
	h := newHarness(t, &fakeRouter{handle: g.handle}, func(c *Config) { c.Capacity = 8; c.Lanes = 2 })
	sp := newSnapProbe(h)
	h.sys.Root.RequestWithCustomSender(h.disp, &wire.SnapshotSubscribe{Run: 5}, sp.pid)
	d, ok := sp.next(t).(*wire.SnapshotDemand)
	if !ok || d.GetRun() != 5 || d.GetCredit() != 8 {
		t.Fatalf("first answer %v, want SnapshotDemand{run 5, credit 8}", d)
	}
	h.sys.Root.Send(h.disp, snapBatch(5, mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "a")))
	// The stream's credit does not shrink for snapshot events in flight.
	if c := h.subscribe(1); c != 8 {
		t.Fatalf("stream credit with 3 snapshot events in flight = %d, want its own 8", c)
	}
	h.sys.Root.Send(h.disp, snapBatch(4, mkEvent(9, "z"))) // an older run: dropped
	// A drain waits for the snapshot events.
	drained := h.sys.Root.RequestFuture(h.disp, &wire.Drain{}, waitFor)
	g.open(1 << 10)
	settled := map[uint64]messages.Outcome{}
	for len(settled) < 3 {
		switch m := sp.next(t).(type) {
		case *wire.SnapshotSettled:
			if m.GetRun() != 5 {
				t.Fatalf("settlement of run %d", m.GetRun())
			}
			for _, s := range m.GetSettled() {
				settled[s.GetSeq()] = s.GetOutcome()
			}
		case *wire.SnapshotDemand:
		default:
			t.Fatalf("snapshot source got %T", m)
		}
	}
	for seq, o := range settled {
		if o != messages.Outcome_OUTCOME_HANDLED || seq < 1 || seq > 3 {
			t.Fatalf("settlements %v", settled)
		}
	}
	res, err := drained.Result()
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if dr := res.(*wire.Drained); dr.GetTimedOut() || dr.GetUnsettled() != 0 {
		t.Fatalf("Drained %v", dr)
	}
	st := h.stats()
	if st.Settled != 0 || st.Accepted != 0 || st.StaleBatches != 1 {
		t.Fatalf("stats %v: snapshot events must not count as the stream's, the older run's batch is stale", st)
	}
	h.drainCP()
	if len(h.settled) != 0 {
		t.Fatalf("the checkpointer got snapshot settlements: %v", h.order)
	}
	if n := g.started.Load(); n != 3 {
		t.Fatalf("%d handler calls, want 3", n)
	}
}
