package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

func TestRetryDelaysAreExactOnTheFakeClock(t *testing.T) {
	var attempts []int
	var mu sync.Mutex
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, c.attempt)
		if c.attempt < 4 {
			return fmt.Errorf("attempt %d: transient", c.attempt)
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) {
		c.Retry = policy.Retry{MaxAttempts: 5, InitialDelay: 100 * time.Millisecond, Multiplier: 3, MaxDelay: 500 * time.Millisecond}
		c.Rand = func() float64 { return 0 } // jitter factor 0.8
	})
	h.subscribe(1)
	h.send(mkEvent(1, "a"))
	// delay(n) = min(100ms × 3^(n-1), 500ms) × 0.8
	for i, want := range []time.Duration{80 * time.Millisecond, 240 * time.Millisecond, 400 * time.Millisecond} {
		if got := h.armed(1); got != want {
			t.Fatalf("retry %d: delay %v, want %v", i+1, got, want)
		}
		h.clk.Advance(want - time.Nanosecond)
		h.drainCP()
		if len(h.order) != 0 || h.clk.Pending() != 1 {
			t.Fatalf("retry %d fired before its delay", i+1)
		}
		h.clk.Advance(time.Nanosecond)
	}
	if got := h.waitSettled(1)[1]; got != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcome %v", got)
	}
	mu.Lock()
	if fmt.Sprint(attempts) != "[1 2 3 4]" {
		t.Fatalf("attempts %v", attempts)
	}
	mu.Unlock()
	ev := h.ev.snapshot()
	if len(ev.retries) != 3 || ev.retries[2].Attempt != 3 || ev.retries[2].Delay != 400*time.Millisecond ||
		ev.retries[0].EventID != "T00000001" || !strings.Contains(ev.retries[0].Err.Error(), "transient") {
		t.Fatalf("RetryScheduled = %+v", ev.retries)
	}
}

func TestPermanentErrorSkipsRetries(t *testing.T) {
	var calls atomic.Int32
	r := &fakeRouter{handle: func(context.Context, call) error {
		calls.Add(1)
		return fmt.Errorf("validate: %w", errPermanent)
	}}
	h := newHarness(t, r, func(c *Config) { c.DeadLetterRetention = 24 * time.Hour })
	h.subscribe(1)
	h.send(mkEvent(1, "a"))
	if got := h.waitSettled(1)[1]; got != messages.Outcome_OUTCOME_DEAD_LETTERED {
		t.Fatalf("outcome %v", got)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times, want 1", calls.Load())
	}
	dl, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000001")
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	now := h.clk.Now()
	if dl.Attempts != 1 || dl.Stream != "orders" || dl.OperationType != "insert" || dl.Namespace != "shop.orders" ||
		!strings.Contains(dl.Error, "bad order") || dl.ErrorType != "permanent" ||
		!dl.CreatedAt.Equal(now) || !dl.ExpiresAt.Equal(now.Add(24*time.Hour)) || !dl.FirstAttemptAt.Equal(now) ||
		dl.DocumentKey.Lookup("_id").StringValue() != "a" || len(dl.Event) == 0 || dl.Token.Lookup("_data").StringValue() != "T00000001" {
		t.Fatalf("dead letter = %+v", dl)
	}
	ev := h.ev.snapshot()
	if len(ev.retries) != 0 || len(ev.dls) != 1 || ev.dls[0].Attempts != 1 || ev.dls[0].OperationType != "insert" ||
		ev.dls[0].EventID != "T00000001" || ev.dls[0].Stream != "orders" || !ev.dls[0].Time.Equal(now) {
		t.Fatalf("events: retries %v, dead letters %+v", ev.retries, ev.dls)
	}
	if h.logs.FilterMessage("event dead-lettered").FilterField(zap.Bool("permanent", true)).Len() != 1 {
		t.Fatal("dead letter not logged as permanent")
	}
}

