package sink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	"github.com/watchtree/watchtree/sink/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memBroker is an in-memory broker with the contract's semantics: it stores a message before
// Publish returns, deduplicates by ID, and refuses payloads over max bytes.
type memBroker struct {
	mu   sync.Mutex
	max  int
	root string
	msgs []sinktest.Received
	ids  map[string]bool
}

func (b *memBroker) Publish(ctx context.Context, m *sink.Message) error {
	if len(m.Payload) > b.max {
		return watchtree.Permanent(fmt.Errorf("%w: %d bytes, the limit is %d", sink.ErrTooLarge, len(m.Payload), b.max))
	}
	if !strings.HasPrefix(m.Subject, b.root+".") {
		return fmt.Errorf("no destination for subject %q", m.Subject)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ids[m.ID] {
		b.ids[m.ID] = true
		b.msgs = append(b.msgs, sinktest.Received{ID: m.ID, Key: m.Key, Subject: m.Subject, Payload: m.Payload})
	}
	return nil
}

type downPublisher struct{}

func (downPublisher) Publish(context.Context, *sink.Message) error {
	return errors.New("connection refused")
}

// TestContractOnMemoryBroker runs the contract suite against the in-memory broker: the suite
// itself passes on a correct sink.
func TestContractOnMemoryBroker(t *testing.T) {
	sinktest.Run(t, sinktest.Broker{
		New: func(t *testing.T, root string) (sink.Publisher, func(*testing.T) []sinktest.Received) {
			b := &memBroker{max: 1 << 10, root: root, ids: map[string]bool{}}
			return b, func(*testing.T) []sinktest.Received {
				b.mu.Lock()
				defer b.mu.Unlock()
				return append([]sinktest.Received(nil), b.msgs...)
			}
		},
		Down:     func(*testing.T) sink.Publisher { return downPublisher{} },
		TooLarge: 1<<10 + 1,
		Dedups:   true,
	})
}

// gatedPublisher holds each Publish until release is closed.
type gatedPublisher struct {
	entered chan *sink.Message
	release chan struct{}
}

func (g *gatedPublisher) Publish(ctx context.Context, m *sink.Message) error {
	g.entered <- m
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestHandlerReturnsOnlyAfterTheAck: the handler does not return (the event does not settle)
// while the publisher waits for the broker's ack; a stopped stream's cancelled context returns
// the error, so the event stays unsettled.
func TestHandlerReturnsOnlyAfterTheAck(t *testing.T) {
	g := &gatedPublisher{entered: make(chan *sink.Message, 1), release: make(chan struct{})}
	h, err := sink.Handler[bson.Raw](g, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: "shop", Coll: "orders"},
		DocumentKey: bson.D{{Key: "_id", Value: 7}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h(ctx, ev) }()
	m := <-g.entered
	if m.ID != ev.ID() || m.Key != `{"_id":{"$numberInt":"7"}}` || m.Subject != "shop.orders.insert" {
		t.Errorf("message ID %q key %q subject %q; want %q, {\"_id\":{\"$numberInt\":\"7\"}}, shop.orders.insert", m.ID, m.Key, m.Subject, ev.ID())
	}
	select {
	case err := <-done:
		t.Fatalf("the handler returned (%v) before the publisher's ack", err)
	default:
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatalf("after the ack: %v", err)
	}

	// Cancelled while waiting: the error comes back, not nil.
	g2 := &gatedPublisher{entered: make(chan *sink.Message, 1), release: make(chan struct{})}
	h2, err := sink.Handler[bson.Raw](g2, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- h2(ctx2, ev) }()
	<-g2.entered
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a stop while waiting for the ack returned %v, want context.Canceled", err)
	}
}

// TestSubjectTemplate renders templates, with "_" for an empty value, and refuses bad ones
// naming the field.
func TestSubjectTemplate(t *testing.T) {
	cases := []struct {
		tmpl, want string
		te         watchtree.TestEvent[bson.Raw]
	}{
		{"", "shop.orders.update", watchtree.TestEvent[bson.Raw]{OperationType: watchtree.OpUpdate, Namespace: watchtree.Namespace{DB: "shop", Coll: "orders"}}},
		{"cdc.{db}.{coll}.{op}", "cdc.shop._.dropDatabase", watchtree.TestEvent[bson.Raw]{OperationType: watchtree.OpDropDatabase, Namespace: watchtree.Namespace{DB: "shop"}}},
		{"{stream}-{op}", "orders-stream-insert", watchtree.TestEvent[bson.Raw]{Stream: "orders-stream"}},
		{"fixed", "fixed", watchtree.TestEvent[bson.Raw]{}},
	}
	for _, c := range cases {
		var got string
		h, err := sink.Handler[bson.Raw](publishFunc(func(_ context.Context, m *sink.Message) error { got = m.Subject; return nil }), sink.Options{Subject: c.tmpl})
		if err != nil {
			t.Fatalf("%q: %v", c.tmpl, err)
		}
		ev, err := c.te.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("template %q: subject %q, want %q", c.tmpl, got, c.want)
		}
	}
	for _, bad := range []string{"{db", "{db}.{collection}", "a}b", "{}"} {
		_, err := sink.Handler[bson.Raw](downPublisher{}, sink.Options{Subject: bad})
		var ce *watchtree.ConfigError
		if !errors.As(err, &ce) || ce.Field != "sink.Options.Subject" || !errors.Is(err, watchtree.ErrInvalidConfig) {
			t.Errorf("template %q: got %v, want a ConfigError naming sink.Options.Subject", bad, err)
		}
	}
	if _, err := sink.Handler[bson.Raw](nil, sink.Options{}); !errors.Is(err, watchtree.ErrInvalidConfig) {
		t.Errorf("a nil Publisher: got %v, want a ConfigError", err)
	}
}

type publishFunc func(ctx context.Context, m *sink.Message) error

func (f publishFunc) Publish(ctx context.Context, m *sink.Message) error { return f(ctx, m) }

// TestNoDocumentKey: an event without a document key (drop) has an empty Key; the default
// payload is the whole event as canonical Extended JSON.
func TestNoDocumentKey(t *testing.T) {
	var got *sink.Message
	h, err := sink.Handler[bson.Raw](publishFunc(func(_ context.Context, m *sink.Message) error { got = m; return nil }), sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := watchtree.TestEvent[bson.Raw]{OperationType: watchtree.OpDrop, Namespace: watchtree.Namespace{DB: "a", Coll: "b"}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	want, _ := bson.MarshalExtJSON(ev.Raw(), true, false)
	if got.Key != "" || string(got.Payload) != string(want) || got.Operation != watchtree.OpDrop || got.Namespace.Coll != "b" {
		t.Errorf("got key %q payload %s op %s ns %v; want no key and %s", got.Key, got.Payload, got.Operation, got.Namespace, want)
	}
}
