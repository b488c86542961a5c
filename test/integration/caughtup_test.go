package integration_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
)

// TestAwaitCaughtUp: after N inserts, AwaitCaughtUp does not return while one of them is still
// in its handler, and once it returns all N were handled, without polling Status.
func TestAwaitCaughtUp(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	hold := newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "cu", Collection: "orders", Lanes: 4, OnInsert: hold.handler(40, got)})
	r.waitRunning(t, h)
	const n = 60
	e.insertOrders("orders", 1, n)
	hold.waitEntered(t, 40)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		done <- h.AwaitCaughtUp(ctx)
	}()
	// Every lane but order 40's may finish: the settled position stops before it.
	waitFor(t, "the other lanes settled", func() bool { return got.distinct() >= n-20 })
	select {
	case err := <-done:
		t.Fatalf("AwaitCaughtUp returned %v while order 40 was still in its handler (%d handled)", err, got.distinct())
	default:
	}
	hold.Release()
	if err := <-done; err != nil {
		t.Fatalf("AwaitCaughtUp: %v", err)
	}
	if d := got.distinct(); d != n {
		t.Fatalf("AwaitCaughtUp returned with %d of the %d orders handled", d, n)
	}
	st, err := h.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.SettledThrough.IsZero() {
		t.Errorf("Status().SettledThrough is zero after the catch-up")
	}
}

// TestAwaitCaughtUpQuiet: a stream that has nothing to handle is caught up too: its position
// moves with the post-batch resume tokens. Writes elsewhere do not hold it up.
func TestAwaitCaughtUpQuiet(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "quiet", Collection: "orders", OnInsert: got.handler()})
	r.waitRunning(t, h)
	e.insertOrders("other", 1, 5) // the cluster time moves, the stream sees nothing
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.AwaitCaughtUp(ctx); err != nil {
		t.Fatalf("AwaitCaughtUp on a quiet stream: %v", err)
	}
	if err := h.AwaitCaughtUp(ctx); err != nil { // and again, with nothing written in between
		t.Fatalf("second AwaitCaughtUp on a quiet stream: %v", err)
	}
	if d := got.distinct(); d != 0 {
		t.Errorf("%d orders handled on a stream of another collection", d)
	}
}

// TestAwaitCaughtUpDeadline: while an event stays in its handler, AwaitCaughtUp ends with ctx.
func TestAwaitCaughtUpDeadline(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	hold := newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "held", Collection: "orders", OnInsert: hold.handler(1, got)})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 1)
	hold.waitEntered(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := h.AwaitCaughtUp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitCaughtUp with an event held: %v, want context.DeadlineExceeded", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := h.AwaitCaughtUp(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitCaughtUp with a cancelled ctx: %v, want context.Canceled", err)
	}
}

// TestAwaitCaughtUpStopped: a graceful stop during the wait ends it with ErrStreamNotRunning
// (the drain settles the held event, but no post-batch token carries the position past it any
// more), and a stopped stream answers so at once.
func TestAwaitCaughtUpStopped(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	hold := newHoldOrder(t)
	h := r.spawn(t, watchtree.Stream[Order]{Name: "st", Collection: "orders", OnInsert: hold.handler(3, got)})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, 3)
	hold.waitEntered(t, 3)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		done <- h.AwaitCaughtUp(ctx)
	}()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		stopped <- h.Stop(ctx)
	}()
	waitState(t, h, watchtree.StateStopping)
	hold.Release() // the drain settles order 3
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := <-done; !errors.Is(err, watchtree.ErrStreamNotRunning) {
		t.Errorf("AwaitCaughtUp across a graceful stop: %v, want ErrStreamNotRunning", err)
	}
	if d := got.distinct(); d != 3 {
		t.Errorf("%d of 3 orders handled after the drain", d)
	}

	e.insertOrders("orders", 4, 4) // committed while stopped
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.AwaitCaughtUp(ctx); !errors.Is(err, watchtree.ErrStreamNotRunning) || errors.Is(err, watchtree.ErrStandby) {
		t.Fatalf("AwaitCaughtUp on a stopped stream: %v, want ErrStreamNotRunning (not ErrStandby)", err)
	}
}

// TestAwaitCaughtUpStandby: a SingleLeader stream in standby here settles nothing: ErrStandby
// at once; the leader's AwaitCaughtUp returns once its events are handled.
func TestAwaitCaughtUpStandby(t *testing.T) {
	e := newEnv(t)
	got := newHandled()
	var hs []*watchtree.Handle
	for i := range 2 {
		r := e.startRuntime(func(cfg *watchtree.Config) { cfg.InstanceID = fmt.Sprintf("instance-%d", i) })
		hs = append(hs, r.spawn(t, watchtree.Stream[Order]{Name: "sl", Collection: "orders", Mode: watchtree.SingleLeader,
			OnInsert: got.handler()}))
		if i == 0 {
			waitState(t, hs[0], watchtree.StateRunning)
		}
	}
	waitState(t, hs[1], watchtree.StateStandby)
	e.insertOrders("orders", 1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := hs[1].AwaitCaughtUp(ctx); !errors.Is(err, watchtree.ErrStandby) || !errors.Is(err, watchtree.ErrStreamNotRunning) {
		t.Fatalf("standby's AwaitCaughtUp: %v, want ErrStandby (and ErrStreamNotRunning)", err)
	}
	if err := hs[0].AwaitCaughtUp(ctx); err != nil {
		t.Fatalf("leader's AwaitCaughtUp: %v", err)
	}
	if d := got.distinct(); d != 10 {
		t.Errorf("leader caught up with %d of 10 orders handled", d)
	}
}
