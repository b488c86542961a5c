package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
)

// snapshotDocs is the collection size of the snapshot benchmarks.
const snapshotDocs = 20_000

// rawFindPhase times the loop a user would write by hand: one find over the whole collection,
// each document decoded into T (order) and handed to the sink.
func rawFindPhase(b *testing.B, c *mongo.Collection) time.Duration {
	b.Helper()
	ctx := context.Background()
	var sink e2eSink
	start := time.Now()
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		b.Fatalf("find: %v", err)
	}
	n := 0
	for cur.Next(ctx) {
		var o order
		if err := cur.Decode(&o); err != nil {
			b.Fatalf("decode: %v", err)
		}
		sink.handle(&o)
		n++
	}
	if err := cur.Err(); err != nil || n != snapshotDocs {
		b.Fatalf("raw find: %d documents, %v", n, err)
	}
	_ = cur.Close(ctx)
	return time.Since(start)
}

// rawChunkedPhase times a raw loop issuing the snapshot's own queries (find _id > last, sorted
// on _id, limit 1000), decoding into T: it tells the server's cost of chunked reads from the
// cost of watchtree's pipeline.
func rawChunkedPhase(b *testing.B, c *mongo.Collection) time.Duration {
	b.Helper()
	ctx := context.Background()
	var sink e2eSink
	start := time.Now()
	var last any
	n := 0
	for {
		filter := bson.D{}
		if last != nil {
			filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}}
		}
		cur, err := c.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(1000))
		if err != nil {
			b.Fatalf("find: %v", err)
		}
		got := 0
		for cur.Next(ctx) {
			var o order
			if err := cur.Decode(&o); err != nil {
				b.Fatalf("decode: %v", err)
			}
			sink.handle(&o)
			last = o.ID
			got++
		}
		_ = cur.Close(ctx)
		n += got
		if got < 1000 {
			break
		}
	}
	if n != snapshotDocs {
		b.Fatalf("raw chunked: %d documents", n)
	}
	return time.Since(start)
}

// snapshotPhase times a watchtree snapshot of the collection (Spawn until the handler saw every
// document) with the given partitions and lanes; the stream is then stopped, untimed.
func snapshotPhase(b *testing.B, rt *watchtree.Runtime, coll, name string, partitions, lanes, batch int) time.Duration {
	b.Helper()
	var mu sync.Mutex
	var sink e2eSink
	cd := newCountdown(snapshotDocs)
	start := time.Now()
	h, err := rt.Spawn(context.Background(), watchtree.Stream[order]{
		Name: name, Collection: coll, Lanes: lanes,
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: partitions, BatchSize: batch},
		OnSnapshot: func(_ context.Context, ev *watchtree.Event[order]) error {
			mu.Lock()
			sink.handle(ev.FullDocument)
			mu.Unlock()
			cd.tick()
			return nil
		},
		OnChange: func(context.Context, *watchtree.Event[order]) error { return nil },
	})
	if err != nil {
		b.Fatalf("spawn: %v", err)
	}
	cd.wait(b, name)
	elapsed := time.Since(start)
	stopHandle(b, h)
	return elapsed
}

