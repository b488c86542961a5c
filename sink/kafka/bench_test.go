package kafkasink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// BenchmarkKafkaSink measures events/s into one topic of 6 partitions (kfake, or
// WATCHTREE_KAFKA_BROKERS) through sink.Handler (canonical Extended JSON payload, document key
// as record key, event ID header, acks=all awaited) against two hand-written ProduceSync loops
// on a client of their own with the same producer settings (idempotent, acks=all, linger 0):
// the least a correct publisher does (the raw BSON event as value, the raw BSON document key as
// key, the event ID header: loop-events/s) and the same with the sink's payload and key as
// canonical Extended JSON (loopjson-events/s). All three run 8 concurrent publishers, as 8
// lanes would, in turns within each round of the same run (the order rotates). It reports the
// three rates, ratio (sink / loop) and ratio-same-payload (sink / loopjson).
func BenchmarkKafkaSink(b *testing.B) {
	const publishers, perPublisher = 8, 250
	brokers := cluster(b)
	root := fmt.Sprintf("wtkafkabench%d", time.Now().UnixNano()%1e9)
	topic := root + ".orders"
	createTopic(b, admin(b, brokers), topic, 6)
	p := publisher(b, kafkasink.Options{Brokers: brokers})
	h, err := sink.Handler[bson.Raw](p, sink.Options{Subject: "{db}.{coll}"})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	produce := func(ev *watchtree.Event[bson.Raw], key, value []byte) error {
		r := &kgo.Record{Topic: topic, Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: kafkasink.EventIDHeader, Value: []byte(ev.ID())}}}
		return cl.ProduceSync(ctx, r).FirstErr()
	}
	sinktest.Throughput{
		Namespace: watchtree.Namespace{DB: root, Coll: "orders"},
		Sink:      h,
		Loop: func(ev *watchtree.Event[bson.Raw]) error {
			key, err := bson.Marshal(ev.DocumentKey())
			if err != nil {
				return err
			}
			return produce(ev, key, ev.Raw())
		},
		LoopJSON: func(ev *watchtree.Event[bson.Raw]) error {
			key, err := bson.MarshalExtJSON(ev.DocumentKey(), true, false)
			if err != nil {
				return err
			}
			payload, err := bson.MarshalExtJSON(ev.Raw(), true, false)
			if err != nil {
				return err
			}
			return produce(ev, key, payload)
		},
	}.Run(b)
}
