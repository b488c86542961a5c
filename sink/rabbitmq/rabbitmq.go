// Package rabbitmqsink is the RabbitMQ sink (import path github.com/watchtree/watchtree/sink/rabbitmq):
// a sink.Publisher on amqp091-go with publisher confirms. Use it with sink.Handler:
//
//	p, err := rabbitmqsink.New(ctx, rabbitmqsink.Options{URL: "amqp://guest:guest@127.0.0.1:5672/", Exchange: "cdc"})
//	defer p.Close()
//	h, err := sink.Handler[bson.Raw](p, sink.Options{}) // routing keys "{db}.{coll}.{op}"
//	rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "orders-relay", Collection: "orders", Lanes: 8, OnChange: h})
//
// Each event is one AMQP message published to Options.Exchange with the routing key of
// sink.Options.Subject (a topic exchange binds queues by patterns such as "shop.orders.*"). The
// message carries:
//   - the property message-id = the event ID. RabbitMQ does not deduplicate: an event
//     republished after a crash before its checkpoint, or after a lost confirm, is delivered
//     again, with the same message-id, and consumers that need exactly-once effects deduplicate
//     by it (delivery is at least once);
//   - the header Watchtree-Key (KeyHeader) = the document key as canonical Extended JSON;
//   - delivery mode persistent (2), so a durable queue keeps it across a broker restart;
//   - the payload of sink.Options (canonical Extended JSON of the change event by default).
//
// Publish publishes with the mandatory flag on a channel in confirm mode and waits for the
// broker's confirm of that very publish (amqp091's DeferredConfirmation): for a persistent
// message routed to durable queues, RabbitMQ confirms once every queue has it on disk (a
// quorum queue: on a quorum of its replicas). The event settles only then. Failures:
//   - a nack, a timeout (ctx's deadline or, when ctx has none, Options.ConfirmTimeout), a
//     connection or channel that closed, or a broker that cannot be reached: a retryable
//     error. The publisher drops a closed connection and dials a new one on the next Publish;
//   - an unroutable message (no queue is bound for its routing key; the broker returns it,
//     basic.return, before it confirms): a retryable error wrapping ErrUnroutable. Retryable
//     because the usual cause is a queue not declared or bound yet, which deploying the
//     consumers fixes; the stream's RetryPolicy then dead-letters it if no queue appears;
//   - a message over Options.MaxMessageSize, or one the broker refuses for its size (it
//     closes the channel with 406 PRECONDITION_FAILED, "message size ... is larger than
//     configured max size ..."): a watchtree.Permanent error wrapping sink.ErrTooLarge with the
//     reason: the event is dead-lettered and the stream goes on.
//
// Order: one channel carries every publish, and a key's events are published one after the
// other by its lane, so a queue holds a key's events in order. A queue read by several
// competing consumers hands messages out without key affinity: per-key order on the consumer
// side needs one consumer per queue, or a consistent-hash exchange
// (rabbitmq_consistent_hash_exchange) with one queue per consumer, hashed on the routing key or
// on the Watchtree-Key header (the exchange's hash-header argument).
package rabbitmqsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// KeyHeader is the header that carries sink.Message.Key, the document key as canonical
// Extended JSON; absent for events without a document key.
const KeyHeader = "Watchtree-Key"

// DefaultMaxMessageSize is Options.MaxMessageSize when it is 0: 128 MiB, RabbitMQ's default
// max_message_size (rabbitmq.conf max_message_size; the hard ceiling is 512 MiB).
const DefaultMaxMessageSize = 128 << 20

// defaultConfirmTimeout is Options.ConfirmTimeout when it is 0.
const defaultConfirmTimeout = 5 * time.Second

// defaultDialTimeout is Options.DialTimeout when it is 0.
const defaultDialTimeout = 5 * time.Second

// ErrUnroutable is wrapped by Publish's error for a message the broker returned as unroutable
// (no queue bound for its routing key on the exchange). It is retryable.
var ErrUnroutable = errors.New("rabbitmqsink: message unroutable (no queue bound for its routing key)")

// Options configures a Publisher.
type Options struct {
	// URL is the AMQP URL, for example amqp://guest:guest@127.0.0.1:5672/. Required.
	URL string
	// Exchange is the exchange every message is published to. It must exist when New is called
	// (New checks it with a passive declare); the empty name is the default exchange, which
	// routes a message to the queue named by its routing key. Default "" (the default
	// exchange).
	Exchange string
	// MaxMessageSize is the largest payload, in bytes, that Publish sends: a larger one is a
	// permanent sink.ErrTooLarge error without a round trip. Set it to the broker's
	// max_message_size when that is not the default. 0 means DefaultMaxMessageSize; negative
	// means no check in the client (the broker's refusal still maps to sink.ErrTooLarge).
	MaxMessageSize int
	// ConfirmTimeout bounds the wait for a publish's confirm when Publish's ctx has no
	// deadline (a handler's context has none). 0 means 5 s. Must not be negative.
	ConfirmTimeout time.Duration
	// DialTimeout bounds a connection attempt (TCP and the AMQP handshake). 0 means
	// 5 s. Must not be negative.
	DialTimeout time.Duration
}

