package natssink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
)

// BenchmarkJetStreamSink measures events/s into one JetStream stream (file storage) through
// sink.Handler (canonical Extended JSON payload, Nats-Msg-Id, key header, PubAck awaited)
// against two hand-written loops: the least a correct publisher does (the raw BSON event as
// payload, Nats-Msg-Id, PubAck awaited: loop-events/s) and the same with the sink's payload,
// the event as canonical Extended JSON (loopjson-events/s). All three run 8 concurrent
// publishers, as 8 lanes would, in turns within each round of the same run (the order rotates).
// Each round publishes new events (a repeated ID would be a duplicate, cheaper to acknowledge).
// It reports the three rates, ratio (sink / loop) and ratio-same-payload (sink / loopjson).
func BenchmarkJetStreamSink(b *testing.B) {
	const publishers, perPublisher = 8, 250
	_, js := connect(b)
	root := fmt.Sprintf("wtnatsbench%d", time.Now().UnixNano()%1e9)
	newStream(b, js, root, 0)
	p, err := natssink.New(js)
	if err != nil {
		b.Fatal(err)
	}
	h, err := sink.Handler[bson.Raw](p, sink.Options{})
	if err != nil {
		b.Fatal(err)
	}
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
		ns := ev.Namespace()
		msg := &nats.Msg{Subject: ns.DB + "." + ns.Coll + "." + string(ev.OperationType()), Data: ev.Raw(), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		_, err := js.PublishMsg(ctx, msg)
		return err
	}
	loopJSON := func(ev *watchtree.Event[bson.Raw]) error {
		ns := ev.Namespace()
		payload, err := bson.MarshalExtJSON(ev.Raw(), true, false)
		if err != nil {
			return err
		}
		msg := &nats.Msg{Subject: ns.DB + "." + ns.Coll + "." + string(ev.OperationType()), Data: payload, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		_, err = js.PublishMsg(ctx, msg)
		return err
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