// BenchmarkSnapshot compares a watchtree snapshot (chunked _id ranges, snapshot events through
// the dispatcher's lanes, per-range progress saved in mongostore) with a raw find loop decoding
// into the same struct, in the same run and on the same collection of 20,000 orders (mongosim in
// a child process). Phases alternate (raw, 1 partition, 4 partitions, raw, ...) so drift hits all
// alike. Reported: documents/s of each and the ratios to the raw loop (targets ≥ 0.9 with 1
// partition and ≥ 1.3 with 4), plus 4 partitions with 5,000-document chunks, and the 1-partition
// snapshot against a raw loop issuing the snapshot's own chunked queries (p1-vs-chunked-ratio:
// what watchtree's pipeline costs on top of the server's chunked reads). One op is one round
// of the phases.
func BenchmarkSnapshot(b *testing.B) {
	cl := connect(b, startMongosimProcess(b), nil)
	rt := newRuntime(b, cl, nil)
	c := cl.Database(benchDB).Collection("snap-src")
	insertOrders(b, c, snapshotDocs)
	var raw, chunked, one, four, fourBig time.Duration
	rounds := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raw += rawFindPhase(b, c)
		chunked += rawChunkedPhase(b, c)
		one += snapshotPhase(b, rt, c.Name(), fmt.Sprintf("snap1-%d-%d", b.N, i), 1, 1, 0)
		four += snapshotPhase(b, rt, c.Name(), fmt.Sprintf("snap4-%d-%d", b.N, i), 4, 4, 0)
		fourBig += snapshotPhase(b, rt, c.Name(), fmt.Sprintf("snap4b-%d-%d", b.N, i), 4, 4, 5000)
		rounds++
	}
	raw += rawFindPhase(b, c)
	rate := func(d time.Duration, phases int) float64 { return float64(phases*snapshotDocs) / d.Seconds() }
	rawRate := rate(raw, rounds+1)
	b.ReportMetric(rawRate, "raw-docs/s")
	b.ReportMetric(rate(one, rounds), "p1-docs/s")
	b.ReportMetric(rate(four, rounds), "p4-docs/s")
	b.ReportMetric(rate(one, rounds)/rawRate, "p1-ratio")
	b.ReportMetric(rate(one, rounds)/rate(chunked, rounds), "p1-vs-chunked-ratio")
	b.ReportMetric(rate(four, rounds)/rawRate, "p4-ratio")
	// With 5,000-document chunks the server runs 4 finds per range instead of 20 (each one walks
	// the _id index from the range's last _id, on mongosim as on a server).
	b.ReportMetric(rate(fourBig, rounds)/rawRate, "p4-batch5000-ratio")
}

// BenchmarkSnapshotResume compares the time a snapshot takes to finish when it resumes from
// progress saved at about 50% (its first run stopped there) with a full snapshot from zero, in
// the same run. Reported: full-ms, resume-ms and resume-ratio = resume / full (about 0.5 when the
// resume re-reads nothing but the unfinished halves of the ranges).
func BenchmarkSnapshotResume(b *testing.B) {
	cl := connect(b, startMongosimProcess(b), nil)
	c := cl.Database(benchDB).Collection("snap-resume")
	insertOrders(b, c, snapshotDocs)
	var full, resumed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt, stop := startRuntime(b, cl, nil)
		full += snapshotPhase(b, rt, c.Name(), fmt.Sprintf("full-%d-%d", b.N, i), 4, 4, 0)
		stop()

		name := fmt.Sprintf("resume-%d-%d", b.N, i)
		half := newCountdown(snapshotDocs / 2)
		rt1, stop1 := startRuntime(b, cl, nil)
		var seen sync.Map
		spec := watchtree.Stream[order]{Name: name, Collection: c.Name(), Lanes: 4,
			Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 4},
			OnSnapshot: func(_ context.Context, ev *watchtree.Event[order]) error {
				if _, dup := seen.LoadOrStore(ev.FullDocument.ID, true); !dup && half.got.Load() < half.n {
					half.tick()
				}
				return nil
			},
			OnChange: func(context.Context, *watchtree.Event[order]) error { return nil }}
		if _, err := rt1.Spawn(context.Background(), spec); err != nil {
			b.Fatalf("spawn: %v", err)
		}
		half.wait(b, "first half")
		stop1() // a graceful stop saves the progress of every range

		rest := newCountdown(1)
		var once sync.Once
		remaining := 0
		seen.Range(func(_, _ any) bool { remaining++; return true })
		left := snapshotDocs - remaining
		var mu sync.Mutex
		count := 0
		spec.OnSnapshot = func(_ context.Context, ev *watchtree.Event[order]) error {
			if _, dup := seen.LoadOrStore(ev.FullDocument.ID, true); !dup {
				mu.Lock()
				count++
				if count == left {
					once.Do(rest.tick)
				}
				mu.Unlock()
			}
			return nil
		}
		rt2, stop2 := startRuntime(b, cl, nil)
		start := time.Now()
		if _, err := rt2.Spawn(context.Background(), spec); err != nil {
			b.Fatalf("spawn: %v", err)
		}
		if left > 0 {
			rest.wait(b, "resumed half")
		}
		resumed += time.Since(start)
		stop2()
	}
	b.ReportMetric(float64(full.Milliseconds())/float64(b.N), "full-ms")
	b.ReportMetric(float64(resumed.Milliseconds())/float64(b.N), "resume-ms")
	b.ReportMetric(resumed.Seconds()/full.Seconds(), "resume-ratio")
}
