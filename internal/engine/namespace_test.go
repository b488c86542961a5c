package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/watchtree/watchtree/clock"
)

// nsReports records a namespaceWatch's reports.
type nsReports struct {
	mu   sync.Mutex
	list []nsReport
}

type nsReport struct {
	missing, changed bool
	since            time.Time
}

func (r *nsReports) add(missing, changed bool, since time.Time) {
	r.mu.Lock()
	r.list = append(r.list, nsReport{missing, changed, since})
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
	if got := rep.all(); len(got) != 1 || !got[0].missing || !got[0].changed || !got[0].since.Equal(start) {
		t.Fatalf("after the check at Spawn: reports %+v, want one missing since %v", got, start)
	}

	clk.Advance(time.Minute) // the fake clock runs the tick in Advance
	if got := rep.all(); len(got) != 2 || !got[1].missing || got[1].changed || !got[1].since.Equal(start) {
		t.Fatalf("after a minute: reports %+v, want a second missing report, unchanged, since the first check", got)
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
	if len(got) != 3 || got[2].missing || !got[2].changed || !got[2].since.Equal(start) {
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

// TestNamespaceLogOf200Streams: 200 Collection streams whose collections do not exist log a few
// lines a minute, not 200 (nor 200 again every minute): each stream's state changes only, and
// those summarised across streams (the first at once, the rest together within a minute); the
// collections appearing are summarised the same way. Before, every check of every stream logged
// (829 lines in 5 minutes for 188 tenants).
func TestNamespaceLogOf200Streams(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	core, logs := observer.New(zap.InfoLevel)
	l := &namespaceLog{clk: clk, every: namespaceLogEvery, log: zap.New(core)}
	var exists atomic.Bool
	lookup := func(context.Context) (bool, error) { return exists.Load(), nil }
	var watches []*namespaceWatch
	for i := range 200 {
		ns := fmt.Sprintf("tenant%03d.orders", i)
		report := func(missing, changed bool, since time.Time) {
			if changed {
				l.change(ns, missing, since)
			}
		}
		w := newNamespaceWatch(clk, namespaceCheckEvery, time.Second, lookup, report, zap.NewNop())
		l.register()
		w.start(context.Background())
		watches = append(watches, w)
		clk.Advance(100 * time.Millisecond) // the spawns take 20 s
	}
	missing, appeared := 0, 0 // namespaces the lines named, by count
	perMinute := func(what string) {
		t.Helper()
		lines := logs.TakeAll()
		if len(lines) > 2 {
			t.Fatalf("%s: %d lines logged in a minute, want at most 2: %v", what, len(lines), lines)
		}
		for _, e := range lines {
			n := 1
			if c, ok := e.ContextMap()["count"]; ok {
				n = int(c.(int64))
			}
			if e.Level == zap.WarnLevel {
				missing += n
			} else {
				appeared += n
			}
		}
	}
	clk.Advance(40 * time.Second)
	perMinute("the first minute")
	for range 5 {
		clk.Advance(time.Minute)
		perMinute("a later minute of missing collections")
	}
	if missing != 200 || appeared != 0 {
		t.Fatalf("while missing, the lines named %d missing and %d appeared collections, want each of the 200 missing once", missing, appeared)
	}
	exists.Store(true)
	for range 3 {
		clk.Advance(time.Minute)
		perMinute("the minutes the collections appear in")
	}
	for _, w := range watches {
		w.stop()
		l.unregister()
	}
	perMinute("stop")
	if missing != 200 || appeared != 200 {
		t.Fatalf("the lines named %d missing and %d appeared collections, want 200 each", missing, appeared)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending after every watch stopped", clk.Pending())
	}
}