// Publisher publishes sink messages to RabbitMQ and waits for each publisher confirm. It is safe
// for concurrent use; all publishes share one connection and one confirm-mode channel, which a
// goroutine of the publisher watches (it ends when the connection closes, or on Close). Close it
// when done.
type Publisher struct {
	o Options

	mu     sync.Mutex // guards cur and closed; held while dialling
	cur    *session
	closed bool
}

var _ sink.Publisher = (*Publisher)(nil)

// session is one connection and its confirm-mode channel, with the goroutine that owns them.
type session struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	done    chan struct{} // closed when the owner goroutine returned

	mu       sync.Mutex
	returned map[string]int // message-id → returns not yet matched to a publish
	err      *amqp.Error    // why the channel or connection closed, once it did
}

// New validates o, connects, opens a confirm-mode channel and checks that o.Exchange exists.
// It fails with a *watchtree.ConfigError naming the field for a bad option or a missing
// exchange, and with the connection's error when the broker cannot be reached within
// o.DialTimeout or ctx.
func New(ctx context.Context, o Options) (*Publisher, error) {
	if o.URL == "" {
		return nil, &watchtree.ConfigError{Field: "rabbitmqsink.Options.URL", Rule: "must not be empty"}
	}
	if _, err := amqp.ParseURI(o.URL); err != nil {
		return nil, &watchtree.ConfigError{Field: "rabbitmqsink.Options.URL", Rule: "must be an AMQP URL: " + err.Error()}
	}
	if o.ConfirmTimeout < 0 {
		return nil, &watchtree.ConfigError{Field: "rabbitmqsink.Options.ConfirmTimeout", Rule: "must not be negative"}
	}
	if o.DialTimeout < 0 {
		return nil, &watchtree.ConfigError{Field: "rabbitmqsink.Options.DialTimeout", Rule: "must not be negative"}
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.ConfirmTimeout == 0 {
		o.ConfirmTimeout = defaultConfirmTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = defaultDialTimeout
	}
	p := &Publisher{o: o}
	s, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	if o.Exchange != "" {
		// A passive declare fails (and closes the channel) when the exchange does not exist.
		if err := s.ch.ExchangeDeclarePassive(o.Exchange, "", false, false, false, false, nil); err != nil {
			s.close()
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return nil, &watchtree.ConfigError{Field: "rabbitmqsink.Options.Exchange",
					Rule: fmt.Sprintf("must name an existing exchange (declare %q first): %v", o.Exchange, err)}
			}
			return nil, fmt.Errorf("rabbitmqsink: check exchange %q: %w", o.Exchange, err)
		}
	}
	p.cur = s
	return p, nil
}

// dial opens a session: a connection, a channel in confirm mode with returns and closes
// watched, and its owner goroutine.
func (p *Publisher) dial(ctx context.Context) (*session, error) {
	cfg := amqp.Config{Dial: amqp.DefaultDial(p.o.DialTimeout), Properties: amqp.NewConnectionProperties()}
	cfg.Properties.SetClientConnectionName("watchtree-sink")
	type dialed struct {
		c   *amqp.Connection
		err error
	}
	res := make(chan dialed, 1)
	go func() { // bounded by DialTimeout; a late connection is closed below
		c, err := amqp.DialConfig(p.o.URL, cfg)
		res <- dialed{c, err}
	}()
	var conn *amqp.Connection
	select {
	case d := <-res:
		if d.err != nil {
			return nil, fmt.Errorf("rabbitmqsink: connect: %w", d.err)
		}
		conn = d.c
	case <-ctx.Done():
		go func() { // wait for the dial (at most DialTimeout) and close what it made
			if d := <-res; d.c != nil {
				_ = d.c.Close()
			}
		}()
		return nil, fmt.Errorf("rabbitmqsink: connect: %w", ctx.Err())
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmqsink: open a confirm-mode channel: %w", err)
	}
	s := &session{conn: conn, ch: ch, done: make(chan struct{}), returned: map[string]int{},
		returns: ch.NotifyReturn(make(chan amqp.Return, 256))}
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	go s.own(connClosed, chClosed)
	return s, nil
}

// own is the session's owner goroutine: when the channel or the connection closes (the broker
// closed it, the network failed, or Close), it records why and closes the connection, and
// returns.
func (s *session) own(connClosed, chClosed chan *amqp.Error) {
	defer close(s.done)
	var e *amqp.Error
	select {
	case e = <-connClosed:
	case e = <-chClosed:
	}
	if e == nil {
		e = &amqp.Error{Code: amqp.ChannelError, Reason: "closed"}
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = e
	}
	s.mu.Unlock()
	_ = s.conn.Close() // returns at once when it is already closed
}

// close closes the session's connection and waits for its owner goroutine.
func (s *session) close() {
	_ = s.conn.Close()
	<-s.done
}