func TestExhaustedAttemptsDeadLetter(t *testing.T) {
	r := &fakeRouter{handle: func(context.Context, call) error { return errors.New("still down") }}
	h := newHarness(t, r, func(c *Config) { c.Retry.MaxAttempts = 2; c.Retry.DisableJitter = true })
	h.subscribe(1)
	start := h.clk.Now()
	h.send(mkEvent(1, "a"))
	if d := h.armed(1); d != 500*time.Millisecond {
		t.Fatalf("delay %v", d)
	}
	h.clk.Advance(500 * time.Millisecond)
	if got := h.waitSettled(1)[1]; got != messages.Outcome_OUTCOME_DEAD_LETTERED {
		t.Fatalf("outcome %v", got)
	}
	r.checkReleased(t) // once, after both attempts (Call after Release fails the attempt)
	dl, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000001")
	if err != nil {
		t.Fatal(err)
	}
	if dl.Attempts != 2 || !dl.FirstAttemptAt.Equal(start) || !dl.LastAttemptAt.Equal(start.Add(500*time.Millisecond)) ||
		dl.ErrorType != "error" || !dl.ExpiresAt.IsZero() {
		t.Fatalf("dead letter = %+v", dl)
	}
}

// poisonHandler panics on the key "poison"; its name must appear in the dead letter's stack.
func poisonHandler(_ context.Context, c call) error {
	if c.key == "poison" {
		var m map[string]int
		//lint:ignore SA5000 the runtime panic is the point
		m["boom"]++ // nil map write: a runtime panic at this line
	}
	return nil
}

func TestHandlerPanicBecomesDeadLetterWithStack(t *testing.T) {
	h := newHarness(t, &fakeRouter{handle: poisonHandler}, func(c *Config) { c.Retry.MaxAttempts = 2 })
	h.subscribe(1)
	h.send(mkEvent(1, "ok"), mkEvent(2, "poison"), mkEvent(3, "ok2"))
	h.armed(1) // the retry of seq 2; seq 3 waits behind it in the single lane
	h.clk.Advance(time.Second)
	got := h.waitSettled(1, 2, 3)
	if got[1] != messages.Outcome_OUTCOME_HANDLED || got[2] != messages.Outcome_OUTCOME_DEAD_LETTERED || got[3] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v", got)
	}
	dl, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000002")
	if err != nil {
		t.Fatal(err)
	}
	if dl.ErrorType != "panic" || !strings.Contains(dl.Error, "assignment to entry in nil map") ||
		!strings.Contains(dl.Stack, "poisonHandler") || !strings.Contains(dl.Stack, "failure_test.go") || dl.Attempts != 2 {
		t.Fatalf("dead letter: type %q error %q attempts %d stack:\n%s", dl.ErrorType, dl.Error, dl.Attempts, dl.Stack)
	}
	panics := h.logs.FilterMessage("handler panicked").All()
	if len(panics) != 2 || !strings.Contains(fmt.Sprint(panics[0].ContextMap()["stack"]), "poisonHandler") ||
		panics[1].ContextMap()["attempt"] != int64(2) {
		t.Fatalf("handler panics logged: %d", len(panics))
	}
	// The stream keeps going.
	h.send(mkEvent(4, "poison2"))
	if got := h.waitSettled(4)[4]; got != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("after the panic: %v", got)
	}
}

func TestDeadLetterStoreDownKeepsEventUnsettled(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		if c.key == "bad" {
			return errPermanent
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Retry.DisableJitter = true; c.Retry.InitialDelay = 100 * time.Millisecond })
	h.dlStore.SetFault(func(_ context.Context, op memstore.Op) error {
		if op == memstore.OpPutDeadLetter && down.Load() {
			return errors.New("store: connection refused")
		}
		return nil
	})
	h.subscribe(1)
	h.send(mkEvent(1, "ok"), mkEvent(2, "bad"), mkEvent(3, "after"))
	h.waitSettled(1)
	// Write retries: 100ms, 200ms, 400ms; the event stays unsettled and seq 3 waits behind it.
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if got := h.armed(1); got != want {
			t.Fatalf("write retry %d: delay %v, want %v", i+1, got, want)
		}
		h.drainCP()
		if h.settled[2] != nil || h.settled[3] != nil {
			t.Fatalf("settled while the dead-letter store is down: %v", h.order)
		}
		h.clk.Advance(want)
	}
	h.armed(1)
	if st := h.stats(); st.InFlight != 2 || st.DeadLettered != 0 {
		t.Fatalf("stats while down: %v", st)
	}
	down.Store(false)
	h.clk.Advance(800 * time.Millisecond)
	got := h.waitSettled(2, 3)
	if got[2] != messages.Outcome_OUTCOME_DEAD_LETTERED || got[3] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v", got)
	}
	if h.order[1] != 2 || h.order[2] != 3 {
		t.Fatalf("settlement order %v", h.order)
	}
	if _, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000002"); err != nil {
		t.Fatalf("dead letter not stored: %v", err)
	}
	ev := h.ev.snapshot()
	if len(ev.dlFails) != 4 || ev.dlFails[3].EventID != "T00000002" || !strings.Contains(ev.dlFails[0].Err.Error(), "refused") {
		t.Fatalf("DeadLetterFailed = %+v", ev.dlFails)
	}
	if len(ev.dls) != 1 || ev.dls[0].Dropped {
		t.Fatalf("DeadLettered = %+v", ev.dls)
	}
}

