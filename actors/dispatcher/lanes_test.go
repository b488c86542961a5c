package dispatcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

func TestRoutingOutcomes(t *testing.T) {
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		if c.key == "skip" {
			return fmt.Errorf("handler: %w", errSkip)
		}
		return nil
	}}
	h := newHarness(t, r)
	h.subscribe(1)
	h.send(
		mkEvent(1, "a"),
		tev{seq: 2, key: "b", op: "unhandled"},
		tev{seq: 3, key: "c", op: "filtered"},
		mkEvent(4, "skip"),
		tev{seq: 5, key: "d", op: "update"},
	)
	got := h.waitSettled(1, 2, 3, 4, 5)
	r.checkReleased(t) // 1, 4 and 5: the events with an invocation
	want := map[uint64]messages.Outcome{
		1: messages.Outcome_OUTCOME_HANDLED,
		2: messages.Outcome_OUTCOME_UNHANDLED,
		3: messages.Outcome_OUTCOME_FILTERED,
		4: messages.Outcome_OUTCOME_SKIPPED,
		5: messages.Outcome_OUTCOME_HANDLED,
	}
	for s, o := range want {
		if got[s] != o {
			t.Errorf("seq %d settled %v, want %v", s, got[s], o)
		}
	}
	if tok := string(h.settled[1].ResumeToken); !strings.Contains(tok, "T00000001") {
		t.Errorf("Settled.resume_token = %q, want the event's token", tok)
	}
	st := h.stats()
	if st.Handled != 2 || st.Unhandled != 1 || st.Filtered != 1 || st.Skipped != 1 || st.Settled != 5 || st.InFlight != 0 {
		t.Errorf("stats = %v", st)
	}
	ev := h.ev.snapshot()
	if len(ev.skipped) != 1 || ev.skipped[0].Reason != observe.SkipByHandler || !strings.Contains(ev.skipped[0].Detail, "not for us") ||
		ev.skipped[0].EventID != "T00000004" {
		t.Errorf("Skipped events = %+v", ev.skipped)
	}
	if ids, _ := h.dlStore.ListDeadLetters(context.Background(), store.Scope{Stream: "orders"}, 0); len(ids) != 0 {
		t.Errorf("skip wrote dead letters: %v", ids)
	}
	if h.logs.FilterMessage("event skipped by its handler").FilterField(zap.String("stream", "orders")).Len() != 1 {
		t.Errorf("skip not logged with the stream name")
	}
}

func TestSingleLaneIsStrictlySequential(t *testing.T) {
	var running, maxRunning atomic.Int32
	var mu sync.Mutex
	var seen []uint64
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		n := running.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		seen = append(seen, c.seq)
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) // simulated work
		running.Add(-1)
		return nil
	}}
	h := newHarness(t, r) // Lanes defaults to 1
	h.subscribe(1)
	var all []uint64
	for b := range 10 {
		var evs []tev
		for i := range 10 {
			s := uint64(b*10 + i + 1)
			evs = append(evs, mkEvent(s, fmt.Sprintf("k%d", rand.IntN(7))))
			all = append(all, s)
		}
		if b == 5 {
			evs[3] = tev{seq: evs[3].seq, op: "drop"} // a keyless event
		}
		h.send(evs...)
	}
	h.waitSettled(all...)
	if maxRunning.Load() != 1 {
		t.Fatalf("max concurrent handlers with 1 lane = %d, want 1", maxRunning.Load())
	}
	for i, s := range seen {
		if s != uint64(i+1) {
			t.Fatalf("handler order %v, want 1..100 in order", seen)
		}
	}
	for i, s := range h.order {
		if s != uint64(i+1) {
			t.Fatalf("settlement order %v, want 1..100", h.order)
		}
	}
}

