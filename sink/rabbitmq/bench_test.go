package rabbitmqsink_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
)

// BenchmarkRabbitMQSink measures events/s into one durable queue (through a topic exchange)
// through sink.Handler (canonical Extended JSON payload, message-id, key header, persistent,
// mandatory, the confirm awaited) against two hand-written loops on their own connection and
// confirm-mode channel: the least a correct publisher does (the raw BSON event as payload,
// message-id, persistent, the deferred confirm awaited: loop-events/s) and the same with the
// sink's payload, the event as canonical Extended JSON (loopjson-events/s). All three run 8
// concurrent publishers, as 8 lanes would, in turns within each round of the same run (the
// order rotates). The queue is purged after each round. It reports the three rates, ratio
// (sink / loop) and ratio-same-payload (sink / loopjson).
func BenchmarkRabbitMQSink(b *testing.B) {
	const publishers, perPublisher = 8, 250
	url := brokerURL(b)
	ach := admin(b, url)
	root := uniqueRoot("wtrmqbench")
	q := destination(b, ach, root)
	p := newPublisher(b, rabbitmqsink.Options{URL: url, Exchange: root})
	h, err := sink.Handler[bson.Raw](p, sink.Options{})
	if err != nil {
		b.Fatal(err)
	}
	lconn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	defer lconn.Close()
	lch, err := lconn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := lch.Confirm(false); err != nil {
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
	loopPublish := func(ev *watchtree.Event[bson.Raw], body []byte) error {
		ns := ev.Namespace()
		dc, err := lch.PublishWithDeferredConfirmWithContext(ctx, root, ns.DB+"."+ns.Coll+"."+string(ev.OperationType()), false, false,
			amqp.Publishing{MessageId: ev.ID(), DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			return err
		}
		if !dc.Wait() {
			return amqp.ErrClosed
		}
		return nil
	}
	loop := func(ev *watchtree.Event[bson.Raw]) error { return loopPublish(ev, ev.Raw()) }
	loopJSON := func(ev *watchtree.Event[bson.Raw]) error {
		payload, err := bson.MarshalExtJSON(ev.Raw(), true, false)
		if err != nil {
			return err
		}
		return loopPublish(ev, payload)
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
			b.StopTimer()
			if _, err := ach.QueuePurge(q, false); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
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
