// Package kafkasink is the Kafka sink (import path github.com/watchtree/watchtree/sink/kafka):
// a sink.Publisher on franz-go's kgo client with the idempotent producer and acks=all. Use it
// with sink.Handler:
//
//	p, err := kafkasink.New(kafkasink.Options{Brokers: []string{"127.0.0.1:9092"}})
//	defer p.Close()
//	h, err := sink.Handler[bson.Raw](p, sink.Options{}) // topics "{db}.{coll}.{op}"
//	rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "orders-relay", Collection: "orders", Lanes: 8, OnChange: h})
//
// Each event is one Kafka record:
//   - the topic is the subject of sink.Options.Subject, verbatim. A Kafka topic name is 1 to 249
//     characters of [a-zA-Z0-9._-] and not "." or "..": the default template "{db}.{coll}.{op}"
//     makes one for every namespace made of those characters. A subject that is not a valid
//     topic (a collection name with a space, '$' or '/', say) is a watchtree.Permanent error
//     naming the topic, checked before anything is sent: the event is dead-lettered; choose a
//     template without that part of the namespace for such collections. The topic must exist
//     (or the cluster must create topics on first use): a topic the cluster does not know is
//     retried by the client (UnknownTopicRetries, 4 metadata loads by default) and then is a
//     retryable error, since the topic may be created later;
//   - the key is the document key as canonical Extended JSON (sink.Message.Key), so the default
//     partitioner (murmur2 of the key, as the Java client's) sends every event of one document
//     to one partition; events without a document key have no key and are spread;
//   - the header watchtree-event-id (EventIDHeader) carries the event ID, the deduplication key for
//     consumers;
//   - the value is the payload of sink.Options (canonical Extended JSON of the change event by
//     default).
//
// Publish returns only after the partition's leader acknowledged the record with acks=all (all
// in-sync replicas hold it). The producer is idempotent (kgo's default, which New insists on):
// a produce request that the client resends after a lost response is stored once, so retries
// inside the client add no duplicates within one producer session (one Publisher). A new
// session (a process restarted after a crash, an event redelivered before its checkpoint
// moved) can publish the same event again: Kafka does not deduplicate across producer
// sessions, so consumers that need exactly-once effects deduplicate by watchtree-event-id.
//
// Order: the stream's lanes keep one document's events in one lane, each published only after
// the one before was acknowledged; the idempotent producer keeps per-partition order across
// its own retries; so each partition holds a key's events in order, and so does every
// consumer of a group (a partition is read by one member at a time). Order is per topic: the
// default template "{db}.{coll}.{op}" puts a document's insert, updates and delete in three
// topics, so use "{db}.{coll}" when consumers need all of a document's events in order.
//
// A record over the client's batch limit (ProducerBatchMaxBytes, 1,000,012 bytes by default)
// or refused by the broker for its size (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE: the
// topic's max.message.bytes) is a watchtree.Permanent error wrapping sink.ErrTooLarge with the
// reason. Every other failure (a broker down, a timeout, a leader moving, an unknown topic) is
// retryable.
package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// EventIDHeader is the record header that carries sink.Message.ID, the event ID: consumers
// deduplicate by it across producer sessions.
const EventIDHeader = "watchtree-event-id"

// defaultTimeout is Options.Timeout when it is zero (10 s).
const defaultTimeout = 10 * time.Second

// Options configures a Publisher. Brokers is required; the rest has defaults.
type Options struct {
	// Brokers are the seed brokers, each "host:port" (the client learns the rest of the
	// cluster from them). Required: at least one.
	Brokers []string
	// Timeout bounds one Publish, from the call to the ack (ctx's deadline, when earlier,
	// bounds it too). Past it Publish returns a retryable error; a
	// record already sent is not cancelled (that would break the idempotent producer's
	// deduplication), so Publish waits for its outcome. Default 10 s;
	// negative is refused.
	Timeout time.Duration
	// ClientOpts are more kgo options (TLS, SASL, ProducerLinger, ProducerBatchMaxBytes,
	// ...), applied after the package's own defaults (ProducerLinger(0): a lane waits for each
	// ack, so lingering only adds latency). kgo.SeedBrokers is taken from Brokers, acks are
	// always all in-sync replicas, and options that turn off idempotence
	// (kgo.DisableIdempotentWrite, kgo.AllowIdempotentProduceCancellation) or make the client
	// transactional are refused.
	ClientOpts []kgo.Opt
}

