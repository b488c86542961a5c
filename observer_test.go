package watchtree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain fails the package's tests if any goroutine (a safeObserver drain loop above all)
// outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// allObserverEvents returns one value of every ObserverEvent kind.
func allObserverEvents(stream string) []ObserverEvent {
	m := Meta{Stream: stream, Time: time.Unix(1700000000, 0)}
	cause := errors.New("cause")
	return []ObserverEvent{
		Started{Meta: m, Position: "checkpoint"},
		Stopped{Meta: m, Reason: Crashed, Cause: fmt.Errorf("x: %w", ErrGaveUp), Terminal: true},
		Stopped{Meta: m, Reason: Graceful},
		Stopped{Meta: m, Reason: Crashed, Cause: cause, Attempt: 2, RestartIn: 2 * time.Second},
		Restarted{Meta: m, Attempt: 2, Cause: cause},
		RetryScheduled{Meta: m, EventID: "82AA", Attempt: 1, Delay: time.Second, Err: cause},
		Skipped{Meta: m, EventID: "82AB", Reason: "duplicate"},
		DeadLettered{Meta: m, EventID: "82AC", OperationType: OpInsert, Attempts: 3, Err: cause},
		DeadLettered{Meta: m, EventID: "82AD", OperationType: OpUpdate, Attempts: 3, Err: cause, Dropped: true},
		DeadLetterFailed{Meta: m, EventID: "82AE", Err: cause},
		Checkpointed{Meta: m, Settled: 100},
		CheckpointFailed{Meta: m, Err: cause, Unflushed: 250},
		HistoryLost{Meta: m, Policy: ResumeFromNow, Err: cause},
		GapRecorded{Meta: m, Policy: ResumeFromNow},
		Invalidated{Meta: m, Cause: OpDrop, Action: InvalidateStop},
		LeadershipChanged{Meta: m, Leader: true, Epoch: 4},
		LeadershipChanged{Meta: m, Leader: false, Owner: "host-1", Epoch: 5},
	}
}

func TestObserverEventStrings(t *testing.T) {
	want := []string{
		"stream s started from checkpoint",
		"stream s stopped (crashed), terminal: x: watchtree: restart attempts exhausted",
		"stream s stopped (graceful)",
		"stream s stopped (crashed), restart attempt 2 in 2s: cause",
		"stream s restarted (attempt 2) after: cause",
		"stream s: event 82AA attempt 1 failed, retry in 1s: cause",
		"stream s: event 82AB skipped: duplicate",
		"stream s: insert event 82AC dead-lettered after 3 attempts: cause",
		"stream s: update event 82AD dropped (dead letters disabled) after 3 attempts: cause",
		"stream s: dead-letter write for event 82AE failed, will retry: cause",
		"stream s: checkpoint written (100 settled)",
		"stream s: checkpoint write failed (250 unflushed), will retry: cause",
		"stream s: change stream history lost, applying ResumeFromNow: cause",
		"stream s: gap recorded (ResumeFromNow)",
		`stream s invalidated by "drop", InvalidateStop`,
		"stream s: leader (epoch 4)",
		`stream s: not leader (owner "host-1", epoch 5)`,
	}
	evs := allObserverEvents("s")
	if len(evs) != len(want) {
		t.Fatalf("%d events, %d strings", len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.String() != want[i] {
			t.Errorf("%T.String() = %q, want %q", ev, ev.String(), want[i])
		}
		if ev.StreamName() != "s" {
			t.Errorf("%T.StreamName() = %q", ev, ev.StreamName())
		}
	}
	if StopReason(9).String() != "StopReason(9)" {
		t.Error("unknown StopReason String")
	}
}

// chanObserver forwards events to a channel; it blocks when nobody reads.
type chanObserver chan ObserverEvent

func (c chanObserver) OnEvent(ev ObserverEvent) { c <- ev }

func TestSafeObserverDeliversInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s := newSafeObserver(ObserverFunc(func(ev ObserverEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev.(Skipped).EventID)
	}), 0, nil)
	for i := range 500 {
		s.OnEvent(Skipped{Meta: Meta{Stream: "s"}, EventID: fmt.Sprint(i)})
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 500 || s.Delivered() != 500 || s.Dropped() != 0 {
		t.Fatalf("delivered %d (%d), dropped %d", len(got), s.Delivered(), s.Dropped())
	}
	for i, id := range got {
		if id != fmt.Sprint(i) {
			t.Fatalf("event %d is %s: order lost", i, id)
		}
	}
}

// TestSafeObserverNeverBlocks wedges the observer and shows that OnEvent still returns at once,
// that overflow is dropped and counted, and that the drops are logged without flooding.
func TestSafeObserverNeverBlocks(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	s := newSafeObserver(ObserverFunc(func(ObserverEvent) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
	}), 4, zap.New(core))

	s.OnEvent(Started{Meta: Meta{Stream: "s"}}) // taken by the drain goroutine, which then blocks
	<-entered
	start := time.Now()
	for range 2000 {
		s.OnEvent(Started{Meta: Meta{Stream: "s"}})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("2000 OnEvent calls on a wedged observer took %v", d)
	}
	if got, want := s.Dropped(), uint64(2000-4); got != want {
		t.Fatalf("dropped %d, want %d (queue of 4)", got, want)
	}
	drops := logs.FilterMessage("observer event dropped").All()
	if len(drops) != 2 { // the first, and the 1024th
		t.Errorf("logged %d drop lines, want 2", len(drops))
	}
	if len(drops) > 0 && drops[0].ContextMap()["stream"] != "s" {
		t.Errorf("drop log lacks the stream: %v", drops[0].ContextMap())
	}
	close(block)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Delivered() != 5 {
		t.Errorf("delivered %d, want 5", s.Delivered())
	}
}

