package natssink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestStreamToJetStreamThenAConsumerGroup is sinktest's relay test into one JetStream stream:
// the group is three workers fetching from one durable pull consumer. Besides the group's view
// (every event once, by Nats-Msg-Id; each worker sees each key's events in order), the stream
// holds each key's events in order, and every stream sequence reached the group once.
func TestStreamToJetStreamThenAConsumerGroup(t *testing.T) {
	_, js := connect(t)
	root := fmt.Sprintf("wtnatse2e%d", time.Now().UnixNano()%1e9)
	stream := newStream(t, js, root, 0)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "group", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	p, err := natssink.New(js)
	if err != nil {
		t.Fatal(err)
	}
	sinktest.Relay{
		Start:     replicaSet,
		Root:      root,
		Publisher: p,
		Consume: func(ctx context.Context, _ int, deliver func(sinktest.Received)) error {
			for ctx.Err() == nil {
				batch, err := cons.Fetch(5, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					return fmt.Errorf("fetch: %w", err)
				}
				for m := range batch.Messages() {
					md, err := m.Metadata()
					if err != nil {
						return fmt.Errorf("metadata: %w", err)
					}
					deliver(sinktest.Received{ID: m.Headers().Get(jetstream.MsgIDHeader), Key: m.Headers().Get(natssink.KeyHeader),
						Subject: m.Subject(), Payload: m.Data(), Offset: int64(md.Sequence.Stream)})
					if err := m.Ack(); err != nil {
						return fmt.Errorf("ack: %w", err)
					}
				}
			}
			return nil
		},
		Stored: func(t *testing.T) []sinktest.Received { return readAll(t, stream) },
	}.Run(t)
}
