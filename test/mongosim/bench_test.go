package mongosim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The benchmarks report the figures through b.ReportMetric (run them with
// `go test -C test/mongosim -run '^$' -bench . .`). Targets on the 2-core CI machine, reported
// not asserted: >= 30,000 events/s to one watcher, p99 insert-to-event latency < 5 ms, and
// inserts with 100 idle watchers >= 0.8 x inserts with none.

// benchDoc is the document every benchmark inserts: small, like an order event.
func benchDoc(i int) bson.D {
	return bson.D{{Key: "i", Value: int64(i)}, {Key: "status", Value: "new"}, {Key: "amount", Value: 12.5}}
}

// BenchmarkInsert measures acknowledged single-document inserts from one client, one at a
// time (each a round trip), and reports inserts/s.
func BenchmarkInsert(b *testing.B) {
	_, cl := startServer(b, Options{})
	coll := cl.Database("bench").Collection("insert")
	ctx := context.Background()
	if _, err := coll.InsertOne(ctx, benchDoc(-1)); err != nil { // connect and create outside the timer
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := coll.InsertOne(ctx, benchDoc(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "inserts/s")
}

// BenchmarkInsertParallel measures single-document inserts from GOMAXPROCS*4 goroutines
// sharing one client (and its pool), and reports inserts/s.
func BenchmarkInsertParallel(b *testing.B) {
	_, cl := startServer(b, Options{})
	coll := cl.Database("bench").Collection("insertpar")
	if _, err := coll.InsertOne(context.Background(), benchDoc(-1)); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, err := coll.InsertOne(context.Background(), benchDoc(i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "inserts/s")
}

// BenchmarkChangeStreamThroughput measures change events delivered per second to one
// watcher while a writer inserts b.N documents in batches of 1,000 (so the writer is not the
// bottleneck). The clock runs from the first insert to the last event received.
func BenchmarkChangeStreamThroughput(b *testing.B) {
	srv, cl := startServer(b, Options{})
	writer := connectClient(b, srv, nil).Database("bench").Collection("tp")
	ctx := context.Background()
	cs, err := cl.Database("bench").Collection("tp").Watch(ctx, mongo.Pipeline{},
		options.ChangeStream().SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)

	b.ResetTimer()
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		const batch = 1000
		docs := make([]any, 0, batch)
		for i := 0; i < b.N; i++ {
			docs = append(docs, benchDoc(i))
			if len(docs) == batch || i == b.N-1 {
				if _, err := writer.InsertMany(ctx, docs); err != nil {
					werr <- err
					return
				}
				docs = docs[:0]
			}
		}
		werr <- nil
	}()
	for n := 0; n < b.N; n++ {
		if !cs.Next(ctx) {
			b.Fatalf("after %d events: %v", n, cs.Err())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := <-werr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkChangeStreamLatency measures, for each of b.N inserts made one at a time, the
// time from just before the insert is sent until one watcher (waiting in an awaitData
// getMore) has received its event. It reports p50, p99 and max in milliseconds; the figure
// includes the insert's own round trip, so it bounds the server's wake-up latency from above.
func BenchmarkChangeStreamLatency(b *testing.B) {
	srv, cl := startServer(b, Options{})
	writer := connectClient(b, srv, nil).Database("bench").Collection("lat")
	ctx := context.Background()
	if _, err := writer.InsertOne(ctx, benchDoc(-1)); err != nil {
		b.Fatal(err)
	}
	cs, err := cl.Database("bench").Collection("lat").Watch(ctx, mongo.Pipeline{},
		options.ChangeStream().SetMaxAwaitTime(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)

	got := make(chan time.Time)
	rerr := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() {
		for {
			if !cs.Next(rctx) {
				rerr <- cs.Err()
				return
			}
			select {
			case got <- time.Now():
			case <-rctx.Done():
				rerr <- nil
				return
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sent := time.Now()
		if _, err := writer.InsertOne(ctx, benchDoc(i)); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-got:
			lat = append(lat, at.Sub(sent))
		case err := <-rerr:
			b.Fatalf("watcher: %v", err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(len(lat)), "samples")
	stop()
	<-rerr // the reader has returned: the deferred Close does not race its Next
}

// BenchmarkInsertWithIdleWatchers measures single-document inserts/s with no watcher and
// with 100 idle watchers (each waiting in an awaitData getMore on its own collection of the
// same database, so none of the inserts concern them), in the same run, and reports both
// rates and their ratio (target >= 0.8). To cancel drift on a shared machine the phases run
// as none (b.N/2 inserts), 100 watchers (b.N), none again (b.N/2).
func BenchmarkInsertWithIdleWatchers(b *testing.B) {
	const watchers = 100
	srv, cl := startServer(b, Options{})
	coll := cl.Database("bench").Collection("hot")
	ctx := context.Background()
	if _, err := coll.InsertOne(ctx, benchDoc(-1)); err != nil {
		b.Fatal(err)
	}
	timed := func(n int) time.Duration {
		b.StartTimer()
		defer b.StopTimer()
		start := time.Now()
		for i := 0; i < n; i++ {
			if _, err := coll.InsertOne(ctx, benchDoc(i)); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	wcl := connectClient(b, srv, func(o *options.ClientOptions) { o.SetMaxPoolSize(watchers + 10) })

	b.StopTimer()
	b.ResetTimer()
	half := max(b.N/2, 1)
	without := timed(half)

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var css []*mongo.ChangeStream
	before := len(srv.CommandsNamed("getMore"))
	for w := 0; w < watchers; w++ {
		cs, err := wcl.Database("bench").Collection(fmt.Sprintf("idle%d", w)).Watch(ctx, mongo.Pipeline{},
			options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		css = append(css, cs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cs.Next(wctx) {
			}
		}()
	}
	// Every watcher has completed one await and is back in its next getMore.
	waitFor(b, 10*time.Second, "the idle watchers' getMores", func() bool {
		return len(srv.CommandsNamed("getMore"))-before >= watchers
	})
	with := timed(b.N)
	cancel()
	wg.Wait()
	for _, cs := range css {
		_ = cs.Close(ctx)
	}
	without += timed(half)

	rate0 := float64(2*half) / without.Seconds()
	rate100 := float64(b.N) / with.Seconds()
	b.ReportMetric(rate0, "inserts/s-0-watchers")
	b.ReportMetric(rate100, "inserts/s-100-watchers")
	b.ReportMetric(rate100/rate0, "ratio")
}

// BenchmarkFindIDRange measures the snapshot's chunk query (_id > last, sorted on _id, limit
// 1000) over a 20,000-document collection, served by the ordered _id index, against the same
// query sorted on another field of the same order (i, which grows with _id), which scans and
// sorts, in the same run. Reported: chunks/s of each and index-speedup = indexed / scanned.
func BenchmarkFindIDRange(b *testing.B) {
	_, cl := startServer(b, Options{})
	coll := cl.Database("bench").Collection("idrange")
	ctx := context.Background()
	const n, chunk = 20_000, 1000
	docs := make([]any, n)
	for i := range docs {
		docs[i] = append(bson.D{{Key: "_id", Value: int64(i)}}, benchDoc(i)...)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	read := func(i int, sortKey string) {
		after := int64(i*chunk) % (n - chunk)
		filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}
		cur, err := coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: sortKey, Value: 1}}).SetLimit(chunk).SetBatchSize(chunk))
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for cur.Next(ctx) {
			got++
		}
		if err := cur.Close(ctx); err != nil || got != chunk {
			b.Fatalf("chunk after %d: %d documents, %v", after, got, err)
		}
	}
	var indexed, scanned time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		read(i, "_id")
		indexed += time.Since(t)
		t = time.Now()
		read(i, "i")
		scanned += time.Since(t)
	}
	b.ReportMetric(float64(b.N)/indexed.Seconds(), "indexed-chunks/s")
	b.ReportMetric(float64(b.N)/scanned.Seconds(), "scanned-chunks/s")
	b.ReportMetric(scanned.Seconds()/indexed.Seconds(), "index-speedup")
}

// BenchmarkChangeStreamNamespaceMatch reads b.N events with a database stream whose pipeline
// is watchtree's shared-cursor hub, {$match: {"ns.coll": {$in: [100 names]}}}, with and without
// the namespace pushdown (nspushdown.go). The events are written before the timer starts
// (InsertMany into 100 collections, and one write in 10 to a collection outside the list, as a
// checkpoint store's), so the time is the server's reading and the client's decoding. It reports
// events/s and the events mongosim built per event delivered.
func BenchmarkChangeStreamNamespaceMatch(b *testing.B) {
	for _, pushdown := range []bool{true, false} {
		b.Run(fmt.Sprintf("pushdown=%v", pushdown), func(b *testing.B) {
			srv, cl := startServer(b, Options{NoopInterval: -1})
			ctx := context.Background()
			db := cl.Database("bench")
			names := make(bson.A, 100)
			for i := range names {
				names[i] = fmt.Sprintf("c%03d", i)
			}
			start := srv.eng.clock.last()
			const batch = 100
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				docs := make([]any, n)
				for j := range docs {
					docs[j] = benchDoc(i + j)
				}
				if _, err := db.Collection(names[(i/batch)%len(names)].(string)).InsertMany(ctx, docs); err != nil {
					b.Fatal(err)
				}
				others := make([]any, max(n/10, 1))
				for j := range others {
					others[j] = benchDoc(i + j)
				}
				if _, err := db.Collection("checkpoints").InsertMany(ctx, others); err != nil {
					b.Fatal(err)
				}
			}
			srv.eng.noNSPushdown.Store(!pushdown)
			hub := bson.D{{Key: "$match", Value: bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$in", Value: names}}}}}}
			b.ResetTimer()
			built0 := srv.eng.eventsBuilt.Load()
			t0 := time.Now()
			cs, err := db.Watch(ctx, mongo.Pipeline{hub}, options.ChangeStream().SetStartAtOperationTime(&start))
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close(ctx)
			for n := 0; n < b.N; n++ {
				if !cs.Next(ctx) {
					b.Fatalf("after %d events: %v", n, cs.Err())
				}
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(srv.eng.eventsBuilt.Load()-built0)/float64(b.N), "built/event")
		})
	}
}

// BenchmarkChangeStreamNamespaceMatchServer is the server's side of
// BenchmarkChangeStreamNamespaceMatch alone: the same hub stream reads entries logged by hand
// through the aggregate and getMore handlers, with no driver and no socket, so ns/op is
// mongosim's CPU per event delivered (one entry in 11 is outside the $in list).
func BenchmarkChangeStreamNamespaceMatchServer(b *testing.B) {
	for _, pushdown := range []bool{true, false} {
		b.Run(fmt.Sprintf("pushdown=%v", pushdown), func(b *testing.B) {
			srv, err := Start(context.Background(), Options{NoopInterval: -1, OplogCapacity: 2*b.N + 1000})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			ctx := context.Background()
			names := make(bson.A, 100)
			for i := range names {
				names[i] = fmt.Sprintf("c%03d", i)
			}
			e := srv.eng
			start := e.clock.last()
			e.mu.Lock()
			for i := 0; i < b.N; i++ {
				for _, coll := range []string{names[(i/100)%len(names)].(string), "checkpoints"} {
					if coll == "checkpoints" && i%10 != 0 {
						continue
					}
					en := csIns("bench", coll, int64(i))
					en.doc = append(en.doc, benchDoc(i)...)
					en.ts = e.clock.tick()
					e.logLocked(en)
				}
			}
			e.mu.Unlock()
			e.noNSPushdown.Store(!pushdown)
			cmd := func(body bson.D) *command {
				body = append(body, bson.E{Key: "$db", Value: "bench"})
				return &command{Name: body[0].Key, DB: "bench", Body: body, ctx: ctx}
			}
			hub := bson.D{{Key: "$match", Value: bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$in", Value: names}}}}}}
			b.ResetTimer()
			built0 := e.eventsBuilt.Load()
			reply, err := cmdAggregateChangeStream(srv, cmd(bson.D{{Key: "aggregate", Value: int32(1)},
				{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "startAtOperationTime", Value: start}}}}, hub}},
				{Key: "cursor", Value: bson.D{}}}))
			if err != nil {
				b.Fatal(err)
			}
			cur, _ := lookupD(reply, "cursor")
			id, _ := lookupD(cur.(bson.D), "id")
			got := 101
			for got < b.N {
				reply, err := cmdGetMore(srv, cmd(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "$cmd.aggregate"}, {Key: "maxTimeMS", Value: int64(1)}}))
				if err != nil {
					b.Fatal(err)
				}
				cur, _ := lookupD(reply, "cursor")
				batch, _ := lookupD(cur.(bson.D), "nextBatch")
				if len(batch.(bson.A)) == 0 {
					b.Fatalf("%d events of %d", got, b.N)
				}
				got += len(batch.(bson.A))
			}
			b.StopTimer()
			b.ReportMetric(float64(e.eventsBuilt.Load()-built0)/float64(b.N), "built/event")
		})
	}
}