// TestLanesPreserveKeyOrderProperty: for random lane counts, keys, batch sizes and handler
// delays, every key's events are handled in seq order, exactly once each, and all settle.
func TestLanesPreserveKeyOrderProperty(t *testing.T) {
	for iter := range 12 {
		seed := uint64(iter)*7919 + 1
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			lanes := 1 + rng.IntN(8)
			keys := 1 + rng.IntN(12)
			var mu sync.Mutex
			perKey := map[string][]uint64{}
			calls := map[uint64]int{}
			r := &fakeRouter{handle: func(_ context.Context, c call) error {
				mu.Lock()
				perKey[c.key] = append(perKey[c.key], c.seq)
				calls[c.seq]++
				d := time.Duration(rand.IntN(100)) * time.Microsecond
				mu.Unlock()
				time.Sleep(d) // simulated work of random length
				return nil
			}}
			h := newHarness(t, r, func(c *Config) { c.Lanes = lanes; c.Capacity = 64 })
			h.subscribe(1)
			var seq uint64
			var all []uint64
			total := 300
			for len(all) < total {
				// Send within credit; wait for more when it runs out.
				for h.credit == 0 {
					d := h.demand()
					h.credit += int(d.Credit)
				}
				n := min(1+rng.IntN(20), h.credit, total-len(all))
				evs := make([]tev, n)
				for i := range evs {
					seq++
					key := fmt.Sprintf("k%d", rng.IntN(keys))
					if rng.IntN(50) == 0 {
						key = "" // an occasional keyless barrier
					}
					evs[i] = tev{seq: seq, key: key, op: "insert"}
					all = append(all, seq)
				}
				h.send(evs...)
				h.drainCP()
			}
			h.waitSettled(all...)
			mu.Lock()
			defer mu.Unlock()
			for k, seqs := range perKey {
				for i := 1; i < len(seqs); i++ {
					if seqs[i] <= seqs[i-1] {
						t.Fatalf("lanes=%d key %q handled out of order: %v", lanes, k, seqs)
					}
				}
			}
			for _, s := range all {
				if calls[s] != 1 {
					t.Fatalf("seq %d handled %d times", s, calls[s])
				}
			}
		})
	}
}

// TestLanesRunKeysInParallel: with 2 lanes, the handler of one key blocks until a handler of
// another key (in the other lane) has started; it would deadlock if lanes were sequential.
func TestLanesRunKeysInParallel(t *testing.T) {
	// Find two keys that hash to different lanes of 2.
	k1, k2 := "a", ""
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if laneOf(keyBytes(k), 2) != laneOf(keyBytes(k1), 2) {
			k2 = k
			break
		}
	}
	secondStarted := make(chan struct{})
	r := &fakeRouter{handle: func(ctx context.Context, c call) error {
		switch c.key {
		case k1:
			select {
			case <-secondStarted:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(waitFor):
				return fmt.Errorf("lanes are not parallel")
			}
		case k2:
			close(secondStarted)
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Lanes = 2 })
	h.subscribe(1)
	h.send(mkEvent(1, k1), mkEvent(2, k2))
	if got := h.waitSettled(1, 2); got[1] != messages.Outcome_OUTCOME_HANDLED || got[2] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v", got)
	}
	if h.ev.snapshot().retries != nil {
		t.Fatal("key 1 timed out waiting for key 2: lanes did not run in parallel")
	}
}

// keyBytes is the documentKey bytes of key as the test events carry them.
func keyBytes(key string) []byte {
	e := tev{seq: 1, key: key}.build()
	k, _ := laneKey(e.raw)
	return k
}

