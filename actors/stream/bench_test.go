package stream

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// genCursor serves total copies of one change event, in driver batches of batch events.
type genCursor struct {
	raw, id    bson.Raw
	total      int
	batch      int
	served     int
	inBatch    int
	closedOnce atomic.Bool
}

func (c *genCursor) TryNext(context.Context) bool {
	if c.served == c.total {
		return false
	}
	if c.inBatch == 0 {
		c.inBatch = min(c.batch, c.total-c.served)
	}
	c.inBatch--
	c.served++
	return true
}
func (c *genCursor) Current() bson.Raw           { return c.raw }
func (c *genCursor) ResumeToken() bson.Raw       { return c.id }
func (c *genCursor) RemainingBatchLength() int   { return c.inBatch }
func (c *genCursor) Err() error                  { return nil }
func (c *genCursor) ID() int64                   { return 1 }
func (c *genCursor) Close(context.Context) error { c.closedOnce.Store(true); return nil }

// sink plays checkpointer and dispatcher: it answers ResolveStart, grants a credit of 1024 on
// Subscribe and gives credit back for every batch (as the dispatcher's Demand would once events
// settle), and closes done when want events arrived.
type sink struct {
	token  bson.Raw // the start position it answers with: a resume token the reader can read
	want   uint64
	got    uint64
	done   chan struct{}
	stream *actor.PID
	inc    uint64
}

func (s *sink) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.ResolveStart:
		ctx.Respond(&wire.StartFrom{Incarnation: m.GetIncarnation(), Kind: messages.StartKind_START_KIND_RESUME_AFTER,
			Token: s.token, NextSeq: 1})
	case *wire.Subscribe:
		s.stream, s.inc = ctx.Sender(), m.GetIncarnation()
		ctx.Respond(&wire.Demand{Incarnation: m.GetIncarnation(), Credit: 1024})
	case *wire.EventBatch:
		n := len(m.GetRaw())
		if n == 0 {
			return
		}
		ctx.Send(s.stream, &wire.Demand{Incarnation: s.inc, Credit: uint32(n)})
		s.got += uint64(n)
		if s.got >= s.want && s.done != nil {
			close(s.done)
			s.done = nil
		}
	}
}

// BenchmarkStreamReader measures the stream actor's own cost per event (TryNext, copy, batch,
// send), with a generated cursor and a sink granting credit back as batches arrive, without a
// supervisor (the unsupervised incarnation path).
func BenchmarkStreamReader(b *testing.B) {
	raw, _ := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "8265A1B2C3000000012B022C0100296E5A1004AABBCCDDEEFF"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1700000000, I: 1}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "app"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 42}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 42}, {Key: "sku", Value: "abc-123"}, {Key: "qty", Value: 3}}},
	})
	id, _ := bson.Raw(raw).LookupErr("_id")
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	defer sys.Shutdown()

	cur := &genCursor{raw: raw, id: id.Value, total: b.N, batch: 1000}
	done := make(chan struct{})
	sk := &sink{token: id.Value, want: uint64(b.N), done: done}
	sinkPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return sk }))
	props, err := New(Config{Stream: "bench", CheckpointerPID: sinkPID, DispatcherPID: sinkPID,
		Watcher: watcherFunc(func(context.Context, Position) (Cursor, error) { return cur, nil })})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	pid := sys.Root.Spawn(props)
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatal("timeout")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	_ = sys.Root.StopFuture(pid).Wait()
	_ = sys.Root.StopFuture(sinkPID).Wait()
	for liveReaders.Load() != 0 {
		time.Sleep(time.Millisecond) // the reader closes its cursor and ends after Stop
	}
}
