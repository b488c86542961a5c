package protocheck

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
)

// TestSenderMiddleware: a plain Go value sent to another actor is reported, a protobuf message
// or a plain value sent to oneself is not, and every message is still delivered.
func TestSenderMiddleware(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	var mu sync.Mutex
	var got []Violation
	report := func(v Violation) { mu.Lock(); got = append(got, v); mu.Unlock() }

	delivered := make(chan any, 8)
	sink := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(actor.SystemMessage); !ok {
			delivered <- ctx.Message()
		}
	}))
	type tick struct{}
	type report2 struct{}
	sender := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ctx.Send(sink, &wire.Flush{}) // protobuf to another actor: fine
			ctx.Send(ctx.Self(), tick{})  // plain Go to itself: fine
			ctx.Send(sink, report2{})     // plain Go to another actor: a violation
		}
	}, actor.WithSenderMiddleware(SenderMiddleware(report))))
	for range 2 { // the Flush and the plain value; the tick goes to the sender itself
		select {
		case <-delivered:
		case <-time.After(5 * time.Second):
			t.Fatal("messages not delivered")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("violations %+v, want exactly the plain value sent to another actor", got)
	}
	if _, ok := got[0].Message.(report2); !ok || !got[0].From.Equal(sender) || !got[0].To.Equal(sink) {
		t.Fatalf("violation %+v", got[0])
	}
}
