// Package natssink is the NATS JetStream sink (import path github.com/watchtree/watchtree/sink/nats):
// a sink.Publisher on nats.go's jetstream package. Use it with sink.Handler:
//
//	js, _ := jetstream.New(nc)
//	p, err := natssink.New(js)
//	h, err := sink.Handler[bson.Raw](p, sink.Options{}) // subjects "{db}.{coll}.{op}"
//	rt.Spawn(ctx, watchtree.Stream[bson.Raw]{Name: "orders-relay", Collection: "orders", Lanes: 8, OnChange: h})
//
// Each event is one JetStream message on the subject of sink.Options.Subject, which a stream of
// the JetStream server must take (create it first: a subject no stream takes is refused, and
// that is a retryable error). The message carries:
//   - the header Nats-Msg-Id = the event ID. JetStream drops a message whose Nats-Msg-Id it has
//     seen within the stream's duplicate window (StreamConfig.Duplicates, 2 minutes by
//     default) and acknowledges it as a duplicate: an event republished after a crash or a
//     retry within the window is stored once. Past the window (a stream stopped longer than
//     that, a dead letter replayed later) it is stored again, and consumers that need
//     exactly-once effects deduplicate by Nats-Msg-Id themselves;
//   - the header Watchtree-Key (KeyHeader) = the document key as canonical Extended JSON;
//   - the payload of sink.Options (canonical Extended JSON of the change event by default).
//
// Publish waits for the stream's PubAck: the message is then stored (on disk with file
// storage, and on a quorum of replicas for a replicated stream) before the handler returns and
// the event settles. It waits up to ctx's deadline or, when ctx has none (a handler's context
// has none), the JetStream's default timeout (jetstream.WithDefaultTimeout, 5 s); a timeout,
// a lost connection or a refusal is a retryable error. A message over the server's max_payload
// (1 MiB by default) or the stream's MaxMsgSize is a watchtree.Permanent error wrapping
// sink.ErrTooLarge with the reason. A subject that is not a valid NATS subject (from a
// namespace with a space, '*' or '>') is a watchtree.Permanent error too: the event is
// dead-lettered; choose a template without that part of the namespace for such collections.
//
// JetStream keeps one order per stream: a key's events, published one after the other by its
// lane, are stored in that order. A pull consumer shared by several workers hands messages out
// without key affinity, so workers that must apply one key's events in order compare stream
// sequences (jetstream.Msg.Metadata) or partition subjects, one consumer per partition.
package natssink

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
)

// KeyHeader is the header that carries sink.Message.Key, the document key as canonical
// Extended JSON; absent for events without a document key.
const KeyHeader = "Watchtree-Key"

// Publisher publishes sink messages to JetStream and waits for each PubAck. It is safe for
// concurrent use.
type Publisher struct {
	js jetstream.JetStream
}

var _ sink.Publisher = (*Publisher)(nil)

// New returns a Publisher on js. It fails with a *watchtree.ConfigError for a nil js.
func New(js jetstream.JetStream) (*Publisher, error) {
	if js == nil {
		return nil, &watchtree.ConfigError{Field: "natssink.New js", Rule: "must not be nil"}
	}
	return &Publisher{js: js}, nil
}

// Publish sends m with Nats-Msg-Id = m.ID and returns once the stream acknowledged it (a
// duplicate's ack included: the stream already holds it). See the package doc for the errors.
func (p *Publisher) Publish(ctx context.Context, m *sink.Message) error {
	msg := &nats.Msg{Subject: m.Subject, Data: m.Payload, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	if m.Key != "" {
		msg.Header.Set(KeyHeader, m.Key)
	}
	_, err := p.js.PublishMsg(ctx, msg)
	if err == nil {
		return nil
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return watchtree.Permanent(fmt.Errorf("%w: natssink: %d bytes of payload and headers to %q: %v (the server's max_payload is %d bytes)",
			sink.ErrTooLarge, len(m.Payload), m.Subject, err, p.js.Conn().MaxPayload()))
	}
	if errors.Is(err, nats.ErrBadSubject) {
		return watchtree.Permanent(fmt.Errorf("natssink: event %s: %q is not a valid NATS subject (a namespace with a space, '*' or '>' in sink.Options.Subject?): %w",
			m.ID, m.Subject, err))
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return watchtree.Permanent(fmt.Errorf("%w: natssink: %d bytes of payload to %q: %v (the stream's MaxMsgSize)",
			sink.ErrTooLarge, len(m.Payload), m.Subject, err))
	}
	return fmt.Errorf("natssink: publish event %s to %q: %w", m.ID, m.Subject, err)
}
