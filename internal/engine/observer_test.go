package engine

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

	"github.com/watchtree/watchtree/observe"
)

// TestMain fails the package's tests if any goroutine (a safeObserver drain loop above all)
// outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chanObserver forwards events to a channel; it blocks when nobody reads.
type chanObserver chan observe.Event

func (c chanObserver) OnEvent(ev observe.Event) { c <- ev }

func TestSafeObserverDeliversInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s := newSafeObserver(observe.Func(func(ev observe.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev.(observe.Skipped).EventID)
	}), 0, nil)
	for i := range 500 {
		s.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "s"}, EventID: fmt.Sprint(i)})
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
	s := newSafeObserver(observe.Func(func(observe.Event) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
	}), 4, zap.New(core))

	s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}}) // taken by the drain goroutine, which then blocks
	<-entered
	start := time.Now()
	for range 2000 {
		s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
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
	s := newSafeObserver(observe.Func(func(ev observe.Event) {
		if sk, ok := ev.(observe.Skipped); ok && sk.Detail == "panic" {
			panic("observer bug")
		}
		mu.Lock()
		after = append(after, ev.EventMeta().Stream)
		mu.Unlock()
	}), 8, zap.New(core))
	s.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "a"}, Detail: "panic"})
	s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "b"}})
	s.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "c"}, Detail: "panic"})
	s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "d"}})
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
		s := newSafeObserver(observe.Nop{}, 0, nil)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
		if s.Dropped() != 1 {
			t.Fatalf("dropped %d", s.Dropped())
		}
	})
	t.Run("bounded by the context when the observer is wedged", func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan struct{})
		var once sync.Once
		s := newSafeObserver(observe.Func(func(observe.Event) {
			once.Do(func() { close(entered) })
			<-release
		}), 8, nil)
		for range 5 {
			s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
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
		s := newSafeObserver(observe.Nop{}, 16, nil)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 1000 {
					s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
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
		s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSafeObserverWithMultiObserverPanic combines both: a panicking member is counted once, the
// others still see the event, and nothing reaches the caller.
func TestSafeObserverWithMultiObserverPanic(t *testing.T) {
	events := make(chanObserver, 4)
	s := newSafeObserver(observe.Multi(observe.Func(func(observe.Event) { panic("x") }), events), 4, nil)
	s.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Panics() != 1 || len(events) != 1 {
		t.Fatalf("panics %d, forwarded %d", s.Panics(), len(events))
	}
}

// blockingObserver blocks every OnEvent until release is closed; entered is closed when the
// first call blocks. An event Skipped{Detail: "panic"} panics instead.
type blockingObserver struct {
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func newBlockingObserver() *blockingObserver {
	return &blockingObserver{release: make(chan struct{}), entered: make(chan struct{})}
}

func (b *blockingObserver) OnEvent(ev observe.Event) {
	if sk, ok := ev.(observe.Skipped); ok && sk.Detail == "panic" {
		panic("observer bug")
	}
	b.once.Do(func() { close(b.entered) })
	<-b.release
}

// TestRuntimeObserverStats: events the runtime could not hand to a slow Observer are counted,
// and ObserverStats reads the counts (zero before Start, final after Stop).
func TestRuntimeObserverStats(t *testing.T) {
	e := newEnv(t)
	obs := newBlockingObserver()
	rt := New(testConfig(e, obs))
	if st := rt.ObserverStats(); st != (ObserverStats{}) {
		t.Fatalf("stats before Start = %+v, want zero", st)
	}
	ctx := testCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rt.obs.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "s"}, Detail: "panic"})
	// The drain goroutine takes the Started and blocks: the queue is empty again.
	rt.obs.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
	<-obs.entered
	const emitted = 2000
	for range emitted {
		rt.obs.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
	}
	// The queue holds 1024 events; the rest were dropped.
	want := ObserverStats{Dropped: emitted - defaultObserverQueue, Panicked: 1}
	if st := rt.ObserverStats(); st != want {
		t.Fatalf("stats with a blocked observer = %+v, want %+v", st, want)
	}
	close(obs.release)
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	want = ObserverStats{Delivered: 1 + defaultObserverQueue, Dropped: emitted - defaultObserverQueue, Panicked: 1}
	if st := rt.ObserverStats(); st != want {
		t.Fatalf("stats after Stop = %+v, want %+v", st, want)
	}
}
