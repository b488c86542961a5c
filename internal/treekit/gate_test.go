package treekit

import (
	"testing"
	"time"
)

func TestGatePassesTheFirstThenOnePerInterval(t *testing.T) {
	var g Gate
	t0 := time.Time{} // a fake clock's start: the zero time must not read as "never passed"
	for i, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {0, false}, {99 * time.Millisecond, false}, {100 * time.Millisecond, true},
		{150 * time.Millisecond, false}, {250 * time.Millisecond, true}} {
		if got := g.Pass(t0.Add(c.at), 100*time.Millisecond); got != c.want {
			t.Fatalf("step %d at %v: Pass = %v, want %v", i, c.at, got, c.want)
		}
	}
}

func TestGateMarkRestartsTheInterval(t *testing.T) {
	var g Gate
	t0 := time.Time{}
	g.Mark(t0.Add(50 * time.Millisecond))
	if g.Pass(t0.Add(100*time.Millisecond), 100*time.Millisecond) {
		t.Fatal("Pass 50ms after a Mark, want false")
	}
	if !g.Pass(t0.Add(150*time.Millisecond), 100*time.Millisecond) {
		t.Fatal("Pass 100ms after a Mark, want true")
	}
}
