package supervisor_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store/memstore"
)

// pipelineBatch is the number of events per EventBatch, the stream actor's default MaxBatch.
const pipelineBatch = 256

// stallAfter bounds every wait of the benchmark: a pipeline that makes no progress for this long
// fails the benchmark instead of hanging it.
const stallAfter = 2 * time.Minute

// newSystem returns a quiet actor system (protoactor's own log lines discarded).
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
}

// syntheticEvents returns n distinct insert change events as a server sends them (_id token,
// operationType, clusterTime, wallTime, fullDocument, ns, documentKey; about 250 bytes each)
// and their resume tokens. The source cycles through them.
func syntheticEvents(n int) (raws, tokens [][]byte) {
	for i := range n {
		tok, err := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("8265F0A1B2%08X2B022C0100296E5A1004%032X46645F696400", i, i)}})
		if err != nil {
			panic(err)
		}
		id := bson.NewObjectID()
		raw, err := bson.Marshal(bson.D{
			{Key: "_id", Value: bson.Raw(tok)},
			{Key: "operationType", Value: "insert"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1764460000, I: uint32(i + 1)}},
			{Key: "wallTime", Value: bson.DateTime(1764460000000 + int64(i))},
			{Key: "fullDocument", Value: bson.D{
				{Key: "_id", Value: id}, {Key: "i", Value: int64(i)},
				{Key: "status", Value: "new"}, {Key: "amount", Value: 12.5},
			}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}},
		})
		if err != nil {
			panic(err)
		}
		raws, tokens = append(raws, raw), append(tokens, tok)
	}
	return raws, tokens
}

// noopRouter routes every event to a handler that does nothing, without decoding or allocating:
// what is measured is the tree, not the user's decode.
type noopRouter struct{}

type noopCall struct{}

func (noopRouter) Route(bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	return noopCall{}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}
func (noopRouter) Classify(error) (dispatcher.ErrorClass, string) { return dispatcher.Retryable, "" }
func (noopCall) Call(context.Context, int) error                  { return nil }

// fixedPositions is the PositionSource of the checkpointer: the "current position" is a
// constant token (the tree's first start captures and persists it, as in production).
type fixedPositions struct{ token bson.Raw }

func (p fixedPositions) Current(context.Context) (bson.Raw, bson.Timestamp, error) {
	return p.token, bson.Timestamp{T: 1764460000}, nil
}

// handledCounter is a no-op Router that closes done once want events were handled (one atomic
// add per event, on the lanes).
type handledCounter struct {
	noopRouter
	n    atomic.Uint64
	want uint64
	once sync.Once
	done chan struct{}
}

func (c *handledCounter) Route(bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	return countedCall{c}, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

type countedCall struct{ c *handledCounter }

func (k countedCall) Call(context.Context, int) error {
	if k.c.n.Add(1) >= k.c.want {
		k.c.once.Do(func() { close(k.c.done) })
	}
	return nil
}

// feeder stands in for the stream actor under the supervisor, with the cursor replaced by
// pre-built events: on Started it resolves its start with the checkpointer, reports the cursor
// open, subscribes to the dispatcher and sends EventBatches of at most pipelineBatch events
// within its credit, numbering seqs from StartFrom.next_seq, until total events are sent. Each
// batch copies its events' bytes into one slab, as a cursor reader copies the driver's buffer.
// With the floor flag it skips the checkpointer and talks to a creditEcho instead of a
// dispatcher (see BenchmarkPipelineOverhead).
type feeder struct {
	raws, tokens [][]byte
	total        int
	target       *actor.PID // the dispatcher (or the creditEcho); nil: the sibling "dispatcher"

	incarnation uint64
	next        uint64 // next seq
	sent        int
	credit      int
}

func (f *feeder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.incarnation = max(streamtree.Incarnation(ctx), 1)
		if f.target != nil { // floor: no tree around it
			f.next = 1
			ctx.Request(f.target, &wire.Subscribe{Incarnation: f.incarnation})
			return
		}
		p := ctx.Parent()
		ctx.Request(actor.NewPID(p.Address, p.Id+"/checkpointer"), &wire.ResolveStart{Incarnation: f.incarnation})
	case *wire.StartFrom:
		if m.Kind == messages.StartKind_START_KIND_FAIL {
			panic(fmt.Sprintf("feeder: start failed: %s", m.Reason))
		}
		f.next = m.NextSeq
		streamtree.NotifyResubscribed(ctx)
		p := ctx.Parent()
		f.target = actor.NewPID(p.Address, p.Id+"/dispatcher")
		ctx.Request(f.target, &wire.Subscribe{Incarnation: f.incarnation})
	case *wire.Demand:
		if m.Incarnation != f.incarnation {
			return
		}
		f.credit += int(m.Credit)
		for f.credit > 0 && f.sent < f.total {
			n := min(f.credit, pipelineBatch, f.total-f.sent)
			ctx.Send(f.target, f.batch(n))
			f.sent += n
			f.credit -= n
		}
	}
}

