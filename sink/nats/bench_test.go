package natssink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/sink/sinktest"
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
	publish := func(ev *watchtree.Event[bson.Raw], payload []byte) error {
		ns := ev.Namespace()
		msg := &nats.Msg{Subject: ns.DB + "." + ns.Coll + "." + string(ev.OperationType()), Data: payload, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		_, err := js.PublishMsg(ctx, msg)
		return err
	}
	sinktest.Throughput{
		Namespace: watchtree.Namespace{DB: root, Coll: "orders"},
		Sink:      h,
		Publish:   publish,
	}.Run(b)
}