func TestUndecodableEventIsDeadLetteredWithTheDecodeError(t *testing.T) {
	var calls atomic.Int32
	r := &fakeRouter{handle: func(context.Context, call) error { calls.Add(1); return nil }}
	h := newHarness(t, r)
	h.subscribe(1)
	h.send(tev{seq: 1, key: "a", undec: true}, mkEvent(2, "a"))
	got := h.waitSettled(1, 2)
	if got[1] != messages.Outcome_OUTCOME_DEAD_LETTERED || got[2] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v", got)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler calls %d, want 1 (not for the undecodable event)", calls.Load())
	}
	dl, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000001")
	if err != nil {
		t.Fatal(err)
	}
	// No handler call was made: the record and the report say Attempts 0.
	if dl.ErrorType != "decode" || dl.Error != errDecode.Error() || dl.Attempts != 0 {
		t.Fatalf("dead letter = %+v, want ErrorType decode, the decode error and Attempts 0", dl)
	}
	if ev := h.ev.snapshot(); len(ev.retries) != 0 || len(ev.dls) != 1 || ev.dls[0].Attempts != 0 {
		t.Fatalf("events: retries %v dead letters %+v", ev.retries, ev.dls)
	}
	if h.logs.FilterMessage("event dead-lettered").FilterField(zap.Bool("permanent", true)).Len() != 1 {
		t.Fatal("decode error not dead-lettered as permanent")
	}
}

func TestDeadLettersDisabledDropsAndSettles(t *testing.T) {
	r := &fakeRouter{handle: func(context.Context, call) error { return errPermanent }}
	h := newHarness(t, r, func(c *Config) { c.DeadLetters = nil })
	h.subscribe(1)
	h.send(mkEvent(1, "a"))
	if got := h.waitSettled(1)[1]; got != messages.Outcome_OUTCOME_DEAD_LETTERED {
		t.Fatalf("outcome %v", got)
	}
	if st := h.stats(); st.Dropped != 1 || st.DeadLettered != 0 {
		t.Fatalf("stats %v", st)
	}
	if ev := h.ev.snapshot(); len(ev.dls) != 1 || !ev.dls[0].Dropped {
		t.Fatalf("DeadLettered = %+v", ev.dls)
	}
	if h.logs.FilterMessage("event dropped: its attempts ran out and dead letters are disabled").Len() != 1 {
		t.Fatal("drop not logged at ERROR")
	}
}

// TestRedeliveredDeadLetterOverwrites: the dead-letter ID is the event ID, so the same event
// failing again (a redelivery) overwrites its record.
func TestRedeliveredDeadLetterOverwrites(t *testing.T) {
	r := &fakeRouter{handle: func(context.Context, call) error { return errPermanent }}
	h := newHarness(t, r)
	h.subscribe(1)
	h.send(mkEvent(1, "a"))
	h.waitSettled(1)
	h.subscribe(2)
	e := mkEvent(1, "a")
	h.sendInc(2, e) // the same event (same token), redelivered by a new cursor as seq 1
	eventually(t, "second dead letter", func() bool { return h.dlStore.Stats().DeadLetterPuts == 2 })
	list, err := h.dlStore.ListDeadLetters(context.Background(), store.Scope{Stream: "orders"}, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters %v %v", list, err)
	}
	var _ store.DeadLetter = list[0]
}

