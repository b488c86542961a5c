package rabbitmqsink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// contractMax is the MaxMessageSize of the contract's publishers: TooLarge exceeds it.
// (TestBrokerRefusesOverMaxMessageSize covers the broker's own refusal.)
const contractMax = 64 << 10

func TestContract(t *testing.T) {
	url := brokerURL(t)
	sinktest.Run(t, sinktest.Broker{
		New: func(t *testing.T, root string) (sink.Publisher, func(*testing.T) []sinktest.Received) {
			ch := admin(t, url)
			q := destination(t, ch, root)
			p := newPublisher(t, rabbitmqsink.Options{URL: url, Exchange: root, MaxMessageSize: contractMax})
			// The suite reads what the destination holds, every time from the start; a queue
			// hands each message out once, so the reads accumulate.
			var held []sinktest.Received
			return p, func(t *testing.T) []sinktest.Received {
				held = append(held, readAll(t, ch, q)...)
				return held
			}
		},
		// The broker is gone for this client: its connection went through a proxy that stopped.
		Down: func(t *testing.T) sink.Publisher {
			px := newProxy(t, hostPort(t, url))
			p := newPublisher(t, rabbitmqsink.Options{URL: viaProxy(t, url, px), DialTimeout: time.Second})
			px.Stop()
			return p
		},
		TooLarge: contractMax + 1,
		Dedups:   false, // RabbitMQ keeps a republished message: consumers deduplicate by message-id
	})
}

// hostPort is the broker's address in url.
func hostPort(t testing.TB, url string) string {
	t.Helper()
	u, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", u.Host, u.Port)
}

// viaProxy is url with its address replaced by the proxy's.
func viaProxy(t testing.TB, url string, px *proxy) string {
	t.Helper()
	u, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(url, fmt.Sprintf("%s:%d", u.Host, u.Port), px.addr(), 1)
}

func uniqueRoot(prefix string) string { return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e12) }

// TestUnroutableIsRetryable: a routing key no queue is bound for comes back (mandatory): a
// retryable ErrUnroutable naming the routing key; once a queue is bound the same event
// publishes.
func TestUnroutableIsRetryable(t *testing.T) {
	url := brokerURL(t)
	ch := admin(t, url)
	root := uniqueRoot("wtrmqunroutable")
	if err := ch.ExchangeDeclare(root, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(root, false, false) })
	p := newPublisher(t, rabbitmqsink.Options{URL: url, Exchange: root})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := sinktest.PublishOne(t, ctx, p, root, 0)
	if err == nil || watchtree.IsPermanent(err) || !errors.Is(err, rabbitmqsink.ErrUnroutable) || !strings.Contains(err.Error(), root+".c.insert") {
		t.Fatalf("an unroutable publish gave %v, want a retryable ErrUnroutable naming the routing key", err)
	}
	t.Logf("unroutable: %v", err)
	q := destination(t, ch, root+"x") // a queue, bound below to root's keys
	if err := ch.QueueBind(q, root+".#", root, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := sinktest.PublishOne(t, ctx, p, root, 0); err != nil {
		t.Fatalf("after a queue was bound: %v", err)
	}
	if got := readAll(t, ch, q); len(got) != 1 {
		t.Fatalf("the queue holds %d messages, want 1", len(got))
	}
}

