package rabbitmqsink_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestStreamToRabbitMQThenCompetingConsumers is sinktest's relay test into a durable queue
// bound to a topic exchange: the group is three competing consumers on the queue, each on its
// own connection and channel, with manual acks and prefetch 10. RabbitMQ does not deduplicate;
// on this run without failures a message-id received twice fails the test.
func TestStreamToRabbitMQThenCompetingConsumers(t *testing.T) {
	url := brokerURL(t)
	ach := admin(t, url)
	root := uniqueRoot("wtrmqe2e")
	q := destination(t, ach, root)
	sinktest.Relay{
		Start:     replicaSet,
		Root:      root,
		Publisher: newPublisher(t, rabbitmqsink.Options{URL: url, Exchange: root}),
		Consume: func(ctx context.Context, c int, deliver func(sinktest.Received)) error {
			conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
			if err != nil {
				return err
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			if err := ch.Qos(10, 0, false); err != nil {
				return err
			}
			deliveries, err := ch.Consume(q, fmt.Sprintf("consumer-%d", c), false, false, false, false, nil)
			if err != nil {
				return err
			}
			for {
				select {
				case <-ctx.Done():
					return nil
				case d, ok := <-deliveries:
					if !ok {
						return errors.New("the deliveries ended: the channel closed")
					}
					key, _ := d.Headers[rabbitmqsink.KeyHeader].(string)
					deliver(sinktest.Received{ID: d.MessageId, Key: key, Subject: d.RoutingKey, Payload: d.Body})
					if err := d.Ack(false); err != nil {
						return fmt.Errorf("ack: %w", err)
					}
				}
			}
		},
	}.Run(t)
}