func TestPanickingEventsNeverBreakTheDispatcher(t *testing.T) {
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		switch c.key {
		case "skip":
			return errSkip
		case "perm":
			return errPermanent
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) { c.Observer = observe.Func(func(observe.Event) { panic("observer bug") }) })
	h.subscribe(1)
	h.send(mkEvent(1, "skip"), mkEvent(2, "perm"), mkEvent(3, "ok"))
	got := h.waitSettled(1, 2, 3)
	if got[1] != messages.Outcome_OUTCOME_SKIPPED || got[2] != messages.Outcome_OUTCOME_DEAD_LETTERED || got[3] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v", got)
	}
	if h.logs.FilterMessage("dispatcher Observer panicked").Len() == 0 {
		t.Fatal("observer panics not logged")
	}
}

// A handler that calls runtime.Goexit (t.FailNow does) ends its lane's goroutine, which no
// recover can prevent. The lane must go on in a new goroutine: the attempt counts as failed
// (ErrHandlerGoexit, retryable), a later attempt may succeed, an event that always does it is
// dead-lettered, and the events behind it are processed. goleak (TestMain) checks that the
// replacement goroutines end with the dispatcher.
func TestHandlerGoexitDoesNotStallTheLane(t *testing.T) {
	var calls sync.Map // key -> attempts seen
	r := &fakeRouter{handle: func(_ context.Context, c call) error {
		n, _ := calls.LoadOrStore(c.key, new(atomic.Int32))
		k := n.(*atomic.Int32).Add(1)
		switch {
		case c.key == "once" && k == 1, c.key == "always":
			runtime.Goexit()
		}
		return nil
	}}
	h := newHarness(t, r, func(c *Config) {
		c.Retry.MaxAttempts = 2
		c.Retry.DisableJitter = true
		c.Retry.InitialDelay = time.Second
	})
	h.subscribe(1)
	h.send(mkEvent(1, "once"), mkEvent(2, "always"), mkEvent(3, "after"))
	h.armed(1) // the retry of seq 1
	h.clk.Advance(time.Second)
	h.armed(1) // the retry of seq 2
	h.clk.Advance(time.Second)
	got := h.waitSettled(1, 2, 3)
	if got[1] != messages.Outcome_OUTCOME_HANDLED || got[2] != messages.Outcome_OUTCOME_DEAD_LETTERED ||
		got[3] != messages.Outcome_OUTCOME_HANDLED {
		t.Fatalf("outcomes %v: want handled (2nd attempt), dead-lettered, handled", got)
	}
	r.checkReleased(t) // an attempt that ended in Goexit releases its invocation as it unwinds
	dl, err := h.dlStore.GetDeadLetter(context.Background(), store.Scope{Stream: "orders"}, "T00000002")
	if err != nil {
		t.Fatal(err)
	}
	if dl.Attempts != 2 || !strings.Contains(dl.Error, "Goexit") {
		t.Fatalf("dead letter: attempts %d error %q; want 2 attempts and ErrHandlerGoexit", dl.Attempts, dl.Error)
	}
}

// ValidationError is an exported error type of the test, for TestErrorTypeNames.
type ValidationError struct{}

func (*ValidationError) Error() string { return "invalid" }

// unexportedErr is an error type with an unexported name, as watchtree.Permanent's wrapper is.
type unexportedErr struct{ err error }

func (e *unexportedErr) Error() string   { return "wrapped: " + e.err.Error() }
func (e *unexportedErr) Unwrap() error   { return e.err }
func (e *unexportedErr) Permanent() bool { return true }

// TestErrorTypeNames: DeadLetter.ErrorType is a stable public name, never an unexported Go
// type such as *watchtree.permanentError or *fmt.wrapError.
func TestErrorTypeNames(t *testing.T) {
	for _, c := range []struct {
		f    failure
		want string
	}{
		{failure{err: newPanicError("boom")}, "panic"},
		{failure{err: errors.New("bad bytes"), decode: true}, "decode"},
		{failure{err: &unexportedErr{errors.New("no")}, permanent: true}, "permanent"},
		{failure{err: fmt.Errorf("validate: %w", &unexportedErr{&ValidationError{}}), permanent: true}, "*dispatcher.ValidationError"},
		{failure{err: errors.Join(errors.New("a"), &ValidationError{})}, "*dispatcher.ValidationError"},
		{failure{err: fmt.Errorf("call: %w", context.DeadlineExceeded)}, "timeout"},
		{failure{err: context.Canceled}, "canceled"},
		{failure{err: errors.New("still down")}, "error"},
	} {
		if got := errorType(c.f); got != c.want {
			t.Errorf("errorType(%v) = %q, want %q", c.f.err, got, c.want)
		}
	}
}
