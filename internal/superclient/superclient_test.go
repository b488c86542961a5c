package superclient

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSystem returns a quiet actor system whose dead-letter throttle goroutine (it lives one
// interval after a dead letter) ends quickly enough for goleak; it shuts down with the test.
func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	t.Cleanup(func() {
		sys.Shutdown()
		goleak.VerifyNone(t)
	})
	return sys
}

// fakeSupervisor answers the supervisor protocol: a StatusReply for every command (a graceful
// Stop's reply carries its timeout_ms in why), an OnDemandSnapshotReply for OnDemandSnapshot;
// while mute it never answers a StatusRequest (and tells asked), and it answers AwaitRunning
// with the wrong type.
type fakeSupervisor struct {
	mute  bool
	asked chan struct{}
}

func (f *fakeSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.StatusRequest:
		if !f.mute {
			c.Respond(&messages.StatusReply{Stream: "s", State: messages.SupervisorState_SUPERVISOR_STATE_RUNNING})
		} else if f.asked != nil {
			select {
			case f.asked <- struct{}{}:
			default:
			}
		}
	case *messages.Stop:
		c.Respond(&messages.StatusReply{Stream: "s", State: messages.SupervisorState_SUPERVISOR_STATE_STOPPED,
			LastStop: &messages.StopReport{Settled: uint64(m.GetTimeoutMs())}})
	case *messages.AwaitRunning:
		c.Respond(&messages.OnDemandSnapshotReply{Code: "busy"})
	case *messages.OnDemandSnapshot:
		c.Respond(&messages.OnDemandSnapshotReply{Running: m.GetSnapshotId()})
	}
}

func spawn(t *testing.T, sys *actor.ActorSystem, f *fakeSupervisor) *actor.PID {
	t.Helper()
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return pid
}

// TestTimeoutRule: the time left of ctx's deadline, capped by Within and at least MinTimeout;
// without a deadline the bound, else DefaultTimeout; a Stop's budget is nine tenths of it.
func TestTimeoutRule(t *testing.T) {
	c := New(nil)
	if got := c.Timeout(context.Background()); got != DefaultTimeout {
		t.Errorf("no deadline: %v, want %v", got, DefaultTimeout)
	}
	if got := c.Within(2 * time.Second).Timeout(context.Background()); got != 2*time.Second {
		t.Errorf("no deadline, bound 2s: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got := c.Timeout(ctx); got <= 59*time.Minute || got > time.Hour {
		t.Errorf("an hour left: %v", got)
	}
	if got := c.Within(time.Minute).Timeout(ctx); got != time.Minute {
		t.Errorf("an hour left, bound 1m: %v", got)
	}
	if got := c.Within(time.Minute).StopBudget(ctx); got != 54_000 {
		t.Errorf("stop budget of 1m: %dms, want 54000", got)
	}
	if got := c.StopBudget(context.Background()); got != DefaultTimeout.Milliseconds()*9/10 {
		t.Errorf("stop budget without a deadline: %dms", got)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if got := c.Timeout(past); got != MinTimeout {
		t.Errorf("deadline passed: %v, want %v", got, MinTimeout)
	}
	if got := c.StopBudget(past); got != 1 {
		t.Errorf("stop budget past the deadline: %dms, want 1", got)
	}
}

func TestCommandsDecodeTheirReplies(t *testing.T) {
	sys := newSystem(t)
	pid := spawn(t, sys, &fakeSupervisor{})
	c := New(sys)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx, pid)
	if err != nil || st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		t.Fatalf("status: %v, %v", st, err)
	}
	// The supervisor gets nine tenths of the 10s left (the fake echoes timeout_ms).
	st, err = c.Stop(ctx, pid, "test")
	if err != nil || st.GetState() != messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		t.Fatalf("stop: %v, %v", st, err)
	}
	if ms := st.GetLastStop().GetSettled(); ms < 8_000 || ms > 9_000 {
		t.Errorf("stop timeout_ms = %d, want 9/10 of the ~10s left", ms)
	}
	r, err := c.OnDemandSnapshot(ctx, pid, "snap-1", nil)
	if err != nil || r.GetRunning() != "snap-1" {
		t.Fatalf("on-demand snapshot: %v, %v", r, err)
	}
}

func TestWrongReplyType(t *testing.T) {
	sys := newSystem(t)
	pid := spawn(t, sys, &fakeSupervisor{})
	st, err := New(sys).AwaitRunning(context.Background(), pid)
	if !errors.Is(err, ErrUnexpectedReply) || st != nil {
		t.Fatalf("a reply of the wrong type: %v, %v; want ErrUnexpectedReply", st, err)
	}
}

// TestDeadPID: a stopped supervisor, or none, is ErrGone (and protoactor's dead letter), at once.
func TestDeadPID(t *testing.T) {
	sys := newSystem(t)
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &fakeSupervisor{} }))
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := New(sys).Status(context.Background(), pid)
	if !errors.Is(err, ErrGone) || !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("a stopped actor: %v; want ErrGone and actor.ErrDeadLetter", err)
	}
	if took := time.Since(start); took > DefaultTimeout/2 {
		t.Errorf("the dead letter took %v: it waited for the timeout", took)
	}
	if _, err := New(sys).Status(context.Background(), nil); !errors.Is(err, ErrGone) {
		t.Fatalf("no PID: %v; want ErrGone", err)
	}
}

// TestTimeoutAndCancel: a supervisor that does not answer is a timeout matching
// context.DeadlineExceeded after ctx's deadline or the bound; a cancelled ctx returns at once
// with context.Canceled, and nothing is left waiting for the future (goleak at cleanup).
func TestTimeoutAndCancel(t *testing.T) {
	sys := newSystem(t)
	asked := make(chan struct{}, 1)
	pid := spawn(t, sys, &fakeSupervisor{mute: true, asked: asked})
	c := New(sys)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Status(ctx, pid)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took < 90*time.Millisecond || took > 3*time.Second {
		t.Errorf("deadline of 100ms: returned after %v", took)
	}

	_, err = c.Within(50*time.Millisecond).Status(context.Background(), pid)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "no answer within 50ms: context deadline exceeded" {
		t.Fatalf("bound: %v", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	for len(asked) > 0 { // the requests above were asked too
		<-asked
	}
	go func() {
		_, err := c.Within(time.Hour).Status(ctx2, pid)
		errc <- err
	}()
	<-asked // the request is under way: its future waits
	cancel2()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled request did not return")
	}

	if _, err := c.Status(ctx, pid); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx already over: %v", err)
	}
}
