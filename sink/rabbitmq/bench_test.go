package rabbitmqsink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// BenchmarkRabbitMQSink measures events/s into one durable queue (through a topic exchange)
// through sink.Handler (canonical Extended JSON payload, message-id, key header, timestamp,
// persistent, mandatory, the confirm awaited) against two hand-written loops on their own
// connection and one confirm-mode channel that the 8 publishers share. The loop is the least a
// correct publisher does: per event, one publish of the raw BSON event as body with message-id
// and delivery mode persistent (no mandatory flag, no headers, no timestamp, no deadline), then
// it waits for that publish's deferred confirm before its next event (loop-events/s); loopjson
// is the same with the event encoded by bson.MarshalExtJSON (loopjson-events/s). The sink does
// the same per event: one publish on one confirm-mode channel, the next only after the confirm,
// so both have at most 8 publishes awaiting a confirm. All three run 8 concurrent publishers,
// as 8 lanes would, in turns within each round of the same run (the order rotates). The queue
// is purged after each turn (sinktest.Throughput: 5 turns of each per round, alternating). It reports the three rates, ratio (sink / loop) and
// ratio-same-payload (sink / loopjson). BenchmarkRabbitMQSinkFactors takes the gap apart.
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
	publish := func(ev *watchtree.Event[bson.Raw], body []byte) error {
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
	sinktest.Throughput{
		Namespace: watchtree.Namespace{DB: root, Coll: "orders"},
		Sink:      h,
		Publish:   publish,
		AfterRun: func(b *testing.B) {
			if _, err := ach.QueuePurge(q, false); err != nil {
				b.Fatal(err)
			}
		},
	}.Run(b)
}

// loopPublisher is a hand-written publisher behind sink.Handler, so that its events are encoded
// and routed exactly as the sink's are: it publishes m on the next of chs (round robin), with
// message-id, delivery mode persistent unless transient, and, with props, the sink's other
// properties (mandatory, the Watchtree-Key header, a timestamp); then waits for its deferred
// confirm. No context deadline, no return check, no reconnect.
type loopPublisher struct {
	chs       []*amqp.Channel
	exchange  string
	props     bool
	transient bool

	mu   sync.Mutex
	next int
}

func (l *loopPublisher) Publish(ctx context.Context, m *sink.Message) error {
	l.mu.Lock()
	ch := l.chs[l.next%len(l.chs)]
	l.next++
	l.mu.Unlock()
	msg := amqp.Publishing{MessageId: m.ID, DeliveryMode: amqp.Persistent, Body: m.Payload}
	if l.transient {
		msg.DeliveryMode = amqp.Transient
	}
	if l.props {
		msg.Timestamp = time.Now()
		msg.Headers = amqp.Table{rabbitmqsink.KeyHeader: m.Key}
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, l.exchange, m.Subject, l.props, false, msg)
	if err != nil {
		return err
	}
	if !dc.Wait() {
		return fmt.Errorf("event %s: nacked", m.ID)
	}
	return nil
}

// BenchmarkRabbitMQSinkFactors takes BenchmarkRabbitMQSink's gap apart: it runs, in rotating
// turns within each round of the same run, 8 concurrent publishers of 250 new events each through sink.Handler
// over six publishers, and reports each one's events/s and its ratio to "loop":
//   - loop: a loopPublisher of the raw BSON event on one channel (BenchmarkRabbitMQSink's
//     baseline);
//   - json: the same with the sink's payload (canonical Extended JSON, the sink's encoder): what
//     the payload's bytes cost the broker;
//   - props: json with the sink's other properties (mandatory, Watchtree-Key, timestamp);
//   - sink: the sink itself, the rest being its own code (deadline, return check, reconnect);
//   - loop8ch: loop over 8 channels, one per publisher: what one channel costs;
//   - transient: loop with delivery mode 1, not a fair baseline (the broker then confirms
//     without writing to disk): what persistence costs.
func BenchmarkRabbitMQSinkFactors(b *testing.B) {
	const publishers, perPublisher = 8, 250
	url := brokerURL(b)
	ach := admin(b, url)
	root := uniqueRoot("wtrmqfactors")
	q := destination(b, ach, root)
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	chs := make([]*amqp.Channel, publishers)
	for i := range chs {
		if chs[i], err = conn.Channel(); err != nil {
			b.Fatal(err)
		}
		if err := chs[i].Confirm(false); err != nil {
			b.Fatal(err)
		}
	}
	raw := func(r bson.Raw) ([]byte, error) { return r, nil }
	handler := func(p sink.Publisher, encode func(bson.Raw) ([]byte, error)) watchtree.Handler[bson.Raw] {
		h, err := sink.Handler[bson.Raw](p, sink.Options{Encode: encode})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	kinds := []struct {
		name string
		h    watchtree.Handler[bson.Raw]
	}{
		{"loop", handler(&loopPublisher{chs: chs[:1], exchange: root}, raw)},
		{"json", handler(&loopPublisher{chs: chs[:1], exchange: root}, nil)},
		{"props", handler(&loopPublisher{chs: chs[:1], exchange: root, props: true}, nil)},
		{"sink", handler(newPublisher(b, rabbitmqsink.Options{URL: url, Exchange: root}), nil)},
		{"loop8ch", handler(&loopPublisher{chs: chs, exchange: root}, raw)},
		{"transient", handler(&loopPublisher{chs: chs[:1], exchange: root, transient: true}, raw)},
	}
	ns := watchtree.Namespace{DB: root, Coll: "orders"}
	took := make([]time.Duration, len(kinds))
	b.ResetTimer()
	for i := range b.N {
		for j := range kinds {
			k := (i + j) % len(kinds) // rotate which goes first
			b.StopTimer()
			evs := make([][]*watchtree.Event[bson.Raw], publishers)
			for w := range evs {
				for n := range perPublisher {
					evs[w] = append(evs[w], benchEvent(b, ns, w*perPublisher+n))
				}
			}
			b.StartTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, mine := range evs {
				wg.Go(func() {
					for _, ev := range mine {
						if err := kinds[k].h(context.Background(), ev); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			took[k] += time.Since(start)
			b.StopTimer()
			if _, err := ach.QueuePurge(q, false); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	n := float64(b.N * publishers * perPublisher)
	for k, kind := range kinds {
		b.ReportMetric(n/took[k].Seconds(), kind.name+"-events/s")
		if k > 0 {
			b.ReportMetric(took[0].Seconds()/took[k].Seconds(), kind.name+"/loop")
		}
	}
}

// benchEvent is sinktest.Throughput's event: the insert of an order document with _id id.
func benchEvent(b *testing.B, ns watchtree.Namespace, id int) *watchtree.Event[bson.Raw] {
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "customer", Value: "c-1842"},
		{Key: "amount", Value: 129.5}, {Key: "status", Value: "new"}, {Key: "items", Value: bson.A{"sku-1", "sku-2", "sku-3"}}})
	if err != nil {
		b.Fatal(err)
	}
	raw := bson.Raw(doc)
	ev, err := watchtree.TestEvent[bson.Raw]{Namespace: ns, FullDocument: &raw}.Build()
	if err != nil {
		b.Fatal(err)
	}
	return ev
}
