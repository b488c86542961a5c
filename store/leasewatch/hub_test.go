package leasewatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 5 * time.Second

// feedProbe is a feed that counts its runs and reports its start and end.
type feedProbe struct {
	runs           atomic.Int32
	started, ended chan struct{}
}

func newFeedProbe() *feedProbe {
	return &feedProbe{started: make(chan struct{}, 2), ended: make(chan struct{}, 2)}
}

func (f *feedProbe) feed(ctx context.Context, _ func()) {
	f.runs.Add(1)
	f.started <- struct{}{}
	<-ctx.Done()
	f.ended <- struct{}{}
}

// waitStarted waits for the next run of the feed.
func (f *feedProbe) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-f.started:
	case <-time.After(waitFor):
		t.Fatal("the feed did not start")
	}
}

func closed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch not closed")
		}
	}
}

// One feed serves every watch; a change wakes the watches of its lease only, coalesced; the
// end of the last watch stops the feed, and a new watch starts another.
func TestHubSharesOneFeed(t *testing.T) {
	var h Hub
	f := newFeedProbe()
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	a1, a2 := h.Watch(ctxA, "a", f.feed), h.Watch(ctxA, "a", f.feed)
	b := h.Watch(ctxB, "b", f.feed)
	f.waitStarted(t)

	h.Notify("a")
	h.Notify("a") // coalesces with the first
	for i, ch := range []<-chan struct{}{a1, a2} {
		select {
		case <-ch:
		default:
			t.Fatalf("watch a%d not woken", i+1)
		}
		select {
		case <-ch:
			t.Fatalf("watch a%d woken twice for two changes it had not read", i+1)
		default:
		}
	}
	select {
	case <-b:
		t.Fatal("a change of lease a woke the watch of b")
	default:
	}
	h.notifyAll()
	for _, ch := range []<-chan struct{}{a1, a2, b} {
		select {
		case <-ch:
		default:
			t.Fatal("notifyAll missed a watch")
		}
	}

	cancelA()
	closed(t, a1)
	closed(t, a2)
	select {
	case <-f.ended:
		t.Fatal("the feed stopped while a watch was open")
	default:
	}
	cancelB()
	closed(t, b)
	select {
	case <-f.ended:
	case <-time.After(waitFor):
		t.Fatal("the feed did not stop after the last watch")
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("%d feeds ran for three watches, want 1", n)
	}

	ctxC, cancelC := context.WithCancel(context.Background())
	c := h.Watch(ctxC, "c", f.feed)
	f.waitStarted(t)
	cancelC()
	closed(t, c)
	select {
	case <-f.ended:
	case <-time.After(waitFor):
		t.Fatal("the second feed did not stop")
	}
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("feed runs %d, want 2 (a new one after the first stopped)", n)
	}
}

// A watch of an ended context is closed at once and starts nothing.
func TestHubWatchOfEndedContext(t *testing.T) {
	var h Hub
	f := newFeedProbe()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed(t, h.Watch(ctx, "a", f.feed))
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("a feed ran for a dead watch (%d)", n)
	}
}

// A feed that ends runs again after retryDelay, and its reconnection wakes every watch (what
// changed meanwhile is unknown); its first connection wakes none.
func TestHubReconnectWakesEveryWatch(t *testing.T) {
	var h Hub
	runs := make(chan int, 2)
	n := 0
	feed := func(ctx context.Context, opened func()) {
		n++ // runs one at a time, on the hub's goroutine
		opened()
		runs <- n
		if n == 1 {
			return // the connection failed
		}
		<-ctx.Done()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := h.Watch(ctx, "a", feed)
	if got := <-runs; got != 1 {
		t.Fatalf("run %d, want 1", got)
	}
	select {
	case <-w:
		t.Fatal("the first connection woke the watch")
	default:
	}
	select {
	case <-runs:
	case <-time.After(retryDelay + waitFor):
		t.Fatal("the feed did not run again after it ended")
	}
	select {
	case <-w:
	default:
		t.Fatal("the reconnection did not wake the watch")
	}
	cancel()
	closed(t, w)
}
