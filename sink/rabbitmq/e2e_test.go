package rabbitmqsink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/test/mongosim"
)

// got is one message as a consumer saw it.
type got struct {
	consumer int
	key      string
	v        int64
	id       string
}

// TestStreamToRabbitMQThenCompetingConsumers runs a watchtree stream on mongosim with the
// RabbitMQ sink (4 lanes) while 10 writers insert 40 documents and update each 9 times (v 1..10
// per document, concurrently across documents). Three competing consumers read one durable
// queue bound to the exchange. It checks that every (document, version) arrives, that every
// message carries a message-id and the document key, and reports duplicates by message-id
// (RabbitMQ does not deduplicate; on a run without failures there are none, and the test fails
// on any).
func TestStreamToRabbitMQThenCompetingConsumers(t *testing.T) {
	const docs, versions, writers, consumers = 40, 10, 10, 3
	const total = docs * versions
	url := brokerURL(t)
	ach := admin(t, url)
	root := uniqueRoot("wtrmqe2e")
	q := destination(t, ach, root)

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
	p := newPublisher(t, rabbitmqsink.Options{URL: url, Exchange: root})
	h, err := sink.Handler[bson.Raw](p, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: 4, OnChange: h})
	if err != nil {
		t.Fatal(err)
	}

	// The competing consumers: each its own connection and channel on the one queue, manual
	// acks, prefetch 10.
	var mu sync.Mutex
	var seen []got
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	var group sync.WaitGroup
	errs := make(chan error, consumers)
	conns := make([]*amqp.Connection, consumers)
	for c := range consumers {
		conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		conns[c] = conn
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		deliveries, err := ch.Consume(q, fmt.Sprintf("consumer-%d", c), false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		group.Add(1)
		go func() { // ends when its connection is closed below (deliveries closes)
			defer group.Done()
			for d := range deliveries {
				v, err := payloadVersion(d.Body)
				if err != nil {
					errs <- fmt.Errorf("consumer %d: %w", c, err)
					return
				}
				key, _ := d.Headers[rabbitmqsink.KeyHeader].(string)
				mu.Lock()
				seen = append(seen, got{consumer: c, key: key, v: v, id: d.MessageId})
				mu.Unlock()
				if err := d.Ack(false); err != nil {
					errs <- fmt.Errorf("consumer %d: ack: %w", c, err)
					return
				}
			}
		}()
	}
	stopConsumers := func() {
		for _, c := range conns {
			_ = c.Close()
		}
		group.Wait()
	}
	defer stopConsumers()

	// The writers: writer w owns the documents w, w+writers, ...; each document is inserted
	// with v 1, then set to v 2..versions.
	coll := client.Database(root).Collection("docs")
	var wg sync.WaitGroup
	werr := make(chan error, writers)
	start := time.Now()
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

	deadline := time.Now().Add(time.Minute)
	for count() < total && time.Now().Before(deadline) {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	stopConsumers()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := hd.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream: handled %d, dead-lettered %d; the consumers received %d of %d in %v", st.Handled, st.DeadLettered, len(seen), total, elapsed)

	ids := map[string]int{}
	have := map[[2]string]bool{} // (key, v)
	perCount := make([]int, consumers)
	for _, g := range seen {
		if g.id == "" || g.key == "" {
			t.Fatalf("a message without message-id (%q) or %s (%q)", g.id, rabbitmqsink.KeyHeader, g.key)
		}
		ids[g.id]++
		have[[2]string{g.key, fmt.Sprint(g.v)}] = true
		perCount[g.consumer]++
	}
	dups := 0
	for _, n := range ids {
		dups += n - 1
	}
	t.Logf("per consumer: %v; duplicates by message-id: %d", perCount, dups)
	if dups != 0 {
		t.Errorf("%d duplicates by message-id on a run without failures", dups)
	}
	keys := map[string]bool{}
	for kv := range have {
		keys[kv[0]] = true
	}
	if len(keys) != docs || len(have) != total {
		t.Fatalf("%d keys and %d distinct (key, version) pairs arrived, want %d and %d", len(keys), len(have), docs, total)
	}
	for c, n := range perCount {
		if n == 0 {
			t.Errorf("consumer %d received nothing: the queue did not share the work", c)
		}
	}
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
