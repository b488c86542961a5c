package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
)

// rawChange is what the raw driver loop decodes each change event into: the fields a consumer
// uses, with the full document decoded into T (order), as watchtree's Event[T] does.
type rawChange struct {
	ID            bson.Raw       `bson:"_id"`
	OperationType string         `bson:"operationType"`
	ClusterTime   bson.Timestamp `bson:"clusterTime"`
	WallTime      time.Time      `bson:"wallTime"`
	NS            struct {
		DB   string `bson:"db"`
		Coll string `bson:"coll"`
	} `bson:"ns"`
	DocumentKey  bson.Raw `bson:"documentKey"`
	FullDocument *order   `bson:"fullDocument"`
}

// e2eSink is the handler work of both sides: it reads the decoded document, so neither side
// can skip the decode.
type e2eSink struct{ sum float64 }

func (s *e2eSink) handle(o *order) { s.sum += o.Amount }

// rawPhase inserts n orders into a fresh collection, then times a raw driver loop reading them
// back from before the first insert: Watch (startAtOperationTime), then ChangeStream.Next and
// Decode into rawChange, n times.
func rawPhase(b *testing.B, cl *mongo.Client, coll string, n int) time.Duration {
	b.Helper()
	c := cl.Database(benchDB).Collection(coll)
	at := startPoint()
	insertOrders(b, c, n)
	ctx := context.Background()
	var sink e2eSink
	start := time.Now()
	cs, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().
		SetStartAtOperationTime(&bson.Timestamp{T: uint32(at.Unix())}).SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatalf("watch: %v", err)
	}
	defer cs.Close(ctx)
	for i := 0; i < n; i++ {
		if !cs.Next(ctx) {
			b.Fatalf("raw loop: after %d events: %v", i, cs.Err())
		}
		var ev rawChange
		if err := cs.Decode(&ev); err != nil {
			b.Fatalf("decode: %v", err)
		}
		sink.handle(ev.FullDocument)
	}
	return time.Since(start)
}

// watchtreePhase inserts n orders into a fresh collection, then times a watchtree stream (the
// runtime's default policies: one lane, checkpoints every 100 events or 1s, in mongostore on
// the same server) from Spawn until its OnInsert handler has seen all n, starting at the same
// point as the raw loop. The stream is then stopped gracefully, untimed.
func watchtreePhase(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, name string, n int) time.Duration {
	b.Helper()
	c := cl.Database(benchDB).Collection(name)
	at := startPoint()
	insertOrders(b, c, n)
	var sink e2eSink
	cd := newCountdown(n)
	b.StartTimer()
	start := time.Now()
	h, err := rt.Spawn(watchtree.Stream[order]{
		Name:          name,
		Collection:    name,
		StartPosition: watchtree.At(at),
		OnInsert: func(_ context.Context, ev *watchtree.Event[order]) error {
			sink.handle(ev.FullDocument) // one lane: calls never overlap
			cd.tick()
			return nil
		},
	})
	if err != nil {
		b.Fatalf("spawn: %v", err)
	}
	cd.wait(b, "watchtree")
	elapsed := time.Since(start)
	b.StopTimer()
	stopHandle(b, h)
	return elapsed
}

// BenchmarkEndToEnd compares watchtree with the loop a user would write by hand, on mongosim
// (in process), in the same run: b.N orders (one op is one event) are read by a watchtree stream
// (decode into Event[order] + handler + checkpointing), and b.N/2 orders each, before and after
// it, by a raw driver loop (ChangeStream.Next + Decode into T). Every phase reads events that
// are already in the oplog, from a fresh collection, so the writer never paces the reader.
// Reported: raw-events/s, watchtree-events/s and ratio = watchtree / raw (target ≥ 0.9).
// ns/op and the allocations are watchtree's phase only.
func BenchmarkEndToEnd(b *testing.B) {
	_, cl := startMongosim(b)
	rt := newRuntime(b, cl, nil)
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	half := max(b.N/2, 1)
	raw := rawPhase(b, cl, fmt.Sprintf("raw-a-%d", b.N), half)
	wt := watchtreePhase(b, rt, cl, fmt.Sprintf("wt-%d", b.N), b.N)
	raw += rawPhase(b, cl, fmt.Sprintf("raw-b-%d", b.N), half)

	rawRate := float64(2*half) / raw.Seconds()
	wtRate := float64(b.N) / wt.Seconds()
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(wtRate, "watchtree-events/s")
	b.ReportMetric(wtRate/rawRate, "ratio")
}