// TestKeylessEventIsABarrier: with 4 lanes, a drop event starts only after every earlier event
// settled, and later events start only after it.
func TestKeylessEventIsABarrier(t *testing.T) {
	var mu sync.Mutex
	var log []string
	release := make(chan struct{})
	r := &fakeRouter{handle: func(ctx context.Context, c call) error {
		mu.Lock()
		log = append(log, fmt.Sprintf("start %d", c.seq))
		mu.Unlock()
		if c.seq <= 3 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		mu.Lock()
		log = append(log, fmt.Sprintf("end %d", c.seq))
		mu.Unlock()
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Lanes = 4 })
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "c"), tev{seq: 4, op: "drop"}, mkEvent(5, "d"), mkEvent(6, "a"))
	eventually(t, "three handlers running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 3
	})
	h.drainCP()
	if len(h.order) != 0 {
		t.Fatalf("settled %v while the first three are blocked", h.order)
	}
	close(release)
	h.waitSettled(1, 2, 3, 4, 5, 6)
	mu.Lock()
	defer mu.Unlock()
	pos := map[string]int{}
	for i, l := range log {
		pos[l] = i
	}
	for _, s := range []int{1, 2, 3} {
		if pos[fmt.Sprintf("end %d", s)] > pos["start 4"] {
			t.Fatalf("barrier 4 started before %d ended: %v", s, log)
		}
	}
	for _, s := range []int{5, 6} {
		if pos[fmt.Sprintf("start %d", s)] < pos["end 4"] {
			t.Fatalf("%d started before barrier 4 ended: %v", s, log)
		}
	}
}

// goroutinesIn counts the goroutines whose stack contains fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), fn+"(")
}

// waitGoroutinesIn polls until no goroutine runs fn, or fails after waitFor.
func waitGoroutinesIn(t *testing.T, fn string, want int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for goroutinesIn(fn) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s after %v, want %d", goroutinesIn(fn), fn, waitFor, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleLanesHoldNoGoroutine: a lane's goroutine exists only while the lane is busy. An idle
// dispatcher (before any event, and once its lanes stayed empty for laneLinger) holds none,
// and the next events start one again.
func TestIdleLanesHoldNoGoroutine(t *testing.T) {
	const laneRun = "dispatcher.(*lane).run"
	release := make(chan struct{})
	r := &fakeRouter{handle: func(ctx context.Context, c call) error {
		if c.key == "block" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Lanes = 4 })
	h.subscribe(1)
	waitGoroutinesIn(t, laneRun, 0)
	h.send(mkEvent(1, "a"), mkEvent(2, "b"), mkEvent(3, "c"), mkEvent(4, "d"))
	h.waitSettled(1, 2, 3, 4)
	waitGoroutinesIn(t, laneRun, 0)
	h.send(mkEvent(5, "block"))
	waitGoroutinesIn(t, laneRun, 1) // the lane whose handler is running
	close(release)
	if got := h.waitSettled(5); got[5] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcome after the lanes idled: %v", got[5])
	}
	waitGoroutinesIn(t, laneRun, 0)
}

// TestIdleLaneKeepsNoQueue: a lane whose goroutine ended after a burst keeps neither its queue
// nor its spare at the burst's size.
func TestIdleLaneKeepsNoQueue(t *testing.T) {
	var settled atomic.Int64
	sb := &settleBuf{notify: func() {}}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	sh := &laneShared{stream: "s", router: &fakeRouter{handle: func(context.Context, call) error {
		settled.Add(1)
		return nil
	}}, retry: policy.Retry{MaxAttempts: 1}, rnd: func() float64 { return 0 }, clk: clock.Real(), log: zap.NewNop(),
		obs: observe.Nop{}, settle: sb, ctx: ctx, wg: &wg}
	l := newLane(0, sh)
	const burst = 1000
	items := make([]item, burst)
	for i := range items {
		items[i] = item{ev: event{seq: uint64(i + 1), raw: mkEvent(uint64(i+1), "k").build().raw}, incarnation: 1}
	}
	for i := 0; i < burst; i += 100 {
		l.push(items[i : i+100])
	}
	deadline := time.Now().Add(waitFor + laneLinger)
	for {
		l.mu.Lock()
		running, q, sp := l.running, cap(l.q), cap(l.sp)
		l.mu.Unlock()
		if !running {
			if settled.Load() != burst || q != 0 || sp != 0 {
				t.Fatalf("lane ended with %d of %d settled, queue cap %d, spare cap %d; want all settled, no queue kept",
					settled.Load(), burst, q, sp)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lane still running after %v (%d settled)", waitFor+laneLinger, settled.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
