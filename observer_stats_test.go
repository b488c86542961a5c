package watchtree

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree/observe"
)

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

// TestRuntimeStopNamesASlowObserver: when only the Observer is behind at Stop's deadline, Stop's
// error says so and counts its queued events, and names no stream: every stream stopped
// cleanly.
func TestRuntimeStopNamesASlowObserver(t *testing.T) {
	e := newRTEnv(t)
	obs := newBlockingObserver()
	defer close(obs.release) // lets the drain goroutine end (goleak)
	rt, err := New(Config{Client: e.client, Database: e.db, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := rt.Spawn(ctx, ordersStream("calm", newSeen()))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	<-obs.entered // Started is being delivered, and will not return
	sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = rt.Stop(sctx)
	if !errors.Is(err, ErrObserverNotDrained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want ErrObserverNotDrained and DeadlineExceeded", err)
	}
	// At least the Started being delivered and the stream's Stopped{Graceful}.
	if !regexp.MustCompile(`^watchtree: stop: observer did not drain ([2-9]|\d\d+) queued events within \d`).MatchString(err.Error()) {
		t.Fatalf("Stop error %q: want the observer and its queued events named", err)
	}
	if strings.Contains(err.Error(), "calm") || strings.Contains(err.Error(), "streams did not stop") {
		t.Fatalf("Stop error %q names a stream, but every stream stopped cleanly", err)
	}
	if st := mustStreams(t, rt)[0]; st.State != StateStopped {
		t.Fatalf("stream %+v, want stopped", st)
	}
}

// TestRuntimeStopNamesStuckStreams: a stream whose handler ignores its context holds Stop past
// its deadline; the error names that stream (and not its calm neighbour), apart from the
// Observer.
func TestRuntimeStopNamesStuckStreams(t *testing.T) {
	e := newRTEnv(t)
	rt, err := New(Config{Client: e.client, Database: e.db})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan struct{}, 1)
	h, err := rt.Spawn(ctx, Stream[order]{
		Name: "stuck", Collection: "orders",
		OnInsert: func(ctx context.Context, ev *Event[order]) error {
			stuck <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	calm, err := rt.Spawn(ctx, ordersStream("calm", newSeen()))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	waitState(t, calm, StateRunning)
	insertOrders(t, e, 0, 1)
	<-stuck
	sctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = rt.Stop(sctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrObserverNotDrained) {
		t.Fatalf("Stop = %v, want DeadlineExceeded from the stuck stream only", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, `watchtree: stop: 1 of 2 streams did not stop cleanly (stuck): watchtree: stream "stuck": `) {
		t.Fatalf("Stop error %q: want the stuck stream named", msg)
	}
}
