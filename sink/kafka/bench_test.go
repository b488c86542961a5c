package kafkasink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
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
	events := func() [][]*watchtree.Event[bson.Raw] {
		out := make([][]*watchtree.Event[bson.Raw], publishers)
		for w := range out {
			for i := range perPublisher {
				doc, err := bson.Marshal(bson.D{{Key: "_id", Value: w*perPublisher + i}, {Key: "customer", Value: "c-1842"},
					{Key: "amount", Value: 129.5}, {Key: "status", Value: "new"}, {Key: "items", Value: bson.A{"sku-1", "sku-2", "sku-3"}}})
				if err != nil {
					b.Fatal(err)
				}
				raw := bson.Raw(doc)
				ev, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: root, Coll: "orders"}, FullDocument: &raw}.Build()
				if err != nil {
					b.Fatal(err)
				}
				out[w] = append(out[w], ev)
			}
		}
		return out
	}
	run := func(evs [][]*watchtree.Event[bson.Raw], publish func(*watchtree.Event[bson.Raw]) error) time.Duration {
		var wg sync.WaitGroup
		errs := make(chan error, publishers)
		start := time.Now()
		for _, mine := range evs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, ev := range mine {
					if err := publish(ev); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		d := time.Since(start)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return d
	}
	loop := func(ev *watchtree.Event[bson.Raw]) error {
		key, err := bson.Marshal(ev.DocumentKey())
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: topic, Key: key, Value: ev.Raw(), Headers: []kgo.RecordHeader{{Key: kafkasink.EventIDHeader, Value: []byte(ev.ID())}}}
		return cl.ProduceSync(ctx, r).FirstErr()
	}
	loopJSON := func(ev *watchtree.Event[bson.Raw]) error {
		key, err := bson.MarshalExtJSON(ev.DocumentKey(), true, false)
		if err != nil {
			return err
		}
		payload, err := bson.MarshalExtJSON(ev.Raw(), true, false)
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: topic, Key: key, Value: payload, Headers: []kgo.RecordHeader{{Key: kafkasink.EventIDHeader, Value: []byte(ev.ID())}}}
		return cl.ProduceSync(ctx, r).FirstErr()
	}
	viaSink := func(ev *watchtree.Event[bson.Raw]) error { return h(ctx, ev) }
	kinds := []func(*watchtree.Event[bson.Raw]) error{viaSink, loop, loopJSON}
	took := make([]time.Duration, len(kinds))
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		evs := make([][][]*watchtree.Event[bson.Raw], len(kinds))
		for k := range kinds {
			evs[k] = events()
		}
		b.StartTimer()
		for j := range kinds {
			k := (i + j) % len(kinds) // rotate which goes first
			took[k] += run(evs[k], kinds[k])
		}
	}
	n := float64(b.N * publishers * perPublisher)
	sinkRate, loopRate, jsonRate := n/took[0].Seconds(), n/took[1].Seconds(), n/took[2].Seconds()
	b.ReportMetric(sinkRate, "sink-events/s")
	b.ReportMetric(loopRate, "loop-events/s")
	b.ReportMetric(jsonRate, "loopjson-events/s")
	b.ReportMetric(sinkRate/loopRate, "ratio")
	b.ReportMetric(sinkRate/jsonRate, "ratio-same-payload")
}