// Publisher publishes sink messages to Kafka and waits for each record's acks=all
// acknowledgement. It owns its kgo.Client: Close releases it. It is safe for concurrent use.
type Publisher struct {
	cl      *kgo.Client
	timeout time.Duration
}

var _ sink.Publisher = (*Publisher)(nil)

// New validates o and returns a Publisher with its own kgo.Client. It fails with a
// *watchtree.ConfigError naming the field for no Brokers, a broker address that is not
// "host:port", a negative Timeout or a ClientOpt that breaks the idempotent producer; and with
// kgo's error for options kgo itself refuses. New does not dial: a cluster that is down makes
// Publish fail (retryably), not New.
func New(o Options) (*Publisher, error) {
	if len(o.Brokers) == 0 {
		return nil, &watchtree.ConfigError{Field: "kafkasink.Options.Brokers", Rule: "must name at least one broker (host:port)"}
	}
	for _, b := range o.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, &watchtree.ConfigError{Field: "kafkasink.Options.Brokers", Rule: fmt.Sprintf("%q is not host:port", b)}
		}
	}
	if o.Timeout < 0 {
		return nil, &watchtree.ConfigError{Field: "kafkasink.Options.Timeout", Rule: fmt.Sprintf("must not be negative (got %v)", o.Timeout)}
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	opts := []kgo.Opt{kgo.ProducerLinger(0)}
	opts = append(opts, o.ClientOpts...)
	opts = append(opts, kgo.SeedBrokers(o.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkasink: %w", err)
	}
	for _, bad := range []struct {
		opt  any
		name string
	}{
		{kgo.DisableIdempotentWrite, "kgo.DisableIdempotentWrite"},
		{kgo.AllowIdempotentProduceCancellation, "kgo.AllowIdempotentProduceCancellation"},
	} {
		if v, _ := cl.OptValue(bad.opt).(bool); v {
			cl.Close()
			return nil, &watchtree.ConfigError{Field: "kafkasink.Options.ClientOpts",
				Rule: bad.name + " is refused: the sink relies on the idempotent producer"}
		}
	}
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		cl.Close()
		return nil, &watchtree.ConfigError{Field: "kafkasink.Options.ClientOpts",
			Rule: "kgo.TransactionalID is refused: the sink produces outside transactions"}
	}
	return &Publisher{cl: cl, timeout: o.Timeout}, nil
}

// Close closes the client: publishes still waiting fail (retryably) and later ones fail with
// kgo.ErrClientClosed. Call it after the streams that use the Publisher stopped.
func (p *Publisher) Close() { p.cl.Close() }

// ValidTopic reports why s is not a valid Kafka topic name (nil when it is): 1 to 249
// characters of [a-zA-Z0-9._-], and not "." or "..".
func ValidTopic(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > 249:
		return fmt.Errorf("is %d characters long (at most 249)", len(s))
	case s == "." || s == "..":
		return errors.New(`is "." or ".."`)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("has %q at byte %d (only [a-zA-Z0-9._-])", c, i)
		}
	}
	return nil
}

// Publish produces m to the topic m.Subject, key m.Key, with the event ID header, and returns
// once the record is acknowledged by all in-sync replicas. See the package doc for the errors.
func (p *Publisher) Publish(ctx context.Context, m *sink.Message) error {
	if err := ValidTopic(m.Subject); err != nil {
		return watchtree.Permanent(fmt.Errorf("kafkasink: event %s: the subject %q is not a valid Kafka topic: it %v (a namespace with such characters in sink.Options.Subject?)",
			m.ID, m.Subject, err))
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r := &kgo.Record{Topic: m.Subject, Value: m.Payload,
		Headers: []kgo.RecordHeader{{Key: EventIDHeader, Value: []byte(m.ID)}}}
	if m.Key != "" {
		r.Key = []byte(m.Key)
	}
	err := p.cl.ProduceSync(ctx, r).FirstErr()
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		return watchtree.Permanent(fmt.Errorf("%w: kafkasink: %d bytes of value and %d of key to topic %q: %v (the client's ProducerBatchMaxBytes or the topic's max.message.bytes)",
			sink.ErrTooLarge, len(m.Payload), len(m.Key), m.Subject, err))
	}
	return fmt.Errorf("kafkasink: publish event %s to topic %q: %w", m.ID, m.Subject, err)
}