// closeErr is why the session closed, or nil while it is open.
func (s *session) closeErr() *amqp.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// takeReturn moves every return the channel delivered into the map, then reports (and
// consumes) one for id. The broker sends a publish's basic.return before its basic.ack, and
// amqp091 hands the return to the buffered channel before it handles the ack, so a publisher
// that saw its ack finds its return here.
func (s *session) takeReturn(id string) (amqp.Return, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hit amqp.Return
	found := false
	for {
		select {
		case r, ok := <-s.returns:
			if !ok {
				goto drained
			}
			if !found && r.MessageId == id {
				hit, found = r, true
				continue
			}
			if len(s.returned) < 4096 { // returns whose publisher gave up are not kept forever
				s.returned[r.MessageId]++
			}
			continue
		default:
		}
		break
	}
drained:
	if !found && s.returned[id] > 0 {
		if s.returned[id]--; s.returned[id] == 0 {
			delete(s.returned, id)
		}
		return amqp.Return{MessageId: id, ReplyCode: amqp.NoRoute, ReplyText: "NO_ROUTE"}, true
	}
	return hit, found
}

// session returns the open session, dialling a new one when there is none or it closed.
func (p *Publisher) session(ctx context.Context) (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("rabbitmqsink: publisher closed")
	}
	if p.cur != nil && p.cur.closeErr() == nil && !p.cur.ch.IsClosed() {
		return p.cur, nil
	}
	if p.cur != nil {
		p.cur.close()
		p.cur = nil
	}
	s, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.cur = s
	return s, nil
}

// Close closes the connection and waits for the publisher's goroutine. Publishes after Close
// fail (retryably). Close is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.cur != nil {
		p.cur.close()
		p.cur = nil
	}
	return nil
}

// Publish sends m (message-id = m.ID, persistent, mandatory) and returns nil once the broker
// confirmed it. See the package doc for the errors.
func (p *Publisher) Publish(ctx context.Context, m *sink.Message) error {
	if p.o.MaxMessageSize > 0 && len(m.Payload) > p.o.MaxMessageSize {
		return watchtree.Permanent(fmt.Errorf("%w: rabbitmqsink: event %s: %d bytes of payload to %q (rabbitmqsink.Options.MaxMessageSize, the broker's max_message_size, is %d bytes)",
			sink.ErrTooLarge, m.ID, len(m.Payload), m.Subject, p.o.MaxMessageSize))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.o.ConfirmTimeout)
		defer cancel()
	}
	s, err := p.session(ctx)
	if err != nil {
		return fmt.Errorf("rabbitmqsink: publish event %s: %w", m.ID, err)
	}
	msg := amqp.Publishing{MessageId: m.ID, DeliveryMode: amqp.Persistent, Body: m.Payload, Timestamp: time.Now()}
	if m.Key != "" {
		msg.Headers = amqp.Table{KeyHeader: m.Key}
	}
	dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, p.o.Exchange, m.Subject, true, false, msg)
	if err != nil {
		return p.failed(s, m, err)
	}
	ack, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("rabbitmqsink: event %s to %q: no confirm: %w", m.ID, m.Subject, err)
	}
	if r, returned := s.takeReturn(m.ID); returned {
		return fmt.Errorf("%w: event %s to exchange %q with routing key %q: %d %s", ErrUnroutable, m.ID, p.o.Exchange, m.Subject, r.ReplyCode, r.ReplyText)
	}
	if !ack {
		// A nack, or the channel closed with the publish outstanding (amqp091 then nacks it).
		if s.ch.IsClosed() {
			return p.failed(s, m, amqp.ErrClosed)
		}
		return fmt.Errorf("rabbitmqsink: event %s to %q: the broker nacked it", m.ID, m.Subject)
	}
	return nil
}

// failed maps a publish that failed on s to the sink's errors: too large when the broker
// closed the channel for this message's size, retryable otherwise.
func (p *Publisher) failed(s *session, m *sink.Message, err error) error {
	if s.ch.IsClosed() {
		// The owner goroutine records why; wait for it (it runs as soon as the close is
		// delivered) so that the reason is the broker's.
		select {
		case <-s.done:
		case <-time.After(time.Second): // a bound, not a wait: done closes as soon as the close is handled
		}
		if ce := s.closeErr(); ce != nil {
			err = ce
		}
	}
	// The broker closes the channel for one message, and every publish outstanding on it comes
	// back nacked: only the one whose size the reason names is too large, the others retry.
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed &&
		strings.Contains(ae.Reason, fmt.Sprintf("message size %d is larger than", len(m.Payload))) {
		return watchtree.Permanent(fmt.Errorf("%w: rabbitmqsink: event %s: %d bytes of payload to %q: %v",
			sink.ErrTooLarge, m.ID, len(m.Payload), m.Subject, ae))
	}
	return fmt.Errorf("rabbitmqsink: publish event %s to %q: %w", m.ID, m.Subject, err)
}
