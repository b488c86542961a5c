package dispatcher

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// MayStart is asked before every handler attempt: once it says no (a lease whose validity has
// passed, a paused leader's timers not yet caught up), no call starts and nothing settles,
// while the events before that were handled and settled as usual.
func TestMayStartWithholdsCalls(t *testing.T) {
	var allow atomic.Bool
	allow.Store(true)
	var calls atomic.Int64
	release := make(chan struct{})
	r := &fakeRouter{handle: func(ctx context.Context, c call) error {
		if calls.Add(1) == 3 {
			<-release // the third call is in flight when the validity passes
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) {
		c.Lanes = 1
		c.MayStart = func(time.Duration) bool { return allow.Load() }
	})
	h.subscribe(1)
	h.send(mkEvent(1, "k"), mkEvent(2, "k"), mkEvent(3, "k"), mkEvent(4, "k"), mkEvent(5, "k"))
	h.waitSettled(1, 2)
	deadline := time.Now().Add(waitFor)
	for calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the third call did not start")
		}
		time.Sleep(time.Millisecond) // poll interval
	}
	allow.Store(false)
	close(release)
	h.waitSettled(3) // the call in flight finishes and settles
	// Event 4's attempt is withheld (the lane says so in the log), and so is everything after it.
	deadline = time.Now().Add(waitFor)
	for h.logs.FilterMessageSnippet("handler call withheld").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no withheld call logged")
		}
		time.Sleep(time.Millisecond) // poll interval
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d handler calls, want 3: none may start once MayStart says no", n)
	}
}

// MayStart is asked with the clock's monotonic reading, not Now: a step of the wall time, an
// hour either way, withholds no call within the term. Asked with Now, a forward step withheld
// every call, and the lane waited for a restart that came only with the next term (the chaos
// soak's clock skew stalled a SingleLeader stream for 20 s).
func TestMayStartIgnoresAWallClockStep(t *testing.T) {
	var calls atomic.Int64
	r := &fakeRouter{handle: func(context.Context, call) error { calls.Add(1); return nil }}
	h := newHarness(t, r, func(c *Config) {
		c.Lanes = 1
		c.MayStart = func(mono time.Duration) bool { return mono < time.Minute } // the term
	})
	h.subscribe(1)
	h.clk.Jump(time.Hour)
	h.send(mkEvent(1, "k"))
	h.waitSettled(1)
	h.clk.Jump(-2 * time.Hour)
	h.send(mkEvent(2, "k"))
	h.waitSettled(1, 2)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d handler calls, want 2", n)
	}
}
