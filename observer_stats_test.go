package watchtree

import (
	"sync"
	"testing"
)

// blockingObserver blocks every OnEvent until release is closed; entered is closed when the
// first call blocks. An event Skipped{Reason: "panic"} panics instead.
type blockingObserver struct {
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func newBlockingObserver() *blockingObserver {
	return &blockingObserver{release: make(chan struct{}), entered: make(chan struct{})}
}

func (b *blockingObserver) OnEvent(ev ObserverEvent) {
	if sk, ok := ev.(Skipped); ok && sk.Reason == "panic" {
		panic("observer bug")
	}
	b.once.Do(func() { close(b.entered) })
	<-b.release
}

// TestRuntimeObserverStats: events the runtime could not hand to a slow Observer are counted,
// and ObserverStats reads the counts (zero before Start, final after Stop).
func TestRuntimeObserverStats(t *testing.T) {
	e := newRTEnv(t)
	obs := newBlockingObserver()
	rt, err := New(Config{Client: e.client, Database: e.db, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if st := rt.ObserverStats(); st != (ObserverStats{}) {
		t.Fatalf("stats before Start = %+v, want zero", st)
	}
	ctx := testCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rt.obs.OnEvent(Skipped{Meta: Meta{Stream: "s"}, Reason: "panic"})
	// The drain goroutine takes the Started and blocks: the queue is empty again.
	rt.obs.OnEvent(Started{Meta: Meta{Stream: "s"}})
	<-obs.entered
	const emitted = 2000
	for range emitted {
		rt.obs.OnEvent(Started{Meta: Meta{Stream: "s"}})
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
