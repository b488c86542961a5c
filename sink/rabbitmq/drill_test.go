package rabbitmqsink_test

import (
	"context"
	"testing"

	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// openDrillPublisher is a drill worker's publisher: the sink on its own connection to url,
// publishing to the exchange root.
func openDrillPublisher(ctx context.Context, url, root string) (sink.Publisher, func(), error) {
	p, err := rabbitmqsink.New(ctx, rabbitmqsink.Options{URL: url, Exchange: root})
	if err != nil {
		return nil, nil, err
	}
	return p, func() { _ = p.Close() }, nil
}

// TestSIGKILLDrill is sinktest's SIGKILL drill into a durable queue behind a topic exchange: 3
// kills under load, then, reading the queue as a consumer that deduplicates by message-id,
// every committed write is there, each document's versions in order; the duplicates (RabbitMQ
// keeps republished messages) are counted and bounded by what the workers republished.
func TestSIGKILLDrill(t *testing.T) {
	url := brokerURL(t)
	ach := admin(t, url)
	root := uniqueRoot("wtrmqdrill")
	q := destination(t, ach, root)
	sinktest.Drill{
		Start:  replicaSet,
		Root:   root,
		Broker: url,
		Count: func(t *testing.T) int64 {
			st, err := ach.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				t.Fatalf("queue %s: %v", q, err)
			}
			return int64(st.Messages)
		},
		Read: func(t *testing.T) []sinktest.Received { return readAll(t, ach, q) }, // basic.get takes each message once
	}.Run(t)
}
