package kafkasink_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/test/mongosim"
)

// got is one record as a member of the consumer group saw it.
type got struct {
	member    int
	partition int32
	offset    int64
	key       string
	v         int64
	id        string
}

// TestStreamToKafkaThenAConsumerGroup runs a watchtree stream on mongosim with the Kafka sink
// (4 lanes, subject "{db}.{coll}": inserts and updates of a document share one topic, so its
// events share one partition) into a topic of 6 partitions, while 10 writers insert 40
// documents and update each 9 times (v 1..10 per document, concurrently across documents).
// Three members of one consumer group read the topic, joined before the first write (each
// owns some partitions). It checks that every event arrives once (by partition and offset,
// and by the event ID header), that each key's events sit in one partition in order, and that
// each member sees each key's events in order.
func TestStreamToKafkaThenAConsumerGroup(t *testing.T) {
	const docs, versions, writers, members, partitions = 40, 10, 10, 3, 6
	const total = docs * versions
	brokers := cluster(t)
	adm := admin(t, brokers)
	root := fmt.Sprintf("wtkafkae2e%d", time.Now().UnixNano()%1e9)
	topic := root + ".docs"
	createTopic(t, adm, topic, partitions)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The consumer group: three members, each polling in its own goroutine until wctx ends.
	var mu sync.Mutex
	var seen []got
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	var assigned [members]atomic.Int32
	wctx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	var group sync.WaitGroup
	errs := make(chan error, members)
	for c := range members {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(root+"-group"), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(int32(len(m[topic]))) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(-int32(len(m[topic]))) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(-int32(len(m[topic]))) }))
		if err != nil {
			t.Fatal(err)
		}
		group.Add(1)
		go func() {
			defer group.Done()
			defer cl.Close()
			for wctx.Err() == nil {
				fs := cl.PollFetches(wctx)
				if wctx.Err() != nil {
					return
				}
				var ferr error
				fs.EachError(func(tp string, p int32, err error) { ferr = fmt.Errorf("member %d: fetch %s[%d]: %w", c, tp, p, err) })
				if ferr != nil {
					errs <- ferr
					return
				}
				for _, r := range fs.Records() {
					v, err := payloadVersion(r.Value)
					if err != nil {
						errs <- fmt.Errorf("member %d: %s[%d]@%d: %w", c, r.Topic, r.Partition, r.Offset, err)
						return
					}
					mu.Lock()
					seen = append(seen, got{member: c, partition: r.Partition, offset: r.Offset, key: string(r.Key), v: v,
						id: header(r, kafkasink.EventIDHeader)})
					mu.Unlock()
				}
			}
		}()
	}
	// Wait (polling, bounded) until every member owns partitions and all are owned.
	settled := func() bool {
		sum := int32(0)
		for c := range members {
			n := assigned[c].Load()
			if n == 0 {
				return false
			}
			sum += n
		}
		return sum == partitions
	}
	deadline := time.Now().Add(30 * time.Second)
	for !settled() {
		if time.Now().After(deadline) {
			t.Fatalf("the group did not settle within 30s: assigned %d, %d, %d of %d partitions", assigned[0].Load(), assigned[1].Load(), assigned[2].Load(), partitions)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Millisecond):
		}
	}

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
	p := publisher(t, kafkasink.Options{Brokers: brokers})
	h, err := sink.Handler[bson.Raw](p, sink.Options{Subject: "{db}.{coll}"})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "relay", Collection: "docs", Lanes: 4, OnChange: h})
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

	deadline = time.Now().Add(time.Minute)
	for count() < total && time.Now().Before(deadline) {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopMembers()
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
		t.Fatalf("the consumer group received %d records, want %d (every insert and update once)", len(seen), total)
	}

	byPos := map[[2]int64]got{}
	ids := map[string]bool{}
	keyPart := map[string]int32{}
	perMember := map[string]int64{} // member/key → last v
	perCount := make([]int, members)
	for _, g := range seen {
		pos := [2]int64{int64(g.partition), g.offset}
		if _, dup := byPos[pos]; dup {
			t.Fatalf("partition %d offset %d received twice", g.partition, g.offset)
		}
		byPos[pos] = g
		if g.id == "" || ids[g.id] {
			t.Fatalf("partition %d offset %d: %s %q missing or repeated", g.partition, g.offset, kafkasink.EventIDHeader, g.id)
		}
		ids[g.id] = true
		if p, ok := keyPart[g.key]; ok && p != g.partition {
			t.Fatalf("key %s in partitions %d and %d: the record key does not pin the partition", g.key, p, g.partition)
		}
		keyPart[g.key] = g.partition
		mk := fmt.Sprintf("%d/%s", g.member, g.key)
		if g.v <= perMember[mk] {
			t.Errorf("member %d saw key %s v %d after v %d: per-key order broken on the consumer side", g.member, g.key, g.v, perMember[mk])
		}
		perMember[mk] = g.v
		perCount[g.member]++
	}
	// In offset order, each key's versions are exactly 1..versions.
	last := map[string]int64{}
	for _, r := range readTopic(t, brokers, adm, topic) {
		g, ok := byPos[[2]int64{int64(r.Partition), r.Offset}]
		if !ok {
			t.Fatalf("partition %d offset %d was never delivered to the group", r.Partition, r.Offset)
		}
		if g.v != last[g.key]+1 {
			t.Fatalf("partition %d offset %d: key %s v %d after v %d: the partition does not hold the key's events in order", r.Partition, r.Offset, g.key, g.v, last[g.key])
		}
		last[g.key] = g.v
	}
	if len(last) != docs {
		t.Fatalf("%d keys in the topic, want %d", len(last), docs)
	}
	for k, v := range last {
		if v != versions {
			t.Errorf("key %s ends at v %d, want %d", k, v, versions)
		}
	}
	t.Logf("per member: %v", perCount)
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
