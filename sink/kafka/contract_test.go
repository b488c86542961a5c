package kafkasink_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// topics is the contract's destination: a Publisher that creates each topic (one partition,
// so that the topic's offsets are the broker's one order) before its first record, and
// remembers the order in which topics were first acknowledged (Kafka has no order across
// topics: read returns the topics in that order, each in offset order).
type topics struct {
	t       *testing.T
	p       *kafkasink.Publisher
	adm     *kadm.Client
	brokers []string

	mu    sync.Mutex
	made  map[string]bool
	order []string
}

func (d *topics) Publish(ctx context.Context, m *sink.Message) error {
	d.mu.Lock()
	if kafkasink.ValidTopic(m.Subject) == nil && !d.made[m.Subject] {
		createTopic(d.t, d.adm, m.Subject, 1)
		d.made[m.Subject] = true
	}
	d.mu.Unlock()
	err := d.p.Publish(ctx, m)
	if err == nil {
		d.mu.Lock()
		if !contains(d.order, m.Subject) {
			d.order = append(d.order, m.Subject)
		}
		d.mu.Unlock()
	}
	return err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (d *topics) read(t *testing.T) []sinktest.Received {
	d.mu.Lock()
	order := append([]string(nil), d.order...)
	d.mu.Unlock()
	var out []sinktest.Received
	for _, topic := range order {
		for _, r := range readTopic(t, d.brokers, d.adm, topic) {
			out = append(out, sinktest.Received{ID: header(r, kafkasink.EventIDHeader), Key: string(r.Key), Subject: r.Topic, Payload: r.Value})
		}
	}
	return out
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestContract(t *testing.T) {
	sinktest.Run(t, sinktest.Broker{
		New: func(t *testing.T, root string) (sink.Publisher, func(*testing.T) []sinktest.Received) {
			brokers := cluster(t)
			d := &topics{t: t, p: publisher(t, kafkasink.Options{Brokers: brokers}), adm: admin(t, brokers), brokers: brokers, made: map[string]bool{}}
			return d, d.read
		},
		// Nothing listens at the seed broker: every publish times out (Timeout 1 s), retryably.
		Down: func(t *testing.T) sink.Publisher {
			return publisher(t, kafkasink.Options{Brokers: []string{closedAddr(t)}, Timeout: time.Second})
		},
		// Over the client's default ProducerBatchMaxBytes (1,000,012 bytes), as over a broker's
		// default max.message.bytes (1 MiB).
		TooLarge: 2 << 20,
		// Kafka keeps a second record with the same event ID (the idempotent producer
		// deduplicates the client's own resends only, not a republish).
		Dedups: false,
	})
}

// publishOne makes the handler for p (template subject) and publishes one insert into db.coll.
func publishOne(t *testing.T, ctx context.Context, p sink.Publisher, subject, db, coll string) error {
	t.Helper()
	h, err := sink.Handler[bson.Raw](p, sink.Options{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: db, Coll: coll}, DocumentKey: bson.D{{Key: "_id", Value: 1}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	return h(ctx, ev)
}

// TestInvalidTopicIsPermanent: a collection name with a space or a '/' in a template makes no
// Kafka topic: a permanent error naming the topic, and nothing is sent (the seed broker is
// never dialled: the error is immediate even with nothing listening).
func TestInvalidTopicIsPermanent(t *testing.T) {
	p := publisher(t, kafkasink.Options{Brokers: []string{closedAddr(t)}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, c := range []struct{ subject, coll, topic string }{
		{"{db}.{coll}", "my orders", "shop.my orders"},
		{"{db}/{coll}", "orders", "shop/orders"},
		{"{db}.{coll}", strings.Repeat("c", 250), "shop." + strings.Repeat("c", 250)},
	} {
		start := time.Now()
		err := publishOne(t, ctx, p, c.subject, "shop", c.coll)
		if !watchtree.IsPermanent(err) || !strings.Contains(err.Error(), `"`+c.topic+`"`) || !strings.Contains(err.Error(), "not a valid Kafka topic") {
			t.Errorf("subject %q over coll %.20q gave %v, want a permanent error naming the topic", c.subject, c.coll, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the invalid topic took %v to refuse: it was sent", d)
		}
	}
}

func TestValidTopic(t *testing.T) {
	for s, ok := range map[string]bool{"shop.orders.insert": true, "a_b-C9": true, strings.Repeat("x", 249): true,
		"": false, ".": false, "..": false, "a/b": false, "a b": false, "a$b": false, "é": false, strings.Repeat("x", 250): false} {
		if err := kafkasink.ValidTopic(s); (err == nil) != ok {
			t.Errorf("ValidTopic(%.30q) = %v, want valid %v", s, err, ok)
		}
	}
}

// TestNewValidates: each bad option is refused with a ConfigError naming its field.
func TestNewValidates(t *testing.T) {
	for _, c := range []struct {
		o     kafkasink.Options
		field string
	}{
		{kafkasink.Options{}, "kafkasink.Options.Brokers"},
		{kafkasink.Options{Brokers: []string{"localhost"}}, "kafkasink.Options.Brokers"},
		{kafkasink.Options{Brokers: []string{"127.0.0.1:9092"}, Timeout: -time.Second}, "kafkasink.Options.Timeout"},
		{kafkasink.Options{Brokers: []string{"127.0.0.1:9092"}, ClientOpts: []kgo.Opt{kgo.DisableIdempotentWrite()}}, "kafkasink.Options.ClientOpts"},
		{kafkasink.Options{Brokers: []string{"127.0.0.1:9092"}, ClientOpts: []kgo.Opt{kgo.AllowIdempotentProduceCancellation()}}, "kafkasink.Options.ClientOpts"},
		{kafkasink.Options{Brokers: []string{"127.0.0.1:9092"}, ClientOpts: []kgo.Opt{kgo.TransactionalID("x")}}, "kafkasink.Options.ClientOpts"},
	} {
		p, err := kafkasink.New(c.o)
		var ce *watchtree.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			if p != nil {
				p.Close()
			}
			t.Errorf("New(%+v) = %v, want a ConfigError for %s", c.o, err, c.field)
		}
	}
}

// TestBrokerRefusesTooLarge: a record under the client's limit but over the topic's
// max.message.bytes is refused by the broker (MESSAGE_TOO_LARGE): a permanent sink.ErrTooLarge
// with the broker's reason, and the next record publishes.
func TestBrokerRefusesTooLarge(t *testing.T) {
	brokers := cluster(t)
	adm := admin(t, brokers)
	topic := "wtkafkamax" + strings.ReplaceAll(t.Name(), "/", "")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	limit := "65536"
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &limit}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic) })
	p := publisher(t, kafkasink.Options{Brokers: brokers, ClientOpts: []kgo.Opt{kgo.ProducerBatchMaxBytes(4 << 20)}})
	big := make([]byte, 100<<10)
	_, _ = rand.Read(big) // incompressible: the broker sees more than 64 KiB
	err = p.Publish(ctx, &sink.Message{ID: "e1", Key: "k", Subject: topic, Payload: big})
	if !watchtree.IsPermanent(err) || !errors.Is(err, sink.ErrTooLarge) || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("a 100 KiB record to a topic of max.message.bytes 65536 gave %v, want a permanent sink.ErrTooLarge with the broker's MESSAGE_TOO_LARGE", err)
	}
	t.Logf("broker refusal: %v", err)
	if err := p.Publish(ctx, &sink.Message{ID: "e2", Key: "k", Subject: topic, Payload: []byte("small")}); err != nil {
		t.Fatalf("the record after the too-large one: %v", err)
	}
	if got := readTopic(t, brokers, adm, topic); len(got) != 1 || string(got[0].Value) != "small" {
		t.Fatalf("the topic holds %d records, want only the small one", len(got))
	}
}
