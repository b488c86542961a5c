// Package sink hands change events to a message broker with the care a handler gets: a sink is
// a watchtree handler (Handler) that publishes each event through a Publisher and returns only
// once the broker has acknowledged it durably, so the event settles, and the checkpoint may
// pass it, only after the broker holds it.
//
// The contract every sink keeps (sink/sinktest checks it against each one):
//   - Settle after the ack. Publish returns nil only after the broker's durable
//     acknowledgement (JetStream's PubAck, RabbitMQ's publisher confirm, Kafka's acks=all); the
//     handler returns that result, so a crash before the ack redelivers the event.
//   - Deduplication key. Message.ID is the event's stable ID (watchtree.Event.ID, the same on
//     every redelivery); the Publisher puts it where the broker deduplicates (JetStream:
//     the Nats-Msg-Id header, within the stream's duplicate window).
//   - Message key. Message.Key is the document key, so the broker's partitioning keeps the
//     order of one document's events. The stream's lanes keep it on the way in: events of one
//     document key go through one lane, in order, each published only after the one before
//     was acknowledged; different keys publish concurrently, at most Stream.Lanes at a time
//     (the bound on publishes in flight).
//   - Subject. Message.Subject comes from Options.Subject, a template over the namespace and
//     the operation (default DefaultSubject).
//   - Payload. The change event as canonical Extended JSON (the whole event document, as the
//     server sent it), or what Options.Encode returns.
//   - Failures. A broker that is down or refuses a message makes Publish return an error: the
//     stream's RetryPolicy retries the event, and then dead-letters it, like any handler error.
//     A message too large for the broker is a watchtree.Permanent error wrapping ErrTooLarge
//     with the broker's reason: it is dead-lettered at once and the stream goes on.
package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
)

// DefaultSubject is the subject template of Options.Subject when it is empty:
// "{db}.{coll}.{op}", for example "shop.orders.insert".
const DefaultSubject = "{db}.{coll}.{op}"

// ErrTooLarge is wrapped, with the broker's reason, by a Publisher's error for a message the
// broker refuses for its size. Publishers mark that error watchtree.Permanent, so the event is
// dead-lettered at once (its reason names the limit) and the stream goes on.
var ErrTooLarge = errors.New("sink: message too large for the broker")

// Message is what a sink publishes for one event.
type Message struct {
	// ID is the event's stable ID (watchtree.Event.ID): the broker's deduplication key.
	ID string
	// Key is the document key ({"_id": ...} and, on a sharded collection, the shard key
	// fields) as canonical Extended JSON, for example {"_id":{"$numberInt":"7"}}: the message
	// key the broker partitions by. Empty for events without a document key (drop, rename,
	// dropDatabase, invalidate).
	Key string
	// Subject is the subject, topic or routing key, from Options.Subject.
	Subject string
	// Payload is the encoded event: canonical Extended JSON of the change event by default.
	Payload []byte
	// Namespace and Operation are the event's, for publishers that put them in headers.
	Namespace watchtree.Namespace
	Operation watchtree.OperationType
}

// Publisher publishes messages to one broker. Publish must return nil only once the broker has
// acknowledged m durably, and an error otherwise: a retryable one for a broker that is down,
// times out or refuses, a watchtree.Permanent one wrapping ErrTooLarge for a message too large.
// It is called concurrently (once per lane at most) and must be safe for that. It must honour
// ctx: the handler's context is cancelled when the stream stops.
type Publisher interface {
	// Publish sends m and returns nil once the broker acknowledged it durably; see the type.
	Publish(ctx context.Context, m *Message) error
}

// Options configures a sink handler. The zero value means every default.
type Options struct {
	// Subject is the subject (topic, routing key) template. Its placeholders are {db}, {coll},
	// {op} (the operation type, such as "insert") and {stream} (the stream's Name); every other
	// character is copied. A placeholder whose value is empty (the collection of a
	// dropDatabase event) renders as "_", so that no subject has an empty token. Default
	// DefaultSubject. A template with an unknown or unclosed placeholder is refused by
	// Handler.
	Subject string
	// Encode turns the change event document (watchtree.Event.Raw, as the server sent it) into
	// the payload. An Encode error is permanent: the event is dead-lettered at once. Default:
	// canonical Extended JSON, byte for byte what bson.MarshalExtJSON(raw, true, false) returns,
	// written by the package's single-pass encoder (several times faster than the driver's,
	// which goes through its reflective value writer); a malformed event is an error naming the
	// byte offset, so it is dead-lettered.
	Encode func(raw bson.Raw) ([]byte, error)
}

// Handler returns the handler of a sink: for each event it builds the Message (ID, Key,
// Subject, Payload) and returns p.Publish's result, so the event settles only after the broker's
// ack. Set it as the stream's OnChange (every operation) or as typed handlers. It fails fast
// with a *watchtree.ConfigError naming the field for a nil p or a bad Options.Subject.
func Handler[T any](p Publisher, o Options) (watchtree.Handler[T], error) {
	if p == nil {
		return nil, &watchtree.ConfigError{Field: "sink.Handler Publisher", Rule: "must not be nil"}
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	tmpl, err := parseSubject(o.Subject)
	if err != nil {
		return nil, &watchtree.ConfigError{Field: "sink.Options.Subject", Rule: err.Error()}
	}
	encode := o.Encode
	return func(ctx context.Context, ev *watchtree.Event[T]) error {
		m := &Message{ID: ev.ID(), Namespace: ev.Namespace(), Operation: ev.OperationType()}
		m.Subject = tmpl.render(m.Namespace, string(m.Operation), ev.Stream())
		if key := ev.DocumentKey(); key != nil {
			k, err := extjsonString(key)
			if err != nil {
				return watchtree.Permanent(fmt.Errorf("sink: document key as Extended JSON: %w", err))
			}
			m.Key = k
		}
		var err error
		if encode != nil {
			m.Payload, err = encode(ev.Raw())
		} else {
			m.Payload, err = marshalExtJSON(ev.Raw())
		}
		if err != nil {
			return watchtree.Permanent(fmt.Errorf("sink: encode event %s: %w", m.ID, err))
		}
		return p.Publish(ctx, m)
	}, nil
}

// subject is a parsed template: literal parts and placeholders, alternating.
type subject []part

type part struct {
	lit string
	ph  string // "db", "coll", "op", "stream"; empty for a literal
}

func parseSubject(s string) (subject, error) {
	var out subject
	for s != "" {
		i := strings.IndexAny(s, "{}")
		if i < 0 {
			out = append(out, part{lit: s})
			break
		}
		if s[i] == '}' {
			return nil, fmt.Errorf("has a '}' without '{' at %q", s[i:])
		}
		if i > 0 {
			out = append(out, part{lit: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("has an unclosed placeholder at %q", s[i:])
		}
		name := s[i+1 : i+j]
		switch name {
		case "db", "coll", "op", "stream":
		default:
			return nil, fmt.Errorf("has the unknown placeholder {%s} (known: {db}, {coll}, {op}, {stream})", name)
		}
		out = append(out, part{ph: name})
		s = s[i+j+1:]
	}
	return out, nil
}

func (t subject) render(ns watchtree.Namespace, op, stream string) string {
	var b strings.Builder
	for _, p := range t {
		v := p.lit
		switch p.ph {
		case "db":
			v = ns.DB
		case "coll":
			v = ns.Coll
		case "op":
			v = op
		case "stream":
			v = stream
		}
		if p.ph != "" && v == "" {
			v = "_"
		}
		b.WriteString(v)
	}
	return b.String()
}
