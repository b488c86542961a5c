package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// waitFor bounds every wait of these tests; nothing sleeps, they wait on channels or poll.
const waitFor = 10 * time.Second

// action is what a fake stream child does when an incarnation starts.
type action int

const (
	actIdle             action = iota // start and do nothing (cursor never opens)
	actResubscribe                    // report the cursor open
	actPanic                          // panic in Started
	actResubscribePanic               // report the cursor open, then panic at once
	actPanicOnStopping                // report the cursor open; panic when stopped
	actSnapshotting                   // report a snapshot running (the cursor opens on openCmd)
)

// Commands the test sends to fake children (test-only; the product's messages are protobuf).
type (
	panicCmd    struct{ err error }
	escalateCmd struct{ err error }
	failCmd     struct{ err error }
	// escalateAsCmd escalates a *streamtree.Failure claiming incarnation inc (a failure racing a
	// restart).
	escalateAsCmd struct {
		err error
		inc uint64
	}
	stopSelfCmd struct{}
	openCmd     struct{} // report the cursor open (after actSnapshotting)
	addCmd      struct{ n int }
	getCmd      struct{}
)

type startedEvent struct {
	pid         *actor.PID
	incarnation uint64
}

// probe is shared by the test and the fake actors it spawns.
type probe struct {
	mu      sync.Mutex
	onStart func(inc uint64) action // default actResubscribe

	started  chan startedEvent // every Started of the stream child
	stopping chan *actor.PID   // every Stopping of the stream child
}

func newProbe() *probe {
	return &probe{started: make(chan startedEvent, 256), stopping: make(chan *actor.PID, 256)}
}

func (p *probe) setOnStart(f func(inc uint64) action) {
	p.mu.Lock()
	p.onStart = f
	p.mu.Unlock()
}

func (p *probe) action(inc uint64) action {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onStart == nil {
		return actResubscribe
	}
	return p.onStart(inc)
}

// fakeStream is a stand-in for the stream actor.
type fakeStream struct{ p *probe }

func (f *fakeStream) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		inc := streamtree.Incarnation(ctx)
		f.p.started <- startedEvent{pid: ctx.Self(), incarnation: inc}
		switch f.p.action(inc) {
		case actResubscribe, actPanicOnStopping:
			streamtree.NotifyResubscribed(ctx)
		case actSnapshotting:
			ctx.Send(ctx.Parent(), &wire.Snapshotting{Incarnation: inc, SnapshotId: "snap-1"})
		case actPanic:
			panic(fmt.Errorf("fake stream: cursor died in incarnation %d", inc))
		case actResubscribePanic:
			streamtree.NotifyResubscribed(ctx)
			panic(fmt.Errorf("fake stream: died right after resubscribing (incarnation %d)", inc))
		}
	case *actor.Stopping:
		f.p.stopping <- ctx.Self()
		if f.p.action(streamtree.Incarnation(ctx)) == actPanicOnStopping {
			panic("fake stream: panic while stopping")
		}
	case panicCmd:
		panic(m.err)
	case escalateCmd:
		ctx.(actor.Supervisor).EscalateFailure(m.err, m)
	case failCmd:
		streamtree.Fail(ctx, m.err)
	case escalateAsCmd:
		ctx.(actor.Supervisor).EscalateFailure(&streamtree.Failure{Err: m.err, Incarnation: m.inc}, m)
	case stopSelfCmd:
		ctx.Stop(ctx.Self())
	case openCmd:
		streamtree.NotifyResubscribed(ctx)
	}
}

// fakeSibling holds state (a counter) that must survive stream restarts.
type fakeSibling struct {
	starts *sync.Map // name → *int (Started count), shared with the test
	name   string
	count  int
	// asked, when set, gets every Drain and Flush; the test answers them itself.
	asked chan askedStep
}

// askedStep is a Drain or Flush a fake sibling was sent, with whom to answer.
type askedStep struct {
	name string // the sibling's name
	msg  any
}

func (f *fakeSibling) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		v, _ := f.starts.LoadOrStore(f.name, new(startCounter))
		v.(*startCounter).inc()
	case addCmd:
		f.count += m.n
	case panicCmd:
		panic(m.err)
	case getCmd:
		ctx.Respond(f.count)
	case *wire.Drain, *wire.Flush:
		if f.asked != nil {
			f.asked <- askedStep{name: f.name, msg: m}
		}
	}
}

type startCounter struct {
	mu sync.Mutex
	n  int
}

func (c *startCounter) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *startCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type harness struct {
	t           *testing.T
	sys         *actor.ActorSystem
	clk         *clock.Fake
	probe       *probe
	pid         *actor.PID
	transitions chan Transition
	logs        *observer.ObservedLogs
	starts      *sync.Map
}

