package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
)

// e2eSink is the handler work of both sides: it reads the decoded document, so neither side
// can skip the decode.
type e2eSink struct{ sum float64 }

func (s *e2eSink) handle(o *order) { s.sum += o.Amount }

// prepare inserts n orders into the fresh collection name and returns it with a start point
// before them; it ends with a garbage collection, so that no phase pays for another's garbage.
func prepare(b *testing.B, cl *mongo.Client, name string, n int) (*mongo.Collection, time.Time) {
	b.Helper()
	c := cl.Database(benchDB).Collection(name)
	at := startPoint()
	insertOrders(b, c, n)
	runtime.GC()
	return c, at
}

// drop drops a phase's collection once it has been read, so the server's data stays small.
func drop(b *testing.B, c *mongo.Collection) {
	b.Helper()
	if err := c.Drop(context.Background()); err != nil {
		b.Fatalf("drop: %v", err)
	}
}

// rawPhase inserts n orders into a fresh collection, then times a raw driver loop reading them
// back from before the first insert: Watch (startAtOperationTime), then, n times,
// ChangeStream.Next, decode the event's fullDocument into T (order) and keep its resume token,
// the least a consumer that can resume must do. (Decoding the whole event into a struct with
// the driver's reflection decoder costs more: this is the strictest baseline.)
func rawPhase(b *testing.B, cl *mongo.Client, name string, n int) time.Duration {
	b.Helper()
	c, at := prepare(b, cl, name, n)
	ctx := context.Background()
	var sink e2eSink
	start := time.Now()
	cs, err := c.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().
		SetStartAtOperationTime(&bson.Timestamp{T: uint32(at.Unix())}).SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatalf("watch: %v", err)
	}
	var token bson.Raw
	for i := 0; i < n; i++ {
		if !cs.Next(ctx) {
			b.Fatalf("raw loop: after %d events: %v", i, cs.Err())
		}
		var o order
		if err := cs.Current.Lookup("fullDocument").Unmarshal(&o); err != nil {
			b.Fatalf("decode: %v", err)
		}
		sink.handle(&o)
		token = cs.ResumeToken()
	}
	elapsed := time.Since(start)
	if len(token) == 0 {
		b.Fatal("raw loop: no resume token")
	}
	_ = cs.Close(ctx)
	drop(b, c)
	return elapsed
}

// watchtreePhase inserts n orders into a fresh collection, then times a watchtree stream (the
// runtime's default policies: one lane, checkpoints every 100 events or 1s, in mongostore on
// the same server) from Spawn until its OnInsert handler has seen all n, starting at the same
// point as the raw loop. The stream is then stopped gracefully, untimed.
func watchtreePhase(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, name string, n int) time.Duration {
	b.Helper()
	c, at := prepare(b, cl, name, n)
	var sink e2eSink
	cd := newCountdown(n)
	b.StartTimer()
	start := time.Now()
	h, err := rt.Spawn(context.Background(), watchtree.Stream[order]{
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
	drop(b, c)
	return elapsed
}

// e2eRounds is the number of watchtree phases of BenchmarkEndToEnd; raw phases surround and
// separate them (one more raw phase than watchtree phases), so that drift of a shared machine
// hits both sides alike.
const e2eRounds = 3

// BenchmarkEndToEnd compares watchtree with the loop a user would write by hand, on mongosim, in
// the same run: b.N orders (one op is one event) are read by watchtree streams (decode into
// Event[order] + handler + checkpointing; e2eRounds phases of b.N/e2eRounds), and b.N orders by
// a raw driver loop (ChangeStream.Next + decode of the fullDocument into T; e2eRounds+1 phases,
// alternating with watchtree's). Every phase reads events already in the oplog, from a fresh
// collection, so the writer never paces the reader. mongosim runs in a child process, as a
// server would: its heap (every inserted order and the oplog) is not scanned by the measured
// process's garbage collector. Reported: raw-events/s, watchtree-events/s and ratio =
// watchtree / raw (target ≥ 0.9). ns/op and the allocations are watchtree's phases only.
func BenchmarkEndToEnd(b *testing.B) {
	cl := connect(b, startMongosimProcess(b), nil)
	waitNextSecond()
	rt := newRuntime(b, cl, nil)
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	wtPart := max(b.N/e2eRounds, 1)
	rawPart := max(b.N/(e2eRounds+1), 1)
	var raw, wt time.Duration
	for r := range e2eRounds {
		raw += rawPhase(b, cl, fmt.Sprintf("raw-%d-%d", b.N, r), rawPart)
		wt += watchtreePhase(b, rt, cl, fmt.Sprintf("wt-%d-%d", b.N, r), wtPart)
	}
	raw += rawPhase(b, cl, fmt.Sprintf("raw-%d-%d", b.N, e2eRounds), rawPart)

	rawRate := float64((e2eRounds+1)*rawPart) / raw.Seconds()
	wtRate := float64(e2eRounds*wtPart) / wt.Seconds()
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(wtRate, "watchtree-events/s")
	b.ReportMetric(wtRate/rawRate, "ratio")
}
