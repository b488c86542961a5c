package checkpointer

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// workerGoroutines counts the goroutines running a worker.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "checkpointer.(*worker).run(")
}

func waitWorkerGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for workerGoroutines() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d worker goroutines, want %d", workerGoroutines(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWorkerGoroutineOnlyWhileBusy: the worker's goroutine starts with a job and ends when the
// queue is empty; jobs run in order; after stop no job runs and no goroutine starts.
func TestWorkerGoroutineOnlyWhileBusy(t *testing.T) {
	results := make(chan any, 16)
	w := newWorker(func(m any) { results <- m })
	waitWorkerGoroutines(t, 0)
	gate := make(chan struct{})
	w.submit(func(ctx context.Context) any { <-gate; return 1 })
	w.submit(func(context.Context) any { return 2 })
	waitWorkerGoroutines(t, 1)
	close(gate)
	for want := 1; want <= 2; want++ {
		select {
		case got := <-results:
			if got != want {
				t.Fatalf("result %v, want %d (jobs run in submission order)", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no result %d", want)
		}
	}
	waitWorkerGoroutines(t, 0)
	w.submit(func(context.Context) any { return 3 }) // a new goroutine for new work
	if got := <-results; got != 3 {
		t.Fatalf("result %v, want 3", got)
	}
	waitWorkerGoroutines(t, 0)

	blocked := make(chan struct{})
	w.submit(func(ctx context.Context) any { close(blocked); <-ctx.Done(); return "cancelled" })
	<-blocked
	w.stop()
	waitWorkerGoroutines(t, 0)
	w.submit(func(context.Context) any { return "after stop" })
	w.mu.Lock()
	started := w.running
	w.mu.Unlock()
	if started {
		t.Fatal("submit after stop started a goroutine")
	}
	select {
	case got := <-results:
		t.Fatalf("result %v after stop, want none", got)
	default:
	}
}
