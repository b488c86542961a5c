package supervisor

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// restartHarness is a harness whose dispatcher and checkpointer siblings pass every Drain and
// Flush to the returned channel; the test answers them. onStart (nil: every incarnation opens
// its cursor) scripts the fake stream before the supervisor is spawned: the supervisor launches
// incarnation 1 as soon as it starts, so a script set after this returns may come too late.
func restartHarness(t *testing.T, onStart func(inc uint64) action) (*harness, chan askedStep) {
	t.Helper()
	asked := make(chan askedStep, 16)
	h := newHarnessH(t, func(h *harness, c *Config) {
		h.probe.setOnStart(onStart)
		for _, name := range []string{"dispatcher", "checkpointer"} {
			starts, name := h.starts, name
			c.Siblings = append(c.Siblings, Sibling{Name: name, Props: actor.PropsFromProducer(func() actor.Actor {
				return &fakeSibling{starts: starts, name: name, asked: asked}
			})})
		}
		c.Dispatcher, c.Checkpointer = "dispatcher", "checkpointer"
	})
	return h, asked
}

func nextStep(t *testing.T, asked chan askedStep, sibling string) {
	t.Helper()
	select {
	case st := <-asked:
		if st.name != sibling {
			t.Fatalf("%T sent to the %s, want a step of the %s", st.msg, st.name, sibling)
		}
	case <-time.After(waitFor):
		t.Fatalf("the %s was asked nothing", sibling)
	}
}

// An operator Restart of a running stream closes the cursor, drains the dispatcher and writes
// the final checkpoint before the new incarnation starts, so that the new cursor opens after
// everything the old one delivered. AwaitRunning waits for the new cursor, not for the end of
// the stop.
func TestOperatorRestartIsGraceful(t *testing.T) {
	h, asked := restartHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)

	if r := h.request(&messages.Restart{Reason: "reload"}); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPING {
		t.Fatalf("Restart answered %v, want stopping", r.GetState())
	}
	running := h.sys.Root.RequestFuture(h.pid, &messages.AwaitRunning{}, waitFor)
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING); tr.Why != "operator restart: reload: closing the cursor" {
		t.Fatalf("why %q", tr.Why)
	}
	select {
	case <-h.probe.stopping:
	case <-time.After(waitFor):
		t.Fatal("the stream actor was not stopped")
	}
	nextStep(t, asked, "dispatcher")
	h.noStart()
	h.tell(h.pid, &wire.Drained{Settled: 5})
	nextStep(t, asked, "checkpointer")
	h.noStart()
	if st := h.status(); st.GetWhy() != "operator restart: reload: writing the final checkpoint" {
		t.Fatalf("why while flushing %q", st.GetWhy())
	}
	h.tell(h.pid, &wire.Flushed{LowWaterMark: 9})

	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("restarted as incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	res, err := running.Result()
	if err != nil {
		t.Fatalf("AwaitRunning: %v", err)
	}
	if r := res.(*messages.StatusReply); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("AwaitRunning answered %v, want running", r.GetState())
	}
	st := h.status()
	if ls := st.GetLastStop(); ls.GetSettled() != 5 || ls.GetLowWaterMark() != 9 || !ls.GetFlushed() {
		t.Fatalf("last stop %v, want settled 5, low-water mark 9, flushed", ls)
	}
	if st.GetDeaths() != 0 || st.GetAttempt() != 0 {
		t.Fatalf("status %v: a restart is not a death", st)
	}
}

// An operator Stop during a restart's drain wins: the stream ends stopped, nothing relaunches.
func TestStopDuringRestartEndsStopped(t *testing.T) {
	h, asked := restartHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.request(&messages.Restart{Reason: "reload"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	nextStep(t, asked, "dispatcher")
	stopped := h.sys.Root.RequestFuture(h.pid, &messages.Stop{Graceful: true, Reason: "maintenance"}, waitFor)
	h.tell(h.pid, &wire.Drained{})
	nextStep(t, asked, "checkpointer")
	h.tell(h.pid, &wire.Flushed{})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED); tr.Why != "operator stop: maintenance" {
		t.Fatalf("why %q", tr.Why)
	}
	res, err := stopped.Result()
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if r := res.(*messages.StatusReply); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		t.Fatalf("Stop answered %v", r.GetState())
	}
	h.noTransition()
	h.noStart()
}

// A Restart of a stream that is not up (here: in backoff) starts it at once: there is nothing
// to drain.
func TestRestartInBackoffLaunchesAtOnce(t *testing.T) {
	h, asked := restartHarness(t, func(inc uint64) action {
		if inc == 1 {
			return actPanic
		}
		return actResubscribe
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.request(&messages.Restart{Reason: "now"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	select {
	case st := <-asked:
		t.Fatalf("a restart from backoff sent %T to the %s", st.msg, st.name)
	default:
	}
}

// A SingleLeader restart keeps the lease: no Resign, the new incarnation runs in the same term.
func TestSingleLeaderRestartKeepsLease(t *testing.T) {
	h, leader, asked := leaderHarness(t)
	leadAndRun(t, h, leader, asked, 3)

	h.request(&messages.Restart{Reason: "reload"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	select {
	case m := <-asked:
		t.Fatalf("the leader was sent %T during a restart", m)
	default:
	}
}

// A step of the clock's wall time (Now) during a graceful stop leaves the drain its budget:
// three quarters of the time left, measured on the monotonic reading. Measured on Now, a
// forward step of an hour left the drain 1 ms.
func TestStopDrainBudgetIgnoresAWallClockStep(t *testing.T) {
	for _, jump := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(jump.String(), func(t *testing.T) {
			h, asked := restartHarness(t, nil)
			h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
			h.started()
			h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
			if r := h.request(&messages.Restart{Reason: "reload"}); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPING {
				t.Fatalf("Restart answered %v, want stopping", r.GetState())
			}
			h.clk.Jump(jump) // after beginStop fixed the deadline, before the drain's budget
			h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
			select {
			case <-h.probe.stopping:
			case <-time.After(waitFor):
				t.Fatal("the stream actor was not stopped")
			}
			var st askedStep
			select {
			case st = <-asked:
			case <-time.After(waitFor):
				t.Fatal("the dispatcher was asked nothing")
			}
			d, ok := st.msg.(*wire.Drain)
			if !ok || st.name != "dispatcher" {
				t.Fatalf("%T to the %s, want a Drain to the dispatcher", st.msg, st.name)
			}
			if want := (defaultStopTimeout * 3 / 4).Milliseconds(); d.GetTimeoutMs() != want {
				t.Fatalf("drain budget %d ms, want %d (3/4 of the stop's %v)", d.GetTimeoutMs(), want, defaultStopTimeout)
			}
			h.tell(h.pid, &wire.Drained{})
			nextStep(t, asked, "checkpointer")
			h.tell(h.pid, &wire.Flushed{})
			h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
		})
	}
}
