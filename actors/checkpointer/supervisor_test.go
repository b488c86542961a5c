package checkpointer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// streamStub plays the stream actor's side of the protocol: ResolveStart on start, HistoryLost
// when told the position is gone, and nothing on a terminal FAIL (the checkpointer escalated).
type streamStub struct {
	lost    bool // answer every start position with HistoryLost 286
	starts  chan *wire.StartFrom
	sibling *actor.PID
}

func (s *streamStub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.sibling = actor.NewPID(ctx.Self().Address, ctx.Parent().Id+"/checkpointer")
		ctx.Request(s.sibling, &wire.ResolveStart{Incarnation: streamtree.Incarnation(ctx)})
	case *wire.StartFrom:
		s.starts <- m
		switch {
		case m.GetKind() == messages.StartKind_START_KIND_FAIL && m.GetTerminal():
			// Wait to be stopped by the supervisor.
		case m.GetKind() == messages.StartKind_START_KIND_FAIL:
			streamtree.Fail(ctx, errors.New("stub: transient start failure: "+m.GetReason()))
		case s.lost && tokData(m.GetToken()) == "old":
			ctx.Request(s.sibling, &wire.HistoryLost{Incarnation: m.GetIncarnation(), Code: 286, Message: "gone"})
		default:
			streamtree.NotifyResubscribed(ctx)
		}
	}
}

// TestUnderSupervisorHistoryLostFailGivesUp runs the checkpointer as the supervisor's sibling:
// history lost under Fail must crash the stream at once (terminal), not restart it.
func TestUnderSupervisorHistoryLostFailGivesUp(t *testing.T) {
	sys := newTestSystem()
	clk := clock.NewFake(time.Time{})
	ms := memstore.New(memstore.Options{})
	if err := ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("old")}); err != nil {
		t.Fatal(err)
	}
	cpProps, err := New(Config{Stream: "orders", Store: ms, Positions: &fakePositions{token: tok("now")},
		Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	starts := make(chan *wire.StartFrom, 16)
	transitions := make(chan supervisor.Transition, 64)
	supProps, err := supervisor.New(supervisor.Config{
		Stream:       "orders",
		Child:        actor.PropsFromProducer(func() actor.Actor { return &streamStub{lost: true, starts: starts} }),
		Siblings:     []supervisor.Sibling{{Name: "checkpointer", Props: cpProps}},
		Classify:     streamtree.TerminalOn(streamtree.ErrHistoryLost, store.ErrFenced),
		Clock:        clk,
		OnTransition: func(tr supervisor.Transition) { transitions <- tr },
	})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.Root.SpawnNamed(supProps, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
		goleak.VerifyNone(t)
	}()
	if sf := recv(t, starts); sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER {
		t.Fatalf("first start %v", sf)
	}
	// The terminal FAIL may or may not reach the stub: the supervisor stops it (dropping its
	// mailbox) as soon as the checkpointer's failure arrives. What matters is the give-up.
	deadline := time.After(waitFor)
	for {
		select {
		case tr := <-transitions:
			if tr.To == messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
				t.Fatalf("history lost under Fail was treated as transient: %v", tr.Cause)
			}
			if tr.To != messages.SupervisorState_SUPERVISOR_STATE_CRASHED {
				continue
			}
			var pe *streamtree.PanicError
			if !errors.Is(tr.Cause, streamtree.ErrHistoryLost) || errors.As(tr.Cause, &pe) || strings.Contains(tr.Cause.Error(), "panic") {
				t.Fatalf("crashed with %v, want streamtree.ErrHistoryLost, not a panic", tr.Cause)
			}
			// Stopping the crashed tree (the failed checkpointer is still suspended) is prompt.
			start := time.Now()
			if err := sys.Root.StopFuture(pid).Wait(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("stop took %v", d)
			}
			return
		case <-deadline:
			t.Fatal("the supervisor did not give up")
		}
	}
}

