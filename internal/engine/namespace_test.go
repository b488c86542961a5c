package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/clock"
)

// nsReports records a namespaceWatch's reports.
type nsReports struct {
	mu   sync.Mutex
	list []nsReport
}

type nsReport struct {
	missing bool
	since   time.Time
}

func (r *nsReports) add(missing bool, since time.Time) {
	r.mu.Lock()
	r.list = append(r.list, nsReport{missing, since})
	r.mu.Unlock()
}

func (r *nsReports) all() []nsReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]nsReport(nil), r.list...)
}

// TestNamespaceWatch: a missing collection is reported at the first check (Spawn's) and at
// every periodic one on the injected clock while it stays missing, with the time it was first
// found missing; a failed lookup reports nothing; the first check that finds it reports the
// clearing once, and later checks stay quiet; stop ends the checks.
func TestNamespaceWatch(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	start := clk.Now()
	var exists atomic.Bool
	var fail atomic.Bool
	var checks atomic.Int32
	lookup := func(ctx context.Context) (bool, error) {
		checks.Add(1)
		if fail.Load() {
			return false, errors.New("server selection timeout")
		}
		return exists.Load(), nil
	}
	var rep nsReports
	w := newNamespaceWatch(clk, time.Minute, time.Second, lookup, rep.add, zap.NewNop())
	w.start(context.Background())
	if got := rep.all(); len(got) != 1 || !got[0].missing || !got[0].since.Equal(start) {
		t.Fatalf("after the check at Spawn: reports %+v, want one missing since %v", got, start)
	}

	clk.Advance(time.Minute) // the fake clock runs the tick in Advance
	if got := rep.all(); len(got) != 2 || !got[1].missing || !got[1].since.Equal(start) {
		t.Fatalf("after a minute: reports %+v, want a second missing report, since the first check", got)
	}
	fail.Store(true)
	clk.Advance(time.Minute)
	if got := rep.all(); len(got) != 2 || checks.Load() != 3 {
		t.Fatalf("a failed lookup (check %d) reported %+v", checks.Load(), got)
	}
	fail.Store(false)
	exists.Store(true)
	clk.Advance(time.Minute)
	got := rep.all()
	if len(got) != 3 || got[2].missing || !got[2].since.Equal(start) {
		t.Fatalf("after the collection appeared: reports %+v, want the clearing once", got)
	}
	clk.Advance(time.Minute)
	if got := rep.all(); len(got) != 3 {
		t.Fatalf("a present collection was reported again: %+v", got)
	}
	w.stop()
	n := checks.Load()
	clk.Advance(10 * time.Minute)
	if checks.Load() != n || clk.Pending() != 0 {
		t.Fatalf("checks went on after stop: %d → %d, %d timers pending", n, checks.Load(), clk.Pending())
	}
}

// TestNamespaceWatchStopDuringCheck: stop waits for a periodic check under way (on the real
// clock's timer goroutine), cancels its lookup, and nothing is reported after it returned.
func TestNamespaceWatchStopDuringCheck(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	lookup := func(ctx context.Context) (bool, error) {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return false, ctx.Err()
	}
	var rep nsReports
	w := newNamespaceWatch(clock.Real(), time.Millisecond, time.Hour, lookup, rep.add, zap.NewNop())
	w.arm()
	select {
	case <-entered:
	case <-time.After(testWait):
		t.Fatal("the periodic check never ran")
	}
	w.stop()
	if got := rep.all(); len(got) != 0 {
		t.Fatalf("reports %+v from a cancelled lookup", got)
	}
}
