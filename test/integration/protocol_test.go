package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/messages"
)

// TestSpawnFixesTheStartPosition: when Spawn returns, the start position is fixed: a write
// committed right after it is delivered, with the default Resume and no checkpoint and with
// Latest, every time (100 spawns in a row for each, a fresh stream each).
func TestSpawnFixesTheStartPosition(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	coll := e.db.Collection("orders")
	for run, start := range []struct {
		name string
		pos  watchtree.StartPosition
	}{{"resume", watchtree.Resume}, {"latest", watchtree.Latest}} {
		t.Run(start.name, func(t *testing.T) {
			const spawns = 100
			missed := 0
			for i := range spawns {
				id := int64(run*1000 + i)
				seen := make(chan struct{})
				var once atomic.Bool
				h := r.spawn(t, watchtree.Stream[Order]{
					Name: fmt.Sprintf("fix-%s-%d", start.name, i), Collection: "orders", StartPosition: start.pos,
					OnInsert: func(_ context.Context, ev *watchtree.Event[Order]) error {
						if ev.FullDocument.ID == id && once.CompareAndSwap(false, true) {
							close(seen)
						}
						return nil
					},
				})
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				if _, err := coll.InsertOne(ctx, Order{ID: id}); err != nil {
					cancel()
					t.Fatal(err)
				}
				select {
				case <-seen:
				case <-time.After(5 * time.Second):
					missed++
				}
				if err := h.Stop(ctx); err != nil {
					t.Errorf("Stop: %v", err)
				}
				cancel()
			}
			if missed > 0 {
				t.Fatalf("%d of %d writes made right after Spawn returned were never delivered", missed, spawns)
			}
		})
	}
}

// TestTreeDrivenByMessagesOnly: a stream tree spawned under the user's own actor system through
// Props is driven only by protobuf messages to its supervisor's PID (status, stop, start,
// restart), the way a remote console or a parent actor drives it. A graceful Stop message gives
// the guarantee Handle.Stop gives: the in-flight events finish, the final position is written,
// and nothing handled before the stop is delivered again after the next start.
func TestTreeDrivenByMessagesOnly(t *testing.T) {
	e := newEnv(t)
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	r := e.startRuntime(func(c *watchtree.Config) { c.ActorSystem = sys })
	got := newHandled()
	var slow atomic.Bool
	slow.Store(true)
	props, err := watchtree.Props(r.rt, watchtree.Stream[Order]{Name: "msgs", Collection: "orders", Lanes: 4,
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			if slow.Load() {
				time.Sleep(20 * time.Millisecond) // keeps events in flight when the stop arrives
			}
			got.record(ev)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.Root.SpawnNamed(props, "user-tree")
	if err != nil {
		t.Fatal(err)
	}
	ask := func(msg any) *messages.StatusReply {
		t.Helper()
		res, err := sys.Root.RequestFuture(pid, msg, waitLimit).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		reply, ok := res.(*messages.StatusReply)
		if !ok {
			t.Fatalf("%T answered %T, want *messages.StatusReply", msg, res)
		}
		return reply
	}
	state := func(r *messages.StatusReply) string { return r.GetState().String() }

	if st := ask(&messages.AwaitRunning{}); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("AwaitRunning answered %s: %s", state(st), st.GetWhy())
	}
	e.insertOrders("orders", 1, 40)
	waitFor(t, "some events handled", func() bool { return got.distinct() >= 5 })

	stopped := ask(&messages.Stop{Reason: "test", Graceful: true})
	if stopped.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		t.Fatalf("graceful Stop answered %s: %s", state(stopped), stopped.GetWhy())
	}
	rep := stopped.GetLastStop()
	if rep == nil || !rep.GetDrained() || !rep.GetFlushed() || rep.GetUnsettled() != 0 || rep.GetError() != "" {
		t.Fatalf("stop report %v, want drained and flushed with nothing unsettled", rep)
	}
	handledAtStop := got.distinct()
	if rep.GetSettled() != uint64(handledAtStop) || stopped.GetSettlements().GetHandled() != uint64(handledAtStop) {
		t.Fatalf("stop report settled %d, status handled %d, handler saw %d: every settled event must be handled",
			rep.GetSettled(), stopped.GetSettlements().GetHandled(), handledAtStop)
	}
	if cp := stopped.GetCheckpoint(); cp == nil || len(cp.GetToken()) == 0 {
		t.Fatalf("no checkpoint in the status after a graceful stop: %v", stopped)
	}
	if st := ask(&messages.StatusRequest{}); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		t.Fatalf("status after the stop: %s", state(st))
	}

	slow.Store(false)
	if st := ask(&messages.Start{Reason: "test"}); st.GetState() == messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		t.Fatalf("Start left the stream stopped: %s", st.GetWhy())
	}
	if st := ask(&messages.AwaitRunning{}); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("after Start: %s: %s", state(st), st.GetWhy())
	}
	waitFor(t, "all 40 events handled", func() bool { return got.distinct() == 40 })
	if d := got.deliveries(); d != 40 {
		t.Fatalf("%d deliveries for 40 events: events handled before the graceful stop were delivered again", d)
	}

	before := ask(&messages.StatusRequest{}).GetIncarnation()
	ask(&messages.Restart{Reason: "test"})
	if st := ask(&messages.AwaitRunning{}); st.GetIncarnation() != before+1 ||
		st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("after Restart: incarnation %d (was %d), %s", st.GetIncarnation(), before, state(st))
	}
	e.insertOrders("orders", 41, 45)
	waitFor(t, "45 events handled", func() bool { return got.distinct() == 45 })

	// The runtime's own view is the same reply, through the Handle.
	h, err := r.rt.Handle("msgs")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The handler saw the 45th event before its settlement reached the supervisor's counts.
	var st watchtree.StreamStatus
	waitFor(t, "the status counting 45 handled", func() bool {
		st, err = h.Status(ctx)
		return err == nil && st.Handled >= 45
	}, func() string { return fmt.Sprintf("%+v, %v", st, err) })
	if st.State != watchtree.StateRunning || st.LastStop == nil || !st.LastStop.Flushed {
		t.Fatalf("Handle.Status = %+v, %v", st, err)
	}
}

// TestStopNamesWhatHeldItUp: a graceful stop whose drain cannot finish in time ends anyway,
// says which step held it up, and the events left unsettled are delivered again after a start.
func TestStopNamesWhatHeldItUp(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got, hold := newHandled(), newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "held", Collection: "orders",
		OnInsert: hold.handler(2, got)})
	e.insertOrders("orders", 1, 2)
	hold.waitEntered(t, 2) // order 2 is in flight, held by its handler

	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	err := h.Stop(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "drain") {
		t.Fatalf("Stop: %v, want a deadline error naming the drain", err)
	}
	hold.Release()
	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := h.Status(ctx)
	if err != nil || st.State != watchtree.StateStopped || st.LastStop == nil || st.LastStop.HeldUpBy != "drain" ||
		st.LastStop.Unsettled == 0 {
		t.Fatalf("status after a held-up stop: %+v (last stop %+v), %v", st, st.LastStop, err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "order 2 handled after the start", func() bool { return got.docs()[2] })
}
