package chaos

import (
	"slices"
	"testing"
	"time"
)

// scheduleOpts returns defaulted Options of seed and d, every kind enabled.
func scheduleOpts(seed uint64, d time.Duration) Options {
	o := Options{Seed: seed, Duration: d, Log: nil}
	o.defaults()
	return o
}

// TestScheduleCoversEveryKind is issue 37's guarantee: a 600-second run applies every fault
// kind at least MinPerKind600 times, whatever the seed, and each kind's count is the completed
// rounds or one more (a balanced mix).
func TestScheduleCoversEveryKind(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		opts := scheduleOpts(seed, 600*time.Second)
		plan := schedule(opts)
		n := map[string]int{}
		for _, f := range plan {
			n[f.kind]++
		}
		least, most := len(plan), 0
		for _, k := range FaultKinds() {
			least, most = min(least, n[k]), max(most, n[k])
		}
		if least < MinPerKind600 {
			t.Fatalf("seed %d: a kind ran %d times in 600 s, want >= %d: %v", seed, least, MinPerKind600, n)
		}
		if most-least > 1 {
			t.Fatalf("seed %d: counts from %d to %d, want a balanced mix: %v", seed, least, most, n)
		}
		if r := rounds(plan, opts.Faults); r != least {
			t.Fatalf("seed %d: rounds = %d, want %d", seed, r, least)
		}
	}
}

// TestScheduleShortRunsAreBalanced: shorter runs plan fewer faults, still every kind the
// completed rounds or once more, each round a permutation of the kinds, every start within
// the duration and in order.
func TestScheduleShortRunsAreBalanced(t *testing.T) {
	for _, d := range []time.Duration{10 * time.Second, 60 * time.Second, 120 * time.Second, 300 * time.Second} {
		for seed := uint64(1); seed <= 300; seed++ {
			opts := scheduleOpts(seed, d)
			plan := schedule(opts)
			if len(plan) == 0 {
				t.Fatalf("%v seed %d: no fault planned", d, seed)
			}
			k := len(opts.Faults)
			for i := 0; i < len(plan); i += k {
				var round []string
				for _, f := range plan[i:min(i+k, len(plan))] {
					round = append(round, f.kind)
				}
				slices.Sort(round)
				if len(slices.Compact(slices.Clone(round))) != len(round) {
					t.Fatalf("%v seed %d: round %d repeats a kind: %v", d, seed, i/k, round)
				}
			}
			for i, f := range plan {
				if f.at >= d || (i > 0 && f.at <= plan[i-1].at) {
					t.Fatalf("%v seed %d: fault %d planned at %v (previous %v)", d, seed, i, f.at, plan[max(i-1, 0)].at)
				}
			}
		}
	}
}

// TestScheduleIsReproducible: the plan is a function of the seed (and the options), and two
// seeds give two plans.
func TestScheduleIsReproducible(t *testing.T) {
	a, b := schedule(scheduleOpts(42, 600*time.Second)), schedule(scheduleOpts(42, 600*time.Second))
	if !slices.Equal(a, b) {
		t.Fatal("the same seed planned two schedules")
	}
	if c := schedule(scheduleOpts(43, 600*time.Second)); slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 planned the same schedule")
	}
	sub := scheduleOpts(42, 120*time.Second)
	sub.Faults = []string{FaultKill, FaultPause}
	for _, f := range schedule(sub) {
		if f.kind != FaultKill && f.kind != FaultPause {
			t.Fatalf("a %s planned from kinds %v", f.kind, sub.Faults)
		}
	}
}

// TestReportUndercovered names the kinds under the minimum, in Kinds' order.
func TestReportUndercovered(t *testing.T) {
	r := &Report{Kinds: []string{FaultKill, FaultPause, FaultSpawn},
		Faults: []string{FaultKill, FaultPause, FaultKill, FaultPause, FaultSpawn, FaultKill}}
	if got := r.Undercovered(2); !slices.Equal(got, []string{FaultSpawn}) {
		t.Fatalf("Undercovered(2) = %v, want [spawn-stream]", got)
	}
	if got := r.Undercovered(1); len(got) != 0 {
		t.Fatalf("Undercovered(1) = %v, want none", got)
	}
	if got := r.Counts()[FaultKill]; got != 3 {
		t.Fatalf("Counts()[sigkill] = %d, want 3", got)
	}
}