func TestSafeObserverRecoversPanics(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	var mu sync.Mutex
	var after []string
	s := newSafeObserver(ObserverFunc(func(ev ObserverEvent) {
		if sk, ok := ev.(Skipped); ok && sk.Reason == "panic" {
			panic("observer bug")
		}
		mu.Lock()
		after = append(after, ev.StreamName())
		mu.Unlock()
	}), 8, zap.New(core))
	s.OnEvent(Skipped{Meta: Meta{Stream: "a"}, Reason: "panic"})
	s.OnEvent(Started{Meta: Meta{Stream: "b"}})
	s.OnEvent(Skipped{Meta: Meta{Stream: "c"}, Reason: "panic"})
	s.OnEvent(Started{Meta: Meta{Stream: "d"}})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Panics() != 2 || s.Delivered() != 2 {
		t.Fatalf("panics %d delivered %d", s.Panics(), s.Delivered())
	}
	if strings.Join(after, ",") != "b,d" {
		t.Fatalf("events after the panics = %v", after)
	}
	entries := logs.FilterMessage("observer panicked").All()
	if len(entries) != 2 {
		t.Fatalf("logged %d panics", len(entries))
	}
	ctx := entries[0].ContextMap()
	if ctx["stream"] != "a" || ctx["panic"] != "observer bug" || !strings.Contains(fmt.Sprint(ctx["stack"]), "observer_test.go") {
		t.Errorf("panic log = %v", ctx)
	}
}

func TestSafeObserverClose(t *testing.T) {
	t.Run("idempotent, and events after Close are dropped", func(t *testing.T) {
		s := newSafeObserver(NopObserver{}, 0, nil)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.OnEvent(Started{Meta: Meta{Stream: "s"}})
		if s.Dropped() != 1 {
			t.Fatalf("dropped %d", s.Dropped())
		}
	})
	t.Run("bounded by the context when the observer is wedged", func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan struct{})
		var once sync.Once
		s := newSafeObserver(ObserverFunc(func(ObserverEvent) {
			once.Do(func() { close(entered) })
			<-release
		}), 8, nil)
		for range 5 {
			s.OnEvent(Started{Meta: Meta{Stream: "s"}})
		}
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := s.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrObserverNotDrained) {
			t.Fatalf("Close = %v, want DeadlineExceeded and ErrObserverNotDrained", err)
		}
		// The call in progress and the 4 queued events.
		if !strings.HasPrefix(err.Error(), "observer did not drain 5 queued events within ") {
			t.Fatalf("Close error %q, want the 5 undelivered events counted", err)
		}
		close(release)
		// The drain goroutine discards the 4 queued events and exits.
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s.Delivered() != 1 || s.Dropped() != 4 {
			t.Fatalf("delivered %d dropped %d, want 1 and 4", s.Delivered(), s.Dropped())
		}
	})
	t.Run("concurrent OnEvent and Close", func(t *testing.T) {
		s := newSafeObserver(NopObserver{}, 16, nil)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 1000 {
					s.OnEvent(Started{Meta: Meta{Stream: "s"}})
				}
			})
		}
		time.Sleep(time.Millisecond)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := s.Delivered() + s.Dropped(); got != 4000 {
			t.Fatalf("delivered+dropped = %d, want 4000: an event vanished", got)
		}
	})
	t.Run("nil observer", func(t *testing.T) {
		s := newSafeObserver(nil, 1, nil)
		s.OnEvent(Started{Meta: Meta{Stream: "s"}})
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMultiObserver(t *testing.T) {
	var got []string
	rec := func(name string) Observer {
		return ObserverFunc(func(ev ObserverEvent) { got = append(got, name+":"+ev.StreamName()) })
	}
	panicking := ObserverFunc(func(ObserverEvent) { panic("first") })
	m := MultiObserver(rec("a"), nil, panicking, rec("b"), ObserverFunc(func(ObserverEvent) { panic("second") }), rec("c"))
	func() {
		defer func() {
			if p := recover(); p != "first" {
				t.Errorf("re-raised %v, want the first panic", p)
			}
		}()
		m.OnEvent(Started{Meta: Meta{Stream: "s"}})
	}()
	if strings.Join(got, ",") != "a:s,b:s,c:s" {
		t.Fatalf("calls = %v: a panic must not hide the event from the others", got)
	}
	got = nil
	MultiObserver().OnEvent(Started{Meta: Meta{Stream: "s"}})
	MultiObserver(rec("x")).OnEvent(Started{Meta: Meta{Stream: "t"}})
	if strings.Join(got, ",") != "x:t" {
		t.Fatalf("calls = %v", got)
	}
	NopObserver{}.OnEvent(Started{})
}

// TestSafeObserverWithMultiObserverPanic combines both: a panicking member is counted once, the
// others still see the event, and nothing reaches the caller.
func TestSafeObserverWithMultiObserverPanic(t *testing.T) {
	events := make(chanObserver, 4)
	s := newSafeObserver(MultiObserver(ObserverFunc(func(ObserverEvent) { panic("x") }), events), 4, nil)
	s.OnEvent(Started{Meta: Meta{Stream: "s"}})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Panics() != 1 || len(events) != 1 {
		t.Fatalf("panics %d, forwarded %d", s.Panics(), len(events))
	}
}
