package dispatcher

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// noopRouter routes every event to a handler that does nothing, without allocating.
type noopRouter struct{}

type noopInv struct{}

func (noopRouter) Route(bson.Raw) (Invocation, messages.Outcome, error) {
	return noopInv{}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}
func (noopRouter) Classify(error) (ErrorClass, string) { return Retryable, "" }
func (noopInv) Call(context.Context, int) error        { return nil }

// benchSource stands in for the stream actor: it subscribes, then sends EventBatches of up to
// batch events within its credit until total events are sent. Each batch allocates its raw
// column once, as the reader does.
type benchSource struct {
	disp   *actor.PID
	raws   [][]byte
	total  int
	batch  int
	sent   int
	credit int
}

func (s *benchSource) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(s.disp, &wire.Subscribe{Incarnation: 1})
	case *wire.Demand:
		s.credit += int(m.Credit)
		for s.credit > 0 && s.sent < s.total {
			n := min(s.credit, s.batch, s.total-s.sent)
			raws := make([][]byte, n)
			for i := range raws {
				raws[i] = s.raws[(s.sent+i+1)%len(s.raws)]
			}
			s.sent += n
			s.credit -= n
			ctx.Send(s.disp, &wire.EventBatch{Incarnation: 1, Raw: raws, ThroughSeq: uint64(s.sent)})
		}
	}
}

// benchSink stands in for the checkpointer: it counts settlements and closes done at want.
type benchSink struct {
	want    int
	settled int
	done    chan struct{}
}

func (s *benchSink) Receive(ctx actor.Context) {
	if b, ok := ctx.Message().(*wire.SettledBatch); ok {
		for _, r := range b.Runs {
			s.settled += int(r.Count)
		}
		if s.settled == s.want {
			close(s.done)
		}
	}
}

// BenchmarkDispatcherPipeline feeds b.N events from a synthetic source through the dispatcher
// (no-op handler) to a sink standing in for the checkpointer; one op is one event.
func BenchmarkDispatcherPipeline(b *testing.B) {
	for _, lanes := range []int{1, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			var raws [][]byte
			for i := range 64 {
				e := mkEvent(uint64(i+1), fmt.Sprintf("order-%d", i)).build()
				raws = append(raws, e.raw)
			}
			sys := newTestSystem()
			defer sys.Shutdown()
			done := make(chan struct{})
			sink := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &benchSink{want: b.N, done: done} }))
			props, err := New(Config{Stream: "bench", Router: noopRouter{}, Lanes: lanes, Checkpointer: sink})
			if err != nil {
				b.Fatal(err)
			}
			disp := sys.Root.Spawn(props)
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			start := time.Now()
			src := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &benchSource{disp: disp, raws: raws, total: b.N, batch: 256}
			}))
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatal("pipeline stalled")
			}
			elapsed := time.Since(start)
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			// allocs/op rounds to an integer; this is the exact figure (source and sink included).
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/event")
			for _, p := range []*actor.PID{src, disp, sink} {
				_ = sys.Root.StopFuture(p).Wait()
			}
		})
	}
}

// sleepRouter's handler sleeps 1ms per event (an I/O-bound handler).
type sleepRouter struct{ noopRouter }

type sleepInv struct{}

func (sleepRouter) Route(bson.Raw) (Invocation, messages.Outcome, error) {
	return sleepInv{}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}
func (sleepInv) Call(context.Context, int) error { time.Sleep(time.Millisecond); return nil }

// BenchmarkDispatcherLanesSlowHandler: a handler sleeping 1ms, distinct document keys; compare
// events/s of lanes=8 against lanes=1 (the target is ≥ 7×).
func BenchmarkDispatcherLanesSlowHandler(b *testing.B) {
	for _, lanes := range []int{1, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			var raws [][]byte
			for i := range 4096 {
				e := mkEvent(uint64(i+1), fmt.Sprintf("order-%d", i)).build()
				raws = append(raws, e.raw)
			}
			sys := newTestSystem()
			defer sys.Shutdown()
			done := make(chan struct{})
			sink := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &benchSink{want: b.N, done: done} }))
			props, err := New(Config{Stream: "bench", Router: sleepRouter{}, Lanes: lanes, Checkpointer: sink})
			if err != nil {
				b.Fatal(err)
			}
			disp := sys.Root.Spawn(props)
			b.ResetTimer()
			start := time.Now()
			src := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &benchSource{disp: disp, raws: raws, total: b.N, batch: 256}
			}))
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatal("pipeline stalled")
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.StopTimer()
			for _, p := range []*actor.PID{src, disp, sink} {
				_ = sys.Root.StopFuture(p).Wait()
			}
		})
	}
}
