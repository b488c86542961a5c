package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree"
)

// laneKeys is the number of documents the lanes benchmark updates round-robin: enough that the
// documentKey hash spreads them evenly over 8 lanes.
const laneKeys = 1024

// orderCheck records, per document, the last update number handled, and counts handled events
// whose number is not above the previous one of the same document (a per-key order violation).
type orderCheck struct {
	mu         sync.Mutex
	last       map[bson.ObjectID]int64
	violations int
}

func (c *orderCheck) see(key bson.ObjectID, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.last[key]; ok && n <= prev {
		c.violations++
	}
	c.last[key] = n
}

// lanesPhase updates the laneKeys documents of a fresh collection n times in all (update i sets
// {n: i} on document i mod laneKeys), then times a stream with the given lanes whose OnUpdate
// handler sleeps 1ms, from Spawn until all n updates are handled. It fails the benchmark if any
// document's updates were handled out of order or if an update was missed.
func lanesPhase(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, name string, lanes, n int, timed bool) time.Duration {
	b.Helper()
	ctx := context.Background()
	c := cl.Database(benchDB).Collection(name)
	keys := make([]bson.ObjectID, laneKeys)
	docs := make([]any, laneKeys)
	for i := range keys {
		keys[i] = bson.NewObjectID()
		docs[i] = bson.D{{Key: "_id", Value: keys[i]}, {Key: "n", Value: int64(-1)}}
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		b.Fatalf("insert: %v", err)
	}
	at := startPoint() // the inserts may fall in this second: they reach no handler (no OnInsert)
	var models []mongo.WriteModel
	for i := range n {
		models = append(models, mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: keys[i%laneKeys]}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int64(i)}}}}))
		if len(models) == 1000 || i == n-1 {
			if _, err := c.BulkWrite(ctx, models); err != nil {
				b.Fatalf("update: %v", err)
			}
			models = models[:0]
		}
	}

	check := &orderCheck{last: make(map[bson.ObjectID]int64, laneKeys)}
	cd := newCountdown(n)
	if timed {
		b.StartTimer()
	}
	start := time.Now()
	h, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{
		Name:          name,
		Collection:    name,
		Lanes:         lanes,
		StartPosition: watchtree.At(at),
		OnUpdate: func(_ context.Context, ev *watchtree.Event[bson.Raw]) error {
			time.Sleep(time.Millisecond) // an I/O-bound handler
			key, _ := ev.DocumentID().ObjectIDOK()
			v, err := ev.UpdateDescription.UpdatedFields.LookupErr("n")
			if err != nil {
				return watchtree.Permanent(fmt.Errorf("no n in %v", ev.UpdateDescription.UpdatedFields))
			}
			check.see(key, v.Int64())
			cd.tick()
			return nil
		},
	})
	if err != nil {
		b.Fatalf("spawn: %v", err)
	}
	cd.wait(b, fmt.Sprintf("lanes=%d", lanes))
	elapsed := time.Since(start)
	if timed {
		b.StopTimer()
	}
	stopHandle(b, h)

	check.mu.Lock()
	defer check.mu.Unlock()
	if check.violations > 0 {
		b.Fatalf("lanes=%d: %d updates handled before an earlier update of the same document", lanes, check.violations)
	}
	for i := max(n-laneKeys, 0); i < n; i++ { // the last update of each document was handled last
		if got := check.last[keys[i%laneKeys]]; got != int64(i) {
			b.Fatalf("lanes=%d: document %d ended at update %d, want %d", lanes, i%laneKeys, got, i)
		}
	}
	return elapsed
}

// BenchmarkLanes measures what Lanes buys for an I/O-bound handler (1ms sleep per event),
// through the whole runtime on mongosim: b.N updates (one op is one event) handled with Lanes 8,
// against b.N/16 updates with Lanes 1 before it and as many after it (same run; both rates are
// per event). Updates cycle over 1,024 documents and every document's updates must be handled
// in order (checked; the benchmark fails otherwise). Reported: lanes1-events/s,
// lanes8-events/s and speedup = lanes8 / lanes1 (target ≥ 7). ns/op is the 8-lane phase.
func BenchmarkLanes(b *testing.B) {
	_, cl := startMongosim(b)
	rt := newRuntime(b, cl, nil)
	b.StopTimer()
	b.ResetTimer()
	part := max(b.N/16, 1)
	one := lanesPhase(b, rt, cl, fmt.Sprintf("lanes1-a-%d", b.N), 1, part, false)
	eight := lanesPhase(b, rt, cl, fmt.Sprintf("lanes8-%d", b.N), 8, b.N, true)
	one += lanesPhase(b, rt, cl, fmt.Sprintf("lanes1-b-%d", b.N), 1, part, false)

	rate1 := float64(2*part) / one.Seconds()
	rate8 := float64(b.N) / eight.Seconds()
	b.ReportMetric(rate1, "lanes1-events/s")
	b.ReportMetric(rate8, "lanes8-events/s")
	b.ReportMetric(rate8/rate1, "speedup")
}
