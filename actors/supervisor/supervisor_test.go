package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

func TestSpawnResubscribeRunning(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	ev := h.started()
	if ev.incarnation != 1 {
		t.Fatalf("first incarnation = %d, want 1", ev.incarnation)
	}
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if tr.Attempt != 0 || tr.Cause != nil || tr.Stream != "orders" {
		t.Fatalf("running transition = %+v", tr)
	}
	st := h.status()
	if st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING || st.GetIncarnation() != 1 ||
		st.GetStream() != "orders" || !strings.Contains(st.GetWhy(), "cursor open") {
		t.Fatalf("status = %v", st)
	}
	if st.GetTransitions()["starting"] != 1 || st.GetTransitions()["running"] != 1 || len(st.GetTransitions()) != 2 {
		t.Fatalf("transition counts = %v", st.GetTransitions())
	}
	// Every transition is logged with the stream name.
	for _, e := range h.logs.FilterMessageSnippet("stream ").All() {
		if e.ContextMap()["stream"] != "orders" {
			t.Fatalf("log line %q without stream=orders: %v", e.Message, e.ContextMap())
		}
	}
	if n := h.logs.FilterMessage("stream running").Len(); n != 1 {
		t.Fatalf("%d 'stream running' log lines, want 1", n)
	}
}

// TestRestartDelaysExact: with the defaults and a child whose cursor never opens, the restart
// delays are exactly 1s, 2s, 4s, 8s, 16s, 32s, then capped at 60s.
func TestRestartDelaysExact(t *testing.T) {
	h := scripted(t, func(uint64) action { return actPanic }, nil)
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	for i, w := range want {
		w *= time.Second
		h.started()
		tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
		if tr.Attempt != i+1 || tr.Delay != w {
			t.Fatalf("death %d: attempt %d delay %v, want attempt %d delay %v", i+1, tr.Attempt, tr.Delay, i+1, w)
		}
		st := h.status()
		if st.GetLastDelay().AsDuration() != w || st.GetAttempt() != uint32(i+1) {
			t.Fatalf("status after death %d: last_delay %v attempt %d", i+1, st.GetLastDelay().AsDuration(), st.GetAttempt())
		}
		if got := st.GetNextRetryAt().AsTime().Sub(h.clk.Now()); got != w {
			t.Fatalf("next_retry_at is now+%v, want now+%v", got, w)
		}
		h.fireRestart(w)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	}
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if st := h.status(); st.GetRestarts() != uint64(len(want)) || st.GetDeaths() != uint64(len(want)+1) {
		t.Fatalf("restarts %d deaths %d, want %d and %d", st.GetRestarts(), st.GetDeaths(), len(want), len(want)+1)
	}
}

