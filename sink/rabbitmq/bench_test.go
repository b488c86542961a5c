package rabbitmqsink_test

import (
	"context"
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