// scripted returns a newHarness edit that also scripts the fake child before it is spawned.
func scripted(t *testing.T, onStart func(inc uint64) action, edit func(*Config)) *harness {
	t.Helper()
	return newHarnessH(t, func(h *harness, c *Config) {
		h.probe.setOnStart(onStart)
		if edit != nil {
			edit(c)
		}
	})
}

// newTestSystem returns a quiet actor system whose dead-letter throttle goroutine (it lives one
// interval after a dead letter) ends quickly enough for goleak.
func newTestSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newHarness spawns one supervisor over a fakeStream on a fresh actor system with a fake clock.
// edit may change the Config before New. Cleanup stops everything and checks for leaks.
func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	return newHarnessH(t, func(_ *harness, c *Config) {
		if edit != nil {
			edit(c)
		}
	})
}

// newHarnessH is newHarness with the harness passed to edit (for sibling props).
func newHarnessH(t *testing.T, edit func(*harness, *Config)) *harness {
	t.Helper()
	sys := newTestSystem()

	h := &harness{
		t: t, sys: sys, clk: clock.NewFake(time.Time{}), probe: newProbe(),
		transitions: make(chan Transition, 1024), starts: &sync.Map{},
	}
	core, logs := observer.New(zap.DebugLevel)
	h.logs = logs
	p := h.probe
	cfg := Config{
		Stream:       "orders",
		Child:        actor.PropsFromProducer(func() actor.Actor { return &fakeStream{p: p} }),
		Clock:        h.clk,
		Logger:       zap.New(core),
		OnTransition: func(tr Transition) { h.transitions <- tr },
	}
	edit(h, &cfg)
	props, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	pid, err := sys.Root.SpawnNamed(props, "orders")
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	h.pid = pid
	t.Cleanup(func() {
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Errorf("stop supervisor: %v", err)
		}
		sys.Shutdown()
		goleak.VerifyNone(t)
	})
	return h
}

func (h *harness) siblingProps(name string) Sibling {
	starts := h.starts
	return Sibling{Name: name, Props: actor.PropsFromProducer(func() actor.Actor {
		return &fakeSibling{starts: starts, name: name}
	})}
}

// await returns the next transition, failing unless it enters want.
func (h *harness) await(want messages.SupervisorState) Transition {
	h.t.Helper()
	select {
	case tr := <-h.transitions:
		if tr.To != want {
			h.t.Fatalf("transition %v → %v (%s), want → %v", tr.From, tr.To, tr.Why, want)
		}
		return tr
	case <-time.After(waitFor):
		h.t.Fatalf("no transition to %v within %v", want, waitFor)
	}
	return Transition{}
}

// noTransition asserts that nothing is pending on the transition channel after a round-trip
// through the supervisor's mailbox (a Status request is processed after everything sent before).
func (h *harness) noTransition() {
	h.t.Helper()
	h.status()
	select {
	case tr := <-h.transitions:
		h.t.Fatalf("unexpected transition %v → %v (%s)", tr.From, tr.To, tr.Why)
	default:
	}
}

func (h *harness) started() startedEvent {
	h.t.Helper()
	select {
	case ev := <-h.probe.started:
		return ev
	case <-time.After(waitFor):
		h.t.Fatal("stream child did not start")
	}
	return startedEvent{}
}

func (h *harness) noStart() {
	h.t.Helper()
	select {
	case ev := <-h.probe.started:
		h.t.Fatalf("unexpected start of incarnation %d", ev.incarnation)
	default:
	}
}

func (h *harness) request(msg any) *messages.StatusReply {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pid, msg, waitFor).Result()
	if err != nil {
		h.t.Fatalf("request %T: %v", msg, err)
	}
	r, ok := res.(*messages.StatusReply)
	if !ok {
		h.t.Fatalf("reply to %T is %T", msg, res)
	}
	return r
}

func (h *harness) status() *messages.StatusReply { return h.request(&messages.StatusRequest{}) }

// armed waits until the supervisor's restart timer is armed and returns its delay.
func (h *harness) armed() time.Duration {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.BlockUntil(ctx, 1); err != nil {
		h.t.Fatalf("no restart timer armed: %v", err)
	}
	d, _ := h.clk.NextDeadline()
	return d
}

// fireRestart checks the pending restart's delay, advances the clock to just before it, checks
// that nothing fired, then to the restart itself.
func (h *harness) fireRestart(want time.Duration) {
	h.t.Helper()
	if got := h.armed(); got != want {
		h.t.Fatalf("restart timer in %v, want %v", got, want)
	}
	h.clk.Advance(want - time.Nanosecond)
	if h.clk.Pending() != 1 {
		h.t.Fatalf("restart fired before its delay %v", want)
	}
	h.clk.Advance(time.Nanosecond) // fires it; the caller awaits the starting transition
}

func (h *harness) tell(pid *actor.PID, msg any) { h.sys.Root.Send(pid, msg) }

// pollUntil polls cond until it holds or the deadline passes (no fixed sleeps: it yields).
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for an event
	}
}

var errBoom = errors.New("boom")
