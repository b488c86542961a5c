package consoleserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/readings"
	"github.com/watchtree/watchtree/messages"
)

// emptyBackend is a runtime with no streams.
type emptyBackend struct{}

func (emptyBackend) Instance() Instance                                 { return Instance{ID: "feed-test", StartedAt: time.Now()} }
func (emptyBackend) Streams() []StreamRef                               { return nil }
func (emptyBackend) Replay(context.Context, string, string, bool) error { return ErrUnsupported }
func (emptyBackend) Purge(context.Context, string, string) error        { return ErrUnsupported }
func (emptyBackend) DeadLetters(context.Context, string, int) ([]*messages.DeadLetterInfo, error) {
	return nil, nil
}
func (emptyBackend) Readings(context.Context) readings.Readings {
	return readings.Readings{Oplog: readings.Oplog{Reading: readings.Reading{Unknown: "oplog not readable: unsupported"}}}
}

// startLocal starts a console on an actor system of its own; both stop when the test ends.
func startLocal(t *testing.T, b Backend, cfg Config) (*actor.ActorSystem, *Server) {
	t.Helper()
	sys := actor.NewActorSystem()
	srv, err := Start(sys, b, cfg)
	if err != nil {
		sys.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("console stop: %v", err)
		}
		sys.Shutdown()
	})
	return sys, srv
}

// inbox records what a subscriber actor received.
type inbox struct {
	mu  sync.Mutex
	evs []*messages.LifecycleEvent
}

func (b *inbox) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*messages.LifecycleEvent); ok {
		b.mu.Lock()
		b.evs = append(b.evs, ev)
		b.mu.Unlock()
	}
}

func (b *inbox) all() []*messages.LifecycleEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*messages.LifecycleEvent(nil), b.evs...)
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscriberInfo asks the console's snapshot for subscription id.
func subscriberInfo(t *testing.T, sys *actor.ActorSystem, console *actor.PID, id uint64) *messages.SubscriberInfo {
	t.Helper()
	res, err := sys.Root.RequestFuture(console, &messages.SnapshotRequest{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.(*messages.SnapshotReply).GetInstance().GetSubscribers() {
		if s.GetId() == id {
			return s
		}
	}
	return nil
}

// TestFeedWindowQueueAndDrops: a subscriber that does not acknowledge gets its window of events;
// the next ones wait in its queue, the rest are dropped and counted, in its events and in the
// console's snapshot; once it acknowledges, the queue drains in order and every event says how
// many it missed. The console is never held.
func TestFeedWindowQueueAndDrops(t *testing.T) {
	sys, srv := startLocal(t, emptyBackend{}, Config{})
	box := &inbox{}
	sub := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return box }))
	res, err := sys.Root.RequestFuture(srv.actorPID(), &messages.SubscribeRequest{SubscriberId: sub.Id, Window: 4}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*messages.SubscribeReply).GetId()

	const published = 1200
	for i := 0; i < published; i++ {
		srv.publish(&messages.LifecycleEvent{Stream: "s", Kind: "checkpointed", Message: fmt.Sprint(i)})
	}
	// The backlog marker and 3 events fill the window of 4; feedQueue wait; the rest are dropped.
	const dropped = published - 3 - feedQueue
	poll(t, "the drops to be counted", func() bool { return subscriberInfo(t, sys, srv.actorPID(), id).GetDropped() == dropped })
	info := subscriberInfo(t, sys, srv.actorPID(), id)
	if info.GetDelivered() != 4 || info.GetAcknowledged() != 0 || info.GetQueued() != feedQueue || info.GetWindow() != 4 {
		t.Fatalf("subscriber = %v", info)
	}
	if got := box.all(); len(got) != 4 || got[0].GetKind() != BacklogEnd || got[3].GetDropped() != 0 || got[3].GetDelivered() != 4 {
		t.Fatalf("before any ack the subscriber got %d events: %v", len(got), got)
	}

	// Acknowledge as a subscriber does, every event it receives, until the queue is empty.
	for acked := uint64(0); acked < 4+feedQueue; {
		got := box.all()
		if n := uint64(len(got)); n > acked {
			acked = n
			sys.Root.Send(srv.actorPID(), &messages.SubscriptionAck{Id: id, Received: acked})
			continue
		}
		time.Sleep(time.Millisecond)
	}
	got := box.all()
	if len(got) != 4+feedQueue {
		t.Fatalf("received %d events, want %d", len(got), 4+feedQueue)
	}
	for i, ev := range got[1:] {
		if ev.GetSeq() != uint64(i+1) || ev.GetSubscription() != id || ev.GetDelivered() != uint64(i+2) {
			t.Fatalf("event %d: seq %d, subscription %d, delivered %d", i, ev.GetSeq(), ev.GetSubscription(), ev.GetDelivered())
		}
		want := uint64(0) // the first 3 went out before anything was dropped
		if i >= 3 {
			want = dropped
		}
		if ev.GetDropped() != want {
			t.Fatalf("event %d (seq %d) says %d dropped, want %d", i, ev.GetSeq(), ev.GetDropped(), want)
		}
	}
	info = subscriberInfo(t, sys, srv.actorPID(), id)
	if info.GetQueued() != 0 || info.GetDelivered() != 4+feedQueue || info.GetAcknowledged() != 4+feedQueue || info.GetDropped() != dropped {
		t.Fatalf("after the acks: %v", info)
	}
	// A new event now goes straight through, an ack beyond what was sent changes nothing.
	sys.Root.Send(srv.actorPID(), &messages.SubscriptionAck{Id: id, Received: 1 << 40})
	srv.publish(&messages.LifecycleEvent{Stream: "s", Kind: "checkpointed"})
	poll(t, "the next live event", func() bool { return len(box.all()) == 5+feedQueue })
}

// TestSubscribeLimits: the window is checked, with the field named, and the console takes at
// most maxSubscribers subscriptions.
func TestSubscribeLimits(t *testing.T) {
	sys, srv := startLocal(t, emptyBackend{}, Config{})
	res, err := sys.Root.RequestFuture(srv.actorPID(), &messages.SubscribeRequest{SubscriberId: "x", Window: maxWindow + 1}, 5*time.Second).Result()
	if ce, ok := res.(*messages.ConsoleError); err != nil || !ok || ce.GetError() != "SubscribeRequest.window 1025 is above the maximum 1024" {
		t.Fatalf("window %d: %v, %v", maxWindow+1, res, err)
	}
	subscribe := func() any {
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &inbox{} }))
		res, err := sys.Root.RequestFuture(srv.actorPID(), &messages.SubscribeRequest{SubscriberId: pid.Id}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := 0; i < maxSubscribers; i++ {
		if r, ok := subscribe().(*messages.SubscribeReply); !ok || r.GetId() == 0 {
			t.Fatalf("subscription %d: %v", i+1, r)
		}
	}
	if ce, ok := subscribe().(*messages.ConsoleError); !ok || ce.GetCode() != "exhausted" || !strings.Contains(ce.GetError(), "256 subscribers") {
		t.Fatalf("subscription %d: %v, want refused", maxSubscribers+1, ce)
	}
}