// batch builds the next EventBatch of n events: their documents copied into one buffer, as the
// driver reads a reply, and the batch's raw column, as the reader builds it.
func (f *feeder) batch(n int) *wire.EventBatch {
	size := 0
	for i := range n {
		size += len(f.raws[(f.sent+i)%len(f.raws)])
	}
	buf := make([]byte, 0, size)
	raws := make([][]byte, n)
	for i := range raws {
		start := len(buf)
		buf = append(buf, f.raws[(f.sent+i)%len(f.raws)]...)
		raws[i] = buf[start:len(buf):len(buf)]
	}
	f.next += uint64(n)
	last := f.tokens[(f.sent+n-1)%len(f.tokens)]
	return &wire.EventBatch{Incarnation: f.incarnation, Raw: raws, PostBatchResumeToken: last, ThroughSeq: f.next - 1}
}

// creditEcho is the messaging floor: it answers Subscribe with Capacity credit and every
// EventBatch with as much credit as the batch carried, and closes done after want events. It is
// what moving the same batches between two actors costs, with no lanes, no settlement and no
// checkpoint.
type creditEcho struct {
	want, got int
	source    *actor.PID
	done      chan struct{}
}

func (e *creditEcho) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.Subscribe:
		e.source = ctx.Sender()
		ctx.Send(e.source, &wire.Demand{Incarnation: m.Incarnation, Credit: dispatcher.DefaultCapacity})
	case *wire.EventBatch:
		e.got += len(m.Raw)
		ctx.Send(e.source, &wire.Demand{Incarnation: m.Incarnation, Credit: uint32(len(m.Raw))})
		if e.got == e.want {
			close(e.done)
		}
	}
}

// runFloor sends n events from a feeder to a creditEcho and returns the elapsed time.
func runFloor(b *testing.B, raws, tokens [][]byte, n int) time.Duration {
	sys := newSystem()
	defer sys.Shutdown()
	done := make(chan struct{})
	echo := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &creditEcho{want: n, done: done} }))
	start := time.Now()
	src := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &feeder{raws: raws, tokens: tokens, total: n, target: echo}
	}))
	select {
	case <-done:
	case <-time.After(stallAfter):
		b.Fatal("floor: stalled")
	}
	elapsed := time.Since(start)
	_ = sys.Root.StopFuture(src).Wait()
	_ = sys.Root.StopFuture(echo).Wait()
	return elapsed
}

// treeRun is the outcome of one run of the tree.
type treeRun struct {
	elapsed time.Duration
	mallocs uint64 // heap allocations of the whole process during the run
	saves   uint64 // checkpoint writes (memstore Save calls), the initial position's included
}

