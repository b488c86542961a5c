package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a deterministic Clock for tests. Its time moves only through Advance, which runs the
// callbacks of the timers that fall due, in deadline order, synchronously on the caller's
// goroutine. It is safe for concurrent use: code under test may create and stop timers from any
// goroutine while the test advances the time, and BlockUntil lets the test wait (without
// sleeping) until that code has armed its timers.
type Fake struct {
	mu      sync.Mutex
	now     time.Time     // the time base of the timers and Mono: only Advance moves it
	start   time.Time     // now at NewFake: Mono's origin
	skew    time.Duration // Jump's offset of Now from now
	seq     uint64        // creation order, breaks deadline ties
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the set of pending timers changes
}

// NewFake returns a Fake clock reading start. A zero start is replaced by a fixed, arbitrary
// instant (2026-01-01 00:00:00 UTC) so that zero times stay distinguishable.
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return &Fake{now: start, start: start, changed: make(chan struct{})}
}

type fakeTimer struct {
	clock    *Fake
	deadline time.Time
	seq      uint64
	f        func()
}

// Now returns the fake wall time: the time Advance moved, plus every Jump.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Add(c.skew)
}

// Mono returns the time Advance moved since NewFake; Jump does not move it.
func (c *Fake) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}

// Jump moves the wall time (Now) by d, forward or backward, as a step of the system clock
// does: no timer fires and Mono does not move.
func (c *Fake) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skew += d
}

// AfterFunc registers f to run when the fake time reaches Now()+d. A timer with d ≤ 0 runs at
// the next Advance (even Advance(0)), never inside AfterFunc itself.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, deadline: c.now.Add(max(d, 0)), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	c.notifyLocked()
	return t
}

// Stop removes the timer if it is still pending.
func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	c.notifyLocked()
	return true
}

// Advance moves the time forward by d (d < 0 is treated as 0). Every timer due by the new time
// runs, earliest deadline first (ties in creation order), with Now() reading its deadline (plus
// any Jump) while it runs; timers armed by those callbacks run too if they fall due within the window. Callbacks
// run on the caller's goroutine with no lock held, so they may use the clock. When Advance
// returns, Now() reads the old time plus d.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(max(d, 0))
	c.mu.Unlock()
	for {
		c.mu.Lock()
		t := c.nextLocked()
		if t == nil || t.deadline.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == t })
		if t.deadline.After(c.now) {
			c.now = t.deadline
		}
		c.notifyLocked()
		c.mu.Unlock()
		t.f()
	}
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDeadline returns how far the earliest pending timer is from Now(), and false when no timer
// is pending. Tests use it to assert a computed delay exactly.
func (c *Fake) NextDeadline() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.nextLocked()
	if t == nil {
		return 0, false
	}
	return t.deadline.Sub(c.now), true
}

// BlockUntil waits until at least n timers are pending, or ctx ends (it then returns ctx.Err()).
// It never sleeps: it wakes on every AfterFunc, Stop and firing.
func (c *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Fake) nextLocked() *fakeTimer {
	var next *fakeTimer
	for _, t := range c.timers {
		if next == nil || t.deadline.Before(next.deadline) ||
			(t.deadline.Equal(next.deadline) && t.seq < next.seq) {
			next = t
		}
	}
	return next
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
