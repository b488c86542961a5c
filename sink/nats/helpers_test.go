package natssink_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/sink/sinktest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// urlEnv overrides the NATS server the tests use (default nats://127.0.0.1:4222, which the
// machine runs with JetStream and .ci/run starts when it is down).
const urlEnv = "WATCHTREE_NATS_URL"

const wait = 20 * time.Second

// connect returns a JetStream on the test server, closed when t ends. With WATCHTREE_NATS_URL
// unset and nothing answering on 127.0.0.1:4222 the test is skipped with the reason; with it
// set, a server that does not answer fails the test.
func connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 2*time.Second)
		if err != nil {
			t.Skipf("no NATS server answers on 127.0.0.1:4222 (%v) and %s is unset: start nats-server -js (.ci/run does) or set %s", err, urlEnv, urlEnv)
		}
		_ = c.Close()
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// newStream creates a file-storage JetStream stream named root taking root.>, with max
// message size maxMsg (0: the server's limit), deleted when t ends.
func newStream(t testing.TB, js jetstream.JetStream, root string, maxMsg int32) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       root,
		Subjects:   []string{root + ".>"},
		Storage:    jetstream.FileStorage,
		MaxMsgSize: maxMsg,
	})
	if err != nil {
		t.Fatalf("create stream %s: %v (is JetStream enabled on the server? nats-server -js)", root, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = js.DeleteStream(ctx, root)
	})
	return s
}

// streamInfo returns the stream's state now.
func streamInfo(t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info
}

// readAll returns every message the stream holds, in stream order.
func readAll(t *testing.T, s jetstream.Stream) []sinktest.Received { return readFrom(t, s, 1) }

// readFrom returns the messages the stream holds from sequence from on, in stream order, each
// with its sequence as Offset.
func readFrom(t *testing.T, s jetstream.Stream, from uint64) []sinktest.Received {
	t.Helper()
	info := streamInfo(t, s)
	if info.State.Msgs == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out []sinktest.Received
	for seq := max(from, info.State.FirstSeq); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, sinktest.Received{
			ID:      m.Header.Get(jetstream.MsgIDHeader),
			Key:     m.Header.Get(natssink.KeyHeader),
			Subject: m.Subject,
			Payload: m.Data,
			Offset:  int64(seq),
		})
	}
	return out
}

// replicaSet starts a mongosim replica set for sinktest's Drill and Relay.
func replicaSet(ctx context.Context) (sinktest.ReplicaSet, error) {
	return mongosim.Start(ctx, mongosim.Options{})
}
