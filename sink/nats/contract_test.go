package natssink_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// streamMaxMsg is the MaxMsgSize of the contract's streams: TooLarge exceeds it, so the
// refusal is the stream's (a JetStream API error), under the server's max_payload.
const streamMaxMsg = 64 << 10

func publisher(t *testing.T, js jetstream.JetStream) *natssink.Publisher {
	t.Helper()
	p, err := natssink.New(js)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContract(t *testing.T) {
	sinktest.Run(t, sinktest.Broker{
		New: func(t *testing.T, root string) (sink.Publisher, func(*testing.T) []sinktest.Received) {
			_, js := connect(t)
			s := newStream(t, js, root, streamMaxMsg)
			return publisher(t, js), func(t *testing.T) []sinktest.Received { return readAll(t, s) }
		},
		// A closed connection: the broker is gone for this client.
		Down: func(t *testing.T) sink.Publisher {
			nc, js := connect(t)
			nc.Close()
			return publisher(t, js)
		},
		TooLarge: streamMaxMsg + 1,
		Dedups:   true,
	})
}

// TestOverMaxPayloadIsPermanent: a payload over the server's max_payload (refused by the client
// before it is sent) is permanent too, and names the limit.
func TestOverMaxPayloadIsPermanent(t *testing.T) {
	nc, js := connect(t)
	root := "wtnatsmax" + strings.ReplaceAll(t.Name(), "/", "")
	newStream(t, js, root, 0)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := sinktest.PublishOne(t, ctx, publisher(t, js), root, int(nc.MaxPayload())+1)
	if !watchtree.IsPermanent(err) || !errors.Is(err, sink.ErrTooLarge) || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("a payload over max_payload gave %v, want a permanent sink.ErrTooLarge naming max_payload", err)
	}
}

// TestNoStreamIsRetryable: a subject that no stream takes is refused (no responders); that is
// retryable, since the stream may be created later.
func TestNoStreamIsRetryable(t *testing.T) {
	_, js := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := sinktest.PublishOne(t, ctx, publisher(t, js), "wtnatsnostream", 0)
	if err == nil || watchtree.IsPermanent(err) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publishing to a subject no stream takes gave %v, want a retryable jetstream.ErrNoStreamResponse", err)
	}
}

// TestUnreachableServerIsRetryable: a client whose server never answered (it reconnects in the
// background) fails the publish with a retryable error, within ctx's deadline (nats.go refuses
// at once: before a first connection it does not know the server takes headers).
func TestUnreachableServerIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	nc, err := nats.Connect("nats://"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = sinktest.PublishOne(t, ctx, publisher(t, js), "wtnatsdown", 0)
	if err == nil || watchtree.IsPermanent(err) {
		t.Fatalf("publishing with the server down gave %v, want a retryable error", err)
	}
	t.Logf("server down: %v", err)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the publish took %v with a 500ms deadline", d)
	}
}

// TestInvalidSubjectIsPermanent: a collection name with a space makes no NATS subject: a
// permanent error naming the subject (retrying cannot fix it).
func TestInvalidSubjectIsPermanent(t *testing.T) {
	_, js := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := sinktest.PublishOne(t, ctx, publisher(t, js), "wtnats bad", 0)
	if !watchtree.IsPermanent(err) || !errors.Is(err, nats.ErrBadSubject) || !strings.Contains(err.Error(), `"wtnats bad.c.insert"`) {
		t.Fatalf("an invalid subject gave %v, want a permanent nats.ErrBadSubject naming the subject", err)
	}
}

func TestNewRefusesNil(t *testing.T) {
	if _, err := natssink.New(nil); !errors.Is(err, watchtree.ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v, want a ConfigError", err)
	}
}