// runTree spawns one stream tree (supervisor → checkpointer with memstore, dispatcher with a
// no-op Router and lanes lanes, feeder as the stream actor), feeds n events through it, waits
// until the dispatcher settled all of them and the checkpointer flushed the last one, checks the
// durable low-water mark, and returns the timings. The timer runs from the spawn of the tree
// to the Flushed reply that covers the last event; the tree's shutdown is not timed.
func runTree(b *testing.B, raws, tokens [][]byte, n, lanes int) treeRun {
	sys := newSystem()
	defer sys.Shutdown()
	ms := memstore.New(memstore.Options{})
	cpProps, err := checkpointer.New(checkpointer.Config{Stream: "bench", Store: ms, Positions: fixedPositions{token: tokens[0]}})
	if err != nil {
		b.Fatal(err)
	}
	counter := &handledCounter{want: uint64(n), done: make(chan struct{})}
	dispProps, err := dispatcher.New(dispatcher.Config{Stream: "bench", Router: counter, Lanes: lanes})
	if err != nil {
		b.Fatal(err)
	}
	supProps, err := supervisor.New(supervisor.Config{
		Stream: "bench",
		Child: actor.PropsFromProducer(func() actor.Actor {
			return &feeder{raws: raws, tokens: tokens, total: n}
		}),
		Siblings: []supervisor.Sibling{{Name: "checkpointer", Props: cpProps}, {Name: "dispatcher", Props: dispProps}},
	})
	if err != nil {
		b.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.StartTimer()
	start := time.Now()
	sup, err := sys.Root.SpawnNamed(supProps, "bench")
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-counter.done:
	case <-time.After(stallAfter):
		b.Fatal("tree: stalled before every event was handled")
	}
	// Every handler call returned, but the settlements may still be on their way to the
	// checkpointer: flush until the last event is settled and its token durable.
	cp := actor.NewPID(sup.Address, sup.Id+"/checkpointer")
	deadline := time.Now().Add(stallAfter)
	for {
		res, err := sys.Root.RequestFuture(cp, &wire.Flush{}, stallAfter).Result()
		if err != nil {
			b.Fatalf("flush: %v", err)
		}
		fl, ok := res.(*wire.Flushed)
		if !ok || fl.Error != "" || fl.LowWaterMark > uint64(n) {
			b.Fatalf("flush: got %v, want a durable low-water mark of %d", res, n)
		}
		if fl.LowWaterMark == uint64(n) && bytes.Equal(fl.Token, tokens[(n-1)%len(tokens)]) {
			break // the last event's token is durable
		}
		if time.Now().After(deadline) {
			b.Fatalf("flush: the durable low-water mark is %d after %v, want %d", fl.LowWaterMark, stallAfter, n)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	_ = sys.Root.StopFuture(sup).Wait()
	return treeRun{elapsed: elapsed, mallocs: after.Mallocs - before.Mallocs, saves: ms.Stats().Saves}
}

// BenchmarkPipelineOverhead measures the stream tree itself: b.N synthetic events (one op is one
// event) from a feeder standing in for the stream actor, through the supervisor's dispatcher
// (no-op handler, Lanes 1 and 8) and checkpointer (memstore, default CheckpointPolicy), until
// the last one is settled and durably checkpointed. Reported:
//   - events/s (target ≥ 1,000,000 on the 2-core CI machine);
//   - allocs/event: exact heap allocations per event of the whole process (feeder, actors and
//     protoactor included; allocs/op rounds it to an integer);
//   - writes/100k-events: checkpoint writes per 100,000 events (default SaveEvery is 100);
//   - floor-events/s and ratio-to-floor: the same events moved by the same feeder to an actor
//     that only grants credit back, measured in the same run (half before, half after, so
//     drift cancels). The ratio is the share of the bare messaging speed the tree keeps.
func BenchmarkPipelineOverhead(b *testing.B) {
	raws, tokens := syntheticEvents(1024)
	for _, lanes := range []int{1, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			b.ReportAllocs()
			b.StopTimer()
			half := max(b.N/2, 1)
			floor := runFloor(b, raws, tokens, half)
			run := runTree(b, raws, tokens, b.N, lanes)
			floor += runFloor(b, raws, tokens, half)

			rate := float64(b.N) / run.elapsed.Seconds()
			floorRate := float64(2*half) / floor.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(run.mallocs)/float64(b.N), "allocs/event")
			b.ReportMetric(float64(run.saves)/float64(b.N)*100000, "writes/100k-events")
			b.ReportMetric(floorRate, "floor-events/s")
			b.ReportMetric(rate/floorRate, "ratio-to-floor")
		})
	}
}
