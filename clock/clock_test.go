package clock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFakeAdvanceFiresDueTimersInDeadlineOrder(t *testing.T) {
	c := NewFake(time.Time{})
	start := c.Now()
	var order []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() { order = append(order, name); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(1*time.Second, rec("a"))
	c.AfterFunc(2*time.Second, rec("b1"))
	c.AfterFunc(2*time.Second, rec("b2")) // same deadline: creation order
	c.AfterFunc(10*time.Second, rec("late"))

	c.Advance(2*time.Second - time.Nanosecond)
	if got := len(order); got != 1 {
		t.Fatalf("after 2s-1ns: fired %v, want only a", order)
	}
	c.Advance(time.Second + time.Nanosecond)
	want := []string{"a", "b1", "b2", "c"}
	if !slices.Equal(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	wantAt := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}
	for i := range wantAt {
		if at[i] != wantAt[i] {
			t.Errorf("%s fired at %v, want %v", order[i], at[i], wantAt[i])
		}
	}
	if got := c.Now().Sub(start); got != 3*time.Second {
		t.Fatalf("Now after advances = +%v, want +3s", got)
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", c.Pending())
	}
	if d, ok := c.NextDeadline(); !ok || d != 7*time.Second {
		t.Fatalf("NextDeadline = %v %v, want 7s true", d, ok)
	}
}

func TestFakeTimerArmedByCallbackFiresWithinWindow(t *testing.T) {
	c := NewFake(time.Time{})
	var n int
	var tick func()
	tick = func() {
		n++
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(5 * time.Second)
	if n != 5 {
		t.Fatalf("periodic timer fired %d times in 5s, want 5", n)
	}
}

func TestFakeStop(t *testing.T) {
	c := NewFake(time.Time{})
	fired := false
	tm := c.AfterFunc(time.Second, func() { fired = true })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer = false")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	c.Advance(time.Hour)
	if fired {
		t.Fatal("stopped timer fired")
	}
	tm2 := c.AfterFunc(0, func() {})
	c.Advance(0)
	if tm2.Stop() {
		t.Fatal("Stop after firing = true")
	}
}

func TestFakeZeroDelayFiresOnNextAdvanceNotInline(t *testing.T) {
	c := NewFake(time.Time{})
	fired := false
	c.AfterFunc(-time.Second, func() { fired = true })
	if fired {
		t.Fatal("fired inside AfterFunc")
	}
	c.Advance(0)
	if !fired {
		t.Fatal("due timer did not fire on Advance(0)")
	}
}

func TestFakeBlockUntilConcurrent(t *testing.T) {
	c := NewFake(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var fired atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.AfterFunc(time.Second, func() { fired.Add(1) })
		}()
	}
	if err := c.BlockUntil(ctx, 8); err != nil {
		t.Fatalf("BlockUntil: %v", err)
	}
	wg.Wait()
	c.Advance(time.Second)
	if fired.Load() != 8 {
		t.Fatalf("fired %d, want 8", fired.Load())
	}

	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := c.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil with a cancelled context and no timers returned nil")
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	done := make(chan struct{})
	before := c.Now()
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("real AfterFunc did not fire")
	}
	if !c.Now().After(before) {
		t.Fatal("real Now did not move")
	}
	if c.AfterFunc(time.Hour, func() {}).Stop() != true {
		t.Fatal("Stop of a pending real timer = false")
	}
}

// Jump moves Now only: no timer fires early or late, and Mono measures what Advance moved.
func TestFakeJumpMovesNowNotTimersOrMono(t *testing.T) {
	c := NewFake(time.Time{})
	wall := c.Now()
	fired := false
	c.AfterFunc(10*time.Second, func() { fired = true })
	c.Jump(time.Hour)
	c.Advance(0)
	if fired {
		t.Fatal("a forward Jump fired a timer")
	}
	if got := c.Now().Sub(wall); got != time.Hour {
		t.Fatalf("Now after Jump(1h) = +%v", got)
	}
	c.Jump(-2 * time.Hour)
	c.Advance(10 * time.Second)
	if !fired {
		t.Fatal("a backward Jump held a timer back")
	}
	if got, want := c.Now().Sub(wall), -time.Hour+10*time.Second; got != want {
		t.Fatalf("Now = +%v, want +%v", got, want)
	}
	if got := Mono(c); got != 10*time.Second {
		t.Fatalf("Mono = %v, want 10s (Advance only)", got)
	}
}

// Mono of a Clock without a monotonic reading of its own falls back to the process's.
func TestMonoFallsBackToTheProcess(t *testing.T) {
	a := Mono(wallOnly{})
	b := Mono(Real())
	if a <= 0 || b < a {
		t.Fatalf("Mono readings %v then %v, want positive and not decreasing", a, b)
	}
}

type wallOnly struct{}

func (wallOnly) Now() time.Time                            { return time.Unix(0, 0) }
func (wallOnly) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
