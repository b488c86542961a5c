package rabbitmqsink_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	rabbitmqsink "github.com/watchtree/watchtree/sink/rabbitmq"
	"github.com/watchtree/watchtree/sink/sinktest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// urlEnv overrides the RabbitMQ the tests use (default amqp://guest:guest@127.0.0.1:5672/, which
// the machine runs and .ci/run starts when it is down).
const urlEnv = "WATCHTREE_RABBITMQ_URL"

const defaultURL = "amqp://guest:guest@127.0.0.1:5672/"

const wait = 20 * time.Second

// brokerURL returns the test broker's URL. With WATCHTREE_RABBITMQ_URL unset and nothing
// answering on 127.0.0.1:5672 the test is skipped with the reason; with it set, a broker that
// does not answer fails the test where it is used.
func brokerURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(urlEnv); u != "" {
		return u
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:5672", 2*time.Second)
	if err != nil {
		t.Skipf("no RabbitMQ answers on 127.0.0.1:5672 (%v) and %s is unset: start rabbitmq-server (.ci/run does) or set %s", err, urlEnv, urlEnv)
	}
	_ = c.Close()
	return defaultURL
}

// admin opens a connection and channel for the test's own declarations and reads, closed when
// t ends.
func admin(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("RabbitMQ at %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// destination declares a topic exchange named root and a durable queue root+".q" bound to it
// with root+".#" (every routing key under root), both deleted when t ends.
func destination(t testing.TB, ch *amqp.Channel, root string) string {
	t.Helper()
	if err := ch.ExchangeDeclare(root, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange %s: %v", root, err)
	}
	q := root + ".q"
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatalf("declare queue %s: %v", q, err)
	}
	if err := ch.QueueBind(q, root+".#", root, false, nil); err != nil {
		t.Fatalf("bind queue %s: %v", q, err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(q, false, false, false)
		_ = ch.ExchangeDelete(root, false, false)
	})
	return q
}

// readAll takes every message the queue holds, in queue order (basic.get with auto-ack).
func readAll(t *testing.T, ch *amqp.Channel, q string) []sinktest.Received {
	t.Helper()
	var out []sinktest.Received
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatalf("get from %s: %v", q, err)
		}
		if !ok {
			return out
		}
		key, _ := d.Headers[rabbitmqsink.KeyHeader].(string)
		out = append(out, sinktest.Received{ID: d.MessageId, Key: key, Subject: d.RoutingKey, Payload: d.Body})
	}
}

// replicaSet starts a mongosim replica set for sinktest's Drill and Relay.
func replicaSet(ctx context.Context) (sinktest.ReplicaSet, error) {
	return mongosim.Start(ctx, mongosim.Options{})
}

func newPublisher(t testing.TB, o rabbitmqsink.Options) *rabbitmqsink.Publisher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p, err := rabbitmqsink.New(ctx, o)
	if err != nil {
		t.Fatalf("rabbitmqsink.New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// proxy is a TCP proxy on loopback to the broker, so a test can cut the connection (Cut) or
// take the broker away (Stop) without touching the broker. It owns its goroutines: Stop
// closes everything and waits for them.
type proxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Stop)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, b)
		go p.pipe(b, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut closes every proxied connection; new ones are still accepted.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Stop closes the listener and every connection, and waits for the proxy's goroutines.
func (p *proxy) Stop() {
	if err := p.l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	p.Cut()
	p.wg.Wait()
}