// TestUnderSupervisorResumeFromNow: the stream gets a fresh position and runs; the gap is stored.
func TestUnderSupervisorResumeFromNow(t *testing.T) {
	sys := newTestSystem()
	clk := clock.NewFake(time.Time{})
	ms := memstore.New(memstore.Options{})
	if err := ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("old")}); err != nil {
		t.Fatal(err)
	}
	cpProps, err := New(Config{Stream: "orders", Store: ms, Gaps: ms, OnHistoryLost: policy.ResumeFromNow,
		Positions: &fakePositions{token: tok("now"), ts: bson.Timestamp{T: 7}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	starts := make(chan *wire.StartFrom, 16)
	stub := &streamStub{lost: true, starts: starts}
	supProps, err := supervisor.New(supervisor.Config{
		Stream:   "orders",
		Child:    actor.PropsFromProducer(func() actor.Actor { return stub }),
		Siblings: []supervisor.Sibling{{Name: "checkpointer", Props: cpProps}},
		Clock:    clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.Root.SpawnNamed(supProps, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
		goleak.VerifyNone(t)
	}()
	recv(t, starts)
	if sf := recv(t, starts); sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "now" {
		t.Fatalf("after history lost %v", sf)
	}
	gaps, err := ms.ListGaps(context.Background(), store.Scope{Stream: "orders"})
	if err != nil || len(gaps) != 1 || tokData(gaps[0].FromToken) != "old" || tokData(gaps[0].ToToken) != "now" {
		t.Fatalf("gaps %+v %v", gaps, err)
	}
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("nothing received within %v", waitFor)
	}
	var zero T
	return zero
}

// TestUnderSupervisorFencedGivesUp: a fenced checkpoint write crashes the stream at once.
func TestUnderSupervisorFencedGivesUp(t *testing.T) {
	sys := newTestSystem()
	clk := clock.NewFake(time.Time{})
	ms := memstore.New(memstore.Options{})
	cpProps, err := New(Config{Stream: "orders", Store: ms, Positions: &fakePositions{token: tok("now")},
		Clock: clk, Epoch: func() int64 { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	starts := make(chan *wire.StartFrom, 16)
	transitions := make(chan supervisor.Transition, 64)
	supProps, err := supervisor.New(supervisor.Config{
		Stream:       "orders",
		Child:        actor.PropsFromProducer(func() actor.Actor { return &streamStub{starts: starts} }),
		Siblings:     []supervisor.Sibling{{Name: "checkpointer", Props: cpProps}},
		Classify:     streamtree.TerminalOn(streamtree.ErrHistoryLost, store.ErrFenced),
		Clock:        clk,
		OnTransition: func(tr supervisor.Transition) { transitions <- tr },
	})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.Root.SpawnNamed(supProps, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
		goleak.VerifyNone(t)
	}()
	if sf := recv(t, starts); sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER {
		t.Fatalf("start %v", sf)
	}
	// A newer owner (epoch 2) writes; our next write is fenced.
	if err := ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("theirs"), Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	cp := actor.NewPID(pid.Address, pid.Id+"/checkpointer")
	sys.Root.Send(cp, &wire.Progress{Incarnation: 1, ThroughSeq: 1})
	sys.Root.Send(cp, &wire.SettledBatch{Incarnation: 1, Runs: singleRuns(1)})
	sys.Root.Send(cp, &wire.Flush{})
	deadline := time.After(waitFor)
	for {
		select {
		case tr := <-transitions:
			if tr.To == messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
				t.Fatalf("fencing was treated as transient: %v", tr.Cause)
			}
			if tr.To != messages.SupervisorState_SUPERVISOR_STATE_CRASHED {
				continue
			}
			var pe *streamtree.PanicError
			if !errors.Is(tr.Cause, store.ErrFenced) || errors.As(tr.Cause, &pe) || strings.Contains(tr.Cause.Error(), "panic") {
				t.Fatalf("crashed with %v, want store.ErrFenced, not a panic", tr.Cause)
			}
			return
		case <-deadline:
			t.Fatal("the supervisor did not give up")
		}
	}
}