// TestBrokerRefusesOverMaxMessageSize: with the client-side check off, a payload over the
// broker's max_message_size (128 MiB by default) is refused by the broker (it closes the
// channel with 406): a permanent sink.ErrTooLarge carrying the broker's reason, and the
// publisher reconnects for the next event.
func TestBrokerRefusesOverMaxMessageSize(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 128 MiB")
	}
	url := brokerURL(t)
	ch := admin(t, url)
	root := uniqueRoot("wtrmqmax")
	q := destination(t, ch, root)
	p := newPublisher(t, rabbitmqsink.Options{URL: url, Exchange: root, MaxMessageSize: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Other lanes publish small events meanwhile: the broker's channel close nacks whatever of
	// theirs is outstanding, which must come back retryable (only the oversized event is too
	// large), and they go on once the publisher reconnected.
	others, stopOthers := context.WithCancel(ctx)
	otherErr := make(chan error, 1)
	go func() {
		defer close(otherErr)
		for others.Err() == nil {
			if err := sinktest.PublishOne(t, ctx, p, root, 0); err != nil && watchtree.IsPermanent(err) {
				otherErr <- err
				return
			}
		}
	}()
	err := sinktest.PublishOne(t, ctx, p, root, rabbitmqsink.DefaultMaxMessageSize+1)
	stopOthers()
	if oe := <-otherErr; oe != nil {
		t.Fatalf("a small event published beside the oversized one failed permanently: %v", oe)
	}
	if !watchtree.IsPermanent(err) || !errors.Is(err, sink.ErrTooLarge) || !strings.Contains(err.Error(), "max size") {
		t.Fatalf("a payload over max_message_size gave %v, want a permanent sink.ErrTooLarge with the broker's reason", err)
	}
	t.Logf("broker refused: %v", err)
	if _, err := ch.QueuePurge(q, false); err != nil { // the small events published meanwhile
		t.Fatal(err)
	}
	if err := sinktest.PublishOne(t, ctx, p, root, 0); err != nil {
		t.Fatalf("the event after: %v", err)
	}
	if got := readAll(t, ch, q); len(got) != 1 || len(got[0].Payload) > 1<<20 {
		t.Fatalf("the queue holds %d messages, want only the (small) event after", len(got))
	}
}

// TestReconnectsAfterConnectionLoss: the connection is cut under the publisher (the broker
// stays up): a publish on the dead connection fails retryably or succeeds on a new one, and
// within a deadline a publish succeeds again on a new connection.
func TestReconnectsAfterConnectionLoss(t *testing.T) {
	url := brokerURL(t)
	ch := admin(t, url)
	root := uniqueRoot("wtrmqreconnect")
	q := destination(t, ch, root)
	px := newProxy(t, hostPort(t, url))
	p := newPublisher(t, rabbitmqsink.Options{URL: viaProxy(t, url, px), Exchange: root, ConfirmTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := sinktest.PublishOne(t, ctx, p, root, 0); err != nil {
		t.Fatal(err)
	}
	px.Cut()
	var failures int
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := sinktest.PublishOne(t, ctx, p, root, 0)
		if err == nil {
			break
		}
		if watchtree.IsPermanent(err) {
			t.Fatalf("a lost connection gave a permanent error: %v", err)
		}
		failures++
		t.Logf("after the cut: %v", err)
		if time.Now().After(deadline) {
			t.Fatalf("no publish succeeded within 10s of the cut (%d failures)", failures)
		}
	}
	got := readAll(t, ch, q)
	if len(got) != 2 {
		t.Fatalf("the queue holds %d messages, want 2 (before and after the cut)", len(got))
	}
	t.Logf("reconnected after %d retryable failures", failures)
}

func TestNewValidates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, c := range []struct {
		o     rabbitmqsink.Options
		field string
	}{
		{rabbitmqsink.Options{}, "URL"},
		{rabbitmqsink.Options{URL: "http://x"}, "URL"},
		{rabbitmqsink.Options{URL: defaultURL, ConfirmTimeout: -1}, "ConfirmTimeout"},
		{rabbitmqsink.Options{URL: defaultURL, DialTimeout: -1}, "DialTimeout"},
	} {
		_, err := rabbitmqsink.New(ctx, c.o)
		var ce *watchtree.ConfigError
		if !errors.As(err, &ce) || ce.Field != "rabbitmqsink.Options."+c.field {
			t.Errorf("New(%+v) = %v, want a ConfigError on Options.%s", c.o, err, c.field)
		}
	}
	url := brokerURL(t)
	_, err := rabbitmqsink.New(ctx, rabbitmqsink.Options{URL: url, Exchange: uniqueRoot("wtrmqnosuchexchange")})
	var ce *watchtree.ConfigError
	if !errors.As(err, &ce) || ce.Field != "rabbitmqsink.Options.Exchange" {
		t.Fatalf("New with a missing exchange = %v, want a ConfigError on Options.Exchange", err)
	}
	t.Logf("missing exchange: %v", err)
}