func TestRestartDelaysCustomPolicy(t *testing.T) {
	h := scripted(t, func(uint64) action { return actPanic }, func(c *Config) {
		c.Policy = policy.Restart{InitialDelay: 100 * time.Millisecond, Multiplier: 3, MaxDelay: time.Second}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	for _, w := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, time.Second} {
		h.started()
		if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Delay != w {
			t.Fatalf("delay %v, want %v", tr.Delay, w)
		}
		h.fireRestart(w)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	}
}

// TestJitterBoundsThroughSupervisor injects the random source: 0 gives ×0.8, 1 gives ×1.2, 0.5
// gives the plain delay.
func TestJitterBoundsThroughSupervisor(t *testing.T) {
	rs := []float64{0, 1, 0.5}
	var i atomic.Int32
	h := scripted(t, func(uint64) action { return actPanic }, func(c *Config) {
		c.Policy = policy.Restart{Jitter: true}
		c.Rand = func() float64 { return rs[int(i.Add(1)-1)%len(rs)] }
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	for _, w := range []time.Duration{800 * time.Millisecond, 2400 * time.Millisecond, 4 * time.Second} {
		h.started()
		if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Delay != w {
			t.Fatalf("jittered delay %v, want %v", tr.Delay, w)
		}
		h.fireRestart(w)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	}
}

// TestGiveUpAfterMaxAttempts: MaxAttempts 3 allows three restarts; the fourth death gives up at
// once (no timer), reports the cause with its stack, stops the child and stays down until an
// operator Start.
func TestGiveUpAfterMaxAttempts(t *testing.T) {
	h := scripted(t, func(uint64) action { return actPanic }, func(c *Config) { c.Policy = policy.Restart{MaxAttempts: 3} })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	for i, w := range []time.Duration{1, 2, 4} {
		h.started()
		if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != i+1 {
			t.Fatalf("attempt %d, want %d", tr.Attempt, i+1)
		}
		h.fireRestart(w * time.Second)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	}
	h.started()
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_CRASHED)
	if tr.Cause == nil || !strings.Contains(tr.Cause.Error(), "cursor died in incarnation 4") || !errors.Is(tr.Cause, streamtree.ErrGaveUp) {
		t.Fatalf("give-up cause = %v, want streamtree.ErrGaveUp around the last death", tr.Cause)
	}
	var pe *streamtree.PanicError
	if !errors.As(tr.Cause, &pe) || !strings.Contains(string(pe.Stack), "fakeStream") {
		t.Fatalf("give-up cause carries no panic stack: %#v", tr.Cause)
	}
	if !strings.Contains(tr.Why, "gave up after 3 restart attempts") {
		t.Fatalf("why = %q", tr.Why)
	}
	if h.clk.Pending() != 0 {
		t.Fatal("a restart timer is pending after give-up")
	}
	select {
	case <-h.probe.stopping:
	case <-time.After(waitFor):
		t.Fatal("stream child not stopped on give-up")
	}
	st := h.status()
	if st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_CRASHED ||
		!strings.Contains(st.GetLastCause(), "cursor died") || !strings.Contains(st.GetLastCauseStack(), "fakeStream") {
		t.Fatalf("status = %v", st)
	}
	if n := h.logs.FilterMessage("stream crashed").Len(); n != 1 {
		t.Fatalf("%d 'stream crashed' log lines, want 1", n)
	}
	h.clk.Advance(time.Hour)
	h.noTransition()
	h.noStart()

	// Terminal: only an operator Start revives it, with a fresh counter.
	h.probe.setOnStart(func(uint64) action { return actResubscribe })
	if r := h.request(&messages.Start{Reason: "test"}); r.GetAttempt() != 0 {
		t.Fatalf("attempt after operator start = %d", r.GetAttempt())
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 5 {
		t.Fatalf("incarnation after operator start = %d, want 5", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestCounterResetAfterResubscribed: deaths before the cursor opens grow the counter; the first
// Resubscribed resets it, so the next death starts again at attempt 1 and 1s.
func TestCounterResetAfterResubscribed(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc == 2 || inc == 3 {
			return actPanic
		}
		return actResubscribe
	}, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid

	h.tell(child, panicCmd{errBoom})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", tr.Attempt)
	}
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started() // 2 panics
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", tr.Attempt)
	}
	h.fireRestart(2 * time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started() // 3 panics
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.fireRestart(4 * time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started() // 4 resubscribes
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if tr.Attempt != 3 || tr.Cause == nil {
		t.Fatalf("running after restart: attempt %d cause %v, want 3 and the last cause", tr.Attempt, tr.Cause)
	}
	if st := h.status(); st.GetAttempt() != 0 {
		t.Fatalf("attempt after resubscribe = %d", st.GetAttempt())
	}

	h.tell(child, panicCmd{errBoom})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != 1 || tr.Delay != time.Second {
		t.Fatalf("after reset: attempt %d delay %v, want 1 and 1s", tr.Attempt, tr.Delay)
	}
}

// TestEveryDeathConsumesAnAttempt: a child that dies right after resubscribing. The Resubscribed
// it sent before dying is handled first (reset), and the death is not lost: it consumes an
// attempt and schedules a restart, every time.
func TestEveryDeathConsumesAnAttempt(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc > 3 {
			return actResubscribe
		}
		return actResubscribePanic
	}, func(c *Config) { c.Policy = policy.Restart{MaxAttempts: 1} })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	for i := 1; i <= 3; i++ {
		if ev := h.started(); ev.incarnation != uint64(i) {
			t.Fatalf("incarnation %d, want %d", ev.incarnation, i)
		}
		h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
		tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
		if tr.Attempt != 1 || tr.Delay != time.Second || !strings.Contains(tr.Cause.Error(), "right after resubscribing") {
			t.Fatalf("cycle %d: %+v", i, tr)
		}
		h.fireRestart(time.Second)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	}
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if st := h.status(); st.GetDeaths() != 3 || st.GetStaleDropped() != 0 {
		t.Fatalf("deaths %d stale %d, want 3 and 0", st.GetDeaths(), st.GetStaleDropped())
	}
}

// TestOperatorStartDuringBackoffWins: a Start during a long backoff cancels the timer, restarts
// at once and resets the counter; the cancelled timer never fires.
func TestOperatorStartDuringBackoffWins(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc == 1 || inc >= 4 {
			return actResubscribe
		}
		return actPanic
	}, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, panicCmd{errBoom})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.fireRestart(2 * time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != 3 || tr.Delay != 4*time.Second {
		t.Fatalf("before operator start: %+v", tr)
	}

	r := h.request(&messages.Start{Reason: "ops"})
	if r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STARTING || r.GetAttempt() != 0 || r.GetNextRetryAt() != nil {
		t.Fatalf("reply to Start = %v", r)
	}
	if !strings.Contains(r.GetWhy(), "operator start: ops") {
		t.Fatalf("why = %q", r.GetWhy())
	}
	if h.clk.Pending() != 0 {
		t.Fatal("restart timer still pending after operator start")
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	ev := h.started()
	if ev.incarnation != 4 || !ev.pid.Equal(child) {
		t.Fatalf("restarted %v incarnation %d, want %v incarnation 4", ev.pid, ev.incarnation, child)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.clk.Advance(time.Hour)
	h.noTransition()
	h.noStart()
	if st := h.status(); st.GetRestarts() != 2 {
		t.Fatalf("policy restarts = %d, want 2", st.GetRestarts())
	}
}

// TestOperatorStopDuringBackoffCancels: a Stop during backoff cancels the pending restart and
// stops the child; time passing restarts nothing.
func TestOperatorStopDuringBackoffCancels(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, panicCmd{errBoom})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.armed()

	r := h.request(&messages.Stop{Reason: "maintenance"})
	if r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED || r.GetWhy() != "operator stop: maintenance" {
		t.Fatalf("reply to Stop = %v", r)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	if h.clk.Pending() != 0 {
		t.Fatal("restart timer still pending after operator stop")
	}
	select {
	case <-h.probe.stopping:
	case <-time.After(waitFor):
		t.Fatal("stream child not stopped")
	}
	h.clk.Advance(time.Hour)
	h.noTransition()
	h.noStart()

	// A Start afterwards spawns a fresh child once the old one is gone.
	h.request(&messages.Start{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestStopThenStartImmediately: a Start right after a Stop waits for the old child to be gone
// before spawning the new one under the same name.
func TestStopThenStartImmediately(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.started()
	h.tell(h.pid, &messages.Stop{})
	h.tell(h.pid, &messages.Start{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestTerminalErrorGivesUpImmediately: a death classified terminal crashes at once, whatever
// the attempts left.
func TestTerminalErrorGivesUpImmediately(t *testing.T) {
	errHistoryLost := errors.New("history lost")
	h := newHarness(t, func(c *Config) { c.Classify = streamtree.TerminalOn(errHistoryLost) })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, panicCmd{fmt.Errorf("resume: %w", errHistoryLost)})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_CRASHED)
	if !errors.Is(tr.Cause, errHistoryLost) || !strings.HasPrefix(tr.Why, "terminal error") || tr.Attempt != 0 {
		t.Fatalf("crashed transition = %+v", tr)
	}
	if h.clk.Pending() != 0 {
		t.Fatal("restart timer armed for a terminal error")
	}
}

// TestEscalateFailureWithoutPanic: a child may fail with EscalateFailure; the error is the cause.
func TestEscalateFailureWithoutPanic(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, escalateCmd{errBoom})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, errBoom) {
		t.Fatalf("cause = %v", tr.Cause)
	}
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestFailIsNotAPanic: Fail reports the error as the death's cause with the error's own text:
// no "panic: " prefix and no stack, in the transition and in the status.
func TestFailIsNotAPanic(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, failCmd{errBoom})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	var pe *streamtree.PanicError
	var f *streamtree.Failure
	if !errors.Is(tr.Cause, errBoom) || errors.As(tr.Cause, &pe) || !errors.As(tr.Cause, &f) || f.Incarnation != 1 {
		t.Fatalf("cause %T %v, want a *streamtree.Failure of incarnation 1 wrapping errBoom, not a panic", tr.Cause, tr.Cause)
	}
	if tr.Cause.Error() != errBoom.Error() {
		t.Fatalf("cause text %q, want the error's own %q", tr.Cause.Error(), errBoom.Error())
	}
	if st := h.status(); st.GetLastCause() != errBoom.Error() || st.GetLastCauseStack() != "" {
		t.Fatalf("status cause %q stack %q, want %q and no stack", st.GetLastCause(), st.GetLastCauseStack(), errBoom.Error())
	}
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestStaleFailureDropped: a *streamtree.Failure of an incarnation the supervisor already replaced (it
// raced an operator Restart) is dropped, not counted as a death of the new instance.
func TestStaleFailureDropped(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.started()
	h.request(&messages.Restart{Reason: "test"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	child := h.started().pid
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.tell(child, escalateAsCmd{err: errBoom, inc: 1})
	for deadline := time.Now().Add(waitFor); h.status().GetStaleDropped() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("stale failure not dropped: status %v", h.status())
		}
		time.Sleep(time.Millisecond) // a polling tick
	}
	h.noTransition()
	if st := h.status(); st.GetDeaths() != 0 || st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("deaths %d state %v, want 0 and running", st.GetDeaths(), st.GetState())
	}
}

// TestChildStoppingItselfIsADeath: a stream actor that stops by itself is respawned through the
// policy with streamtree.ErrChildStopped.
func TestChildStoppingItselfIsADeath(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, stopSelfCmd{})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, streamtree.ErrChildStopped) {
		t.Fatalf("cause = %v", tr.Cause)
	}
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 || ev.pid.Id != child.Id {
		t.Fatalf("respawned %v incarnation %d", ev.pid, ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestSiblingsSurviveStreamRestart: siblings keep their PID, their state and their single
// Started across restarts of the stream actor.
func TestSiblingsSurviveStreamRestart(t *testing.T) {
	h := newHarnessH(t, func(h *harness, c *Config) {
		c.Siblings = []Sibling{h.siblingProps("checkpointer"), h.siblingProps("dispatcher")}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	cp := actor.NewPID(h.sys.Address(), h.pid.Id+"/checkpointer")
	dp := actor.NewPID(h.sys.Address(), h.pid.Id+"/dispatcher")
	h.tell(cp, addCmd{7})
	h.tell(dp, addCmd{11})

	for range 3 {
		h.tell(child, panicCmd{errBoom})
		h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
		h.fireRestart(time.Second)
		h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
		if ev := h.started(); !ev.pid.Equal(child) {
			t.Fatalf("stream child PID changed: %v → %v", child, ev.pid)
		}
		h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	}
	for pid, want := range map[*actor.PID]int{cp: 7, dp: 11} {
		res, err := h.sys.Root.RequestFuture(pid, getCmd{}, waitFor).Result()
		if err != nil || res.(int) != want {
			t.Fatalf("sibling %v state = %v, %v; want %d", pid, res, err, want)
		}
	}
	for _, name := range []string{"checkpointer", "dispatcher"} {
		v, _ := h.starts.Load(name)
		if n := v.(*startCounter).get(); n != 1 {
			t.Fatalf("%s started %d times, want 1", name, n)
		}
	}
}

// TestSiblingFailureRestartsTree: a failed sibling stays suspended while the stream backs off,
// then both restart; the sibling keeps its PID.
func TestSiblingFailureRestartsTree(t *testing.T) {
	h := newHarnessH(t, func(h *harness, c *Config) { c.Siblings = []Sibling{h.siblingProps("dispatcher")} })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.started()
	dp := actor.NewPID(h.sys.Address(), h.pid.Id+"/dispatcher")
	h.tell(dp, panicCmd{errBoom})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, streamtree.ErrSiblingFailed) || !errors.Is(tr.Cause, errBoom) ||
		!strings.Contains(tr.Cause.Error(), "dispatcher") {
		t.Fatalf("cause = %v", tr.Cause)
	}
	h.fireRestart(time.Second)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	pollUntil(t, "dispatcher restarted", func() bool {
		v, _ := h.starts.Load("dispatcher")
		return v.(*startCounter).get() == 2
	})
	if res, err := h.sys.Root.RequestFuture(dp, getCmd{}, waitFor).Result(); err != nil || res.(int) != 0 {
		t.Fatalf("restarted dispatcher: %v %v", res, err)
	}
}

// A sibling whose failure made the supervisor give up (a terminal error, e.g. history lost in the
// checkpointer) must still answer requests while the tree is crashed: the runtime's graceful stop
// asks it to flush.
func TestCrashedTreeSiblingStillAnswers(t *testing.T) {
	errHistoryLost := errors.New("history lost")
	h := newHarnessH(t, func(h *harness, c *Config) {
		c.Siblings = []Sibling{h.siblingProps("checkpointer")}
		c.Classify = streamtree.TerminalOn(errHistoryLost)
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.started()
	cp := actor.NewPID(h.sys.Address(), h.pid.Id+"/checkpointer")
	h.tell(cp, panicCmd{errHistoryLost})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_CRASHED)
	if !errors.Is(tr.Cause, errHistoryLost) {
		t.Fatalf("cause = %v", tr.Cause)
	}
	if res, err := h.sys.Root.RequestFuture(cp, getCmd{}, waitFor).Result(); err != nil {
		t.Fatalf("the failed sibling of a crashed tree does not answer: %v %v", res, err)
	}
}

// TestStaleMessagesDropped: restart ticks of an old epoch, ticks outside backoff and
// Resubscribed of an old incarnation are dropped and counted.
func TestStaleMessagesDropped(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc == 1 {
			return actResubscribe
		}
		return actIdle
	}, func(c *Config) { c.Policy = policy.Restart{InitialDelay: time.Minute} })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid

	h.tell(h.pid, &wire.RestartTick{Epoch: 0}) // not in backoff
	h.tell(child, panicCmd{errBoom})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.tell(h.pid, &wire.RestartTick{Epoch: 0})              // an epoch long gone
	h.tell(h.pid, &wire.RestartTick{Epoch: math.MaxUint64}) // not this timer's
	h.noTransition()
	if st := h.status(); st.GetStaleDropped() != 3 || st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
		t.Fatalf("stale %d state %v, want 3 backoff", st.GetStaleDropped(), st.GetState())
	}
	h.noStart()

	h.fireRestart(time.Minute)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started() // incarnation 2, idle
	h.tell(h.pid, &wire.Resubscribed{Incarnation: 1})
	h.noTransition()
	if st := h.status(); st.GetStaleDropped() != 4 || st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STARTING {
		t.Fatalf("stale %d state %v, want 4 starting", st.GetStaleDropped(), st.GetState())
	}
	h.tell(h.pid, &wire.Resubscribed{Incarnation: 2})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestTimerFiredAfterStopIsDropped: a Stop and a restart timer that fires in the same instant
// race; whichever wins, the stream stays stopped and nothing restarts.
func TestTimerFiredAfterStopIsDropped(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.tell(child, panicCmd{errBoom})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.armed()
	h.tell(h.pid, &messages.Stop{})
	h.clk.Advance(time.Second) // the tick, if sent, queues behind the Stop
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	h.noTransition()
	h.noStart()
	if st := h.status(); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED || st.GetRestarts() != 0 {
		t.Fatalf("status = %v", st)
	}
}

// TestOperatorRestart restarts a running child (stopped, then spawned again under its name)
// without counting a death.
func TestOperatorRestart(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	child := h.started().pid
	h.request(&messages.Restart{Reason: "reload"})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 || !ev.pid.Equal(child) {
		t.Fatalf("restart: %v incarnation %d", ev.pid, ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if st := h.status(); st.GetDeaths() != 0 || st.GetAttempt() != 0 {
		t.Fatalf("status = %v", st)
	}
}

func TestStartStoppedWaitsForOperator(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StartStopped = true })
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	h.noStart()
	h.request(&messages.Start{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if r := h.request(&messages.Start{}); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("second Start changed the state: %v", r)
	}
	h.noTransition()
}

// TestBackoffDoesNotDelayOtherStreams: one stream in a long backoff; another supervisor on the
// same system and clock keeps answering and restarting.
func TestBackoffDoesNotDelayOtherStreams(t *testing.T) {
	a := newHarness(t, func(c *Config) { c.Policy = policy.Restart{InitialDelay: time.Hour, MaxDelay: time.Hour} })
	a.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	a.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	a.tell(a.started().pid, panicCmd{errBoom})
	a.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)

	pb := newProbe()
	bTransitions := make(chan Transition, 64)
	props, err := New(Config{
		Stream:       "payments",
		Child:        actor.PropsFromProducer(func() actor.Actor { return &fakeStream{p: pb} }),
		Clock:        a.clk,
		OnTransition: func(tr Transition) { bTransitions <- tr },
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &harness{t: t, sys: a.sys, clk: a.clk, probe: pb, transitions: bTransitions}
	b.pid, err = a.sys.Root.SpawnNamed(props, "payments")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.sys.Root.StopFuture(b.pid).Wait() })
	b.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	b.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	b.tell(b.started().pid, panicCmd{errBoom})
	b.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	// Both timers are armed; the short one fires first and only b restarts.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	a.clk.Advance(time.Second)
	b.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	b.started()
	b.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	if st := a.status(); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
		t.Fatalf("a = %v", st.GetState())
	}
}

func TestClassifierPanicIsTransient(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Classify = func(any) (bool, error) { panic("classifier bug") }
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.tell(h.started().pid, panicCmd{errBoom})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); !errors.Is(tr.Cause, errBoom) {
		t.Fatalf("cause = %v", tr.Cause)
	}
	if h.logs.FilterMessageSnippet("classifier panicked").Len() != 1 {
		t.Fatal("classifier panic not logged")
	}
}

func TestObserverPanicDoesNotBreakSupervisor(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, func(c *Config) {
		c.OnTransition = func(Transition) { calls.Add(1); panic("observer bug") }
	})
	pollUntil(t, "two transitions observed", func() bool { return calls.Load() >= 2 })
	if st := h.status(); st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("state = %v", st.GetState())
	}
	if h.logs.FilterMessage("OnTransition panicked").Len() == 0 {
		t.Fatal("observer panic not logged")
	}
}

// TestPanicWhileStoppingDoesNotWedge: a stream actor that panics while handling Stopping still
// stops, and a new one can be started under the same name.
func TestPanicWhileStoppingDoesNotWedge(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc == 1 {
			return actPanicOnStopping
		}
		return actResubscribe
	}, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.started()
	h.request(&messages.Stop{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	h.request(&messages.Start{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	if ev := h.started(); ev.incarnation != 2 {
		t.Fatalf("incarnation %d, want 2", ev.incarnation)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestRealClockRestart runs the default (real) clock end to end with a 1ms delay.
func TestRealClockRestart(t *testing.T) {
	h := scripted(t, func(inc uint64) action {
		if inc == 1 {
			return actPanic
		}
		return actResubscribe
	}, func(c *Config) {
		c.Clock = nil
		c.Policy = policy.Restart{InitialDelay: time.Millisecond}
	})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Delay != time.Millisecond {
		t.Fatalf("delay %v", tr.Delay)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
}

// TestStatusCarriesTheDispatcherFlow: the totals add up across reports, while in_flight and
// read_through are the latest report's (a report without read_through keeps the last one).
func TestStatusCarriesTheDispatcherFlow(t *testing.T) {
	h := newHarness(t, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	at := time.Unix(1_700_000_000, 0).UTC()
	h.tell(h.pid, &messages.SettlementCounts{Settled: 3, Handled: 3, InFlight: 5, ReadThrough: timestamppb.New(at)})
	h.tell(h.pid, &messages.SettlementCounts{Settled: 2, Handled: 1, Filtered: 1, InFlight: 1})
	var st *messages.StatusReply
	pollUntil(t, "both reports counted", func() bool {
		st = h.status()
		return st.GetSettlements().GetSettled() == 5
	})
	if st.GetInFlight() != 1 || !st.GetReadThrough().AsTime().Equal(at) || st.GetSettlements().GetHandled() != 4 ||
		st.GetSettlements().GetInFlight() != 0 || st.GetSettlements().GetReadThrough() != nil {
		t.Fatalf("status = %v", st)
	}
}
