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

// txnPhase inserts n orders into a fresh collection, then times a stream with 4 lanes whose
// OnInsert handler $incs the order's own counter (upsert into <name>_counters), from Spawn until
// all n are handled: without a transaction (txn false), in a transaction per event (txn true,
// batch 0) or in transactions of up to batch events. It checks every counter is 1.
func txnPhase(b *testing.B, rt *watchtree.Runtime, cl *mongo.Client, name string, n int, txn bool, batch int) time.Duration {
	b.Helper()
	ctx := context.Background()
	db := cl.Database(benchDB)
	counters := db.Collection(name + "_counters")
	if err := db.CreateCollection(ctx, counters.Name()); err != nil { // transactions do not race to create it
		b.Fatalf("create: %v", err)
	}
	at := startPoint()
	docs := make([]any, 0, 1000)
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(i)}, {Key: "amount", Value: i % 97}})
		if len(docs) == cap(docs) || i == n-1 {
			if _, err := db.Collection(name).InsertMany(ctx, docs); err != nil {
				b.Fatalf("insert: %v", err)
			}
			docs = docs[:0]
		}
	}
	cd := newCountdown(n)
	start := time.Now()
	h, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{
		Name: name, Collection: name, Lanes: 4, StartPosition: watchtree.At(at),
		Transactional: txn, TxBatch: watchtree.TxBatchPolicy{MaxEvents: batch},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[bson.Raw]) error {
			_, err := counters.UpdateOne(ctx, bson.D{{Key: "_id", Value: ev.DocumentID()}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			if err == nil {
				cd.tick()
			}
			return err
		},
	})
	if err != nil {
		b.Fatalf("spawn: %v", err)
	}
	cd.wait(b, name)
	elapsed := time.Since(start)
	stopHandle(b, h)
	if txn { // a transaction's tick may come from an attempt that did not commit: wait for the commits
		deadline := time.Now().Add(time.Minute)
		for {
			c, err := counters.CountDocuments(ctx, bson.D{{Key: "n", Value: 1}})
			if err != nil {
				b.Fatalf("count: %v", err)
			}
			if c == int64(n) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d counters at 1", name, c, n)
			}
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
	}
	if c, err := counters.CountDocuments(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$ne", Value: 1}}}}); err != nil || c != 0 {
		b.Fatalf("%s: %d counters not at 1 (%v)", name, c, err)
	}
	return elapsed
}

// BenchmarkTransactional measures exactly once into MongoDB on mongosim: b.N orders (at least
// 2,000) handled by a 4-lane stream whose handler $incs the order's counter, in three phases of
// the same run: no transaction (the baseline), a transaction per event, and TxBatch 100.
// Reported: events/s of each and the ratios to the baseline (target for TxBatch 100: ≥ 0.5).
func BenchmarkTransactional(b *testing.B) {
	_, cl := startMongosim(b)
	rt := newRuntime(b, cl, nil)
	b.StopTimer()
	b.ResetTimer()
	n := max(b.N, 2000)
	plain := txnPhase(b, rt, cl, fmt.Sprintf("txn-plain-%d", b.N), n, false, 0)
	perEvent := txnPhase(b, rt, cl, fmt.Sprintf("txn-each-%d", b.N), n, true, 0)
	b.StartTimer()
	batched := txnPhase(b, rt, cl, fmt.Sprintf("txn-batch-%d", b.N), n, true, 100)
	b.StopTimer()
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(rate(plain), "plain-events/s")
	b.ReportMetric(rate(perEvent), "txn-events/s")
	b.ReportMetric(rate(batched), "batch100-events/s")
	b.ReportMetric(rate(perEvent)/rate(plain), "txn-ratio")
	b.ReportMetric(rate(batched)/rate(plain), "batch100-ratio")
}
