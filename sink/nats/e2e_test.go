package natssink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/test/mongosim"
)

// got is one message as a consumer of the group saw it.
type got struct {
	consumer int
	seq      uint64 // stream sequence
	key      string
	v        int64
	id       string
}

// TestStreamToJetStreamThenAConsumerGroup runs a watchtree stream on mongosim with the NATS
// sink (4 lanes) while 10 writers insert 40 documents and update each 9 times (v 1..10 per
// document, concurrently across documents). Three workers read one durable pull consumer. It
// checks that every event arrives exactly once (by stream sequence and by Nats-Msg-Id), that
// the stream holds each key's events in order, and that each worker sees each key's events in
// order.
func TestStreamToJetStreamThenAConsumerGroup(t *testing.T) {
	const docs, versions, writers, workers = 40, 10, 10, 3
	const total = docs * versions
	_, js := connect(t)
	root := fmt.Sprintf("wtnatse2e%d", time.Now().UnixNano()%1e9)
	stream := newStream(t, js, root, 0)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())

	rt, err := watchtree.New(watchtree.Config{Client: client, Database: root, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	p, err := natssink.New(js)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sink.Handler[bson.Raw](p, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: 4,
		OnChange: h}) // Resume: with no checkpoint, the position is captured before Spawn returns
	if err != nil {
		t.Fatal(err)
	}

	// The writers: writer w owns the documents w, w+writers, ...; each document is inserted
	// with v 1, then set to v 2..versions.
	coll := client.Database(root).Collection("docs")
	var wg sync.WaitGroup
	werr := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); v <= versions; v++ {
				for d := w; d < docs; d += writers {
					var err error
					if v == 1 {
						_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: d}, {Key: "v", Value: v}})
					} else {
						_, err = coll.UpdateByID(ctx, d, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}})
					}
					if err != nil {
						werr <- fmt.Errorf("doc %d v %d: %w", d, v, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(werr)
	for err := range werr {
		t.Fatal(err)
	}

	// The consumer group: one durable pull consumer, three workers fetching from it.
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "group", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []got
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var group sync.WaitGroup
	errs := make(chan error, workers)
	for c := range workers {
		group.Add(1)
		go func() {
			defer group.Done()
			for wctx.Err() == nil {
				batch, err := cons.Fetch(5, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					errs <- fmt.Errorf("worker %d: fetch: %w", c, err)
					return
				}
				for m := range batch.Messages() {
					md, err := m.Metadata()
					if err != nil {
						errs <- fmt.Errorf("worker %d: metadata: %w", c, err)
						return
					}
					v, err := payloadVersion(m.Data())
					if err != nil {
						errs <- fmt.Errorf("worker %d: seq %d: %w", c, md.Sequence.Stream, err)
						return
					}
					mu.Lock()
					seen = append(seen, got{consumer: c, seq: md.Sequence.Stream, key: m.Headers().Get(natssink.KeyHeader), v: v,
						id: m.Headers().Get(jetstream.MsgIDHeader)})
					mu.Unlock()
					if err := m.Ack(); err != nil {
						errs <- fmt.Errorf("worker %d: ack: %w", c, err)
						return
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for count() < total && time.Now().Before(deadline) {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopWorkers()
	group.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := hd.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream: handled %d, dead-lettered %d; the group received %d of %d", st.Handled, st.DeadLettered, len(seen), total)
	if len(seen) != total {
		t.Fatalf("the consumer group received %d messages, want %d (every insert and update once)", len(seen), total)
	}

	bySeq := map[uint64]got{}
	ids := map[string]bool{}
	perWorker := map[[2]string]int64{} // (worker, key) → last v
	perCount := make([]int, workers)
	for _, g := range seen {
		if _, dup := bySeq[g.seq]; dup {
			t.Fatalf("stream sequence %d received twice", g.seq)
		}
		bySeq[g.seq] = g
		if g.id == "" || ids[g.id] {
			t.Fatalf("seq %d: Nats-Msg-Id %q missing or repeated", g.seq, g.id)
		}
		ids[g.id] = true
		wk := [2]string{fmt.Sprint(g.consumer), g.key}
		if g.v <= perWorker[wk] {
			t.Errorf("worker %d saw key %s v %d after v %d: per-key order broken on the consumer side", g.consumer, g.key, g.v, perWorker[wk])
		}
		perWorker[wk] = g.v
		perCount[g.consumer]++
	}
	// In stream order, each key's versions are exactly 1..versions.
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		g, ok := bySeq[seq]
		if !ok {
			t.Fatalf("stream sequence %d was never delivered to the group", seq)
		}
		if g.v != last[g.key]+1 {
			t.Fatalf("seq %d: key %s v %d after v %d: the stream does not hold the key's events in order", seq, g.key, g.v, last[g.key])
		}
		last[g.key] = g.v
	}
	if len(last) != docs || info.State.Msgs != total {
		t.Fatalf("%d keys and %d messages in the stream, want %d and %d", len(last), info.State.Msgs, docs, total)
	}
	for k, v := range last {
		if v != versions {
			t.Errorf("key %s ends at v %d, want %d", k, v, versions)
		}
	}
	t.Logf("per worker: %v", perCount)
}

// payloadVersion reads v from a canonical Extended JSON change event: fullDocument.v of an
// insert, updateDescription.updatedFields.v of an update.
func payloadVersion(payload []byte) (int64, error) {
	var ev bson.Raw
	if err := bson.UnmarshalExtJSON(payload, true, &ev); err != nil {
		return 0, fmt.Errorf("payload is not canonical Extended JSON: %w", err)
	}
	for _, path := range [][]string{{"fullDocument", "v"}, {"updateDescription", "updatedFields", "v"}} {
		if v, err := ev.LookupErr(path...); err == nil {
			if n, ok := v.AsInt64OK(); ok {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("no v in %s", payload)
}
