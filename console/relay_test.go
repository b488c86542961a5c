package console

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/messages"
)

// TestRelayCountsWhatASlowClientMisses: a facade subscriber that does not read falls behind by
// at most feedBuffer events; the rest are dropped and counted, and the console is never held.
func TestRelayCountsWhatASlowClientMisses(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	r := &relay{ch: make(chan *messages.LifecycleEvent, feedBuffer)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	const sent = feedBuffer + 44
	for i := 1; i <= sent; i++ {
		sys.Root.Send(pid, &messages.LifecycleEvent{Seq: uint64(i)})
	}
	deadline := time.Now().Add(10 * time.Second)
	for uint64(len(r.ch))+r.dropped.Load() < sent {
		if time.Now().After(deadline) {
			t.Fatalf("relay: %d buffered + %d dropped of %d", len(r.ch), r.dropped.Load(), sent)
		}
		time.Sleep(time.Millisecond)
	}
	if len(r.ch) != feedBuffer || r.dropped.Load() != 44 {
		t.Fatalf("buffered %d, dropped %d; want %d and 44", len(r.ch), r.dropped.Load(), feedBuffer)
	}
	if first := <-r.ch; first.GetSeq() != 1 {
		t.Errorf("the oldest events are kept, got seq %d first", first.GetSeq())
	}
}
