package watchtree

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// deadClient returns a client of a replica set whose only member is a loopback port nobody
// listens on: every server selection fails after the caller's deadline.
func deadClient(t *testing.T) *mongo.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?replicaSet=rs0"))
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Disconnect(ctx)
	})
	return client
}

// TestRuntimeStartUnreachable: Start against a dead server fails within ConnectTimeout (not the
// driver's 30s server selection timeout) with an error that matches ErrUnreachable, names the
// bound and carries the driver's error; the runtime stays unstarted.
func TestRuntimeStartUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database string
	}{
		{"with store database", "shop"},
		{"without store database", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := New(Config{Client: deadClient(t), Database: tc.database, ConnectTimeout: 300 * time.Millisecond,
				Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for attempt := 1; attempt <= 2; attempt++ { // the second Start is a retry, not ErrAlreadyStarted
				start := time.Now()
				err = rt.Start(ctx)
				took := time.Since(start)
				if !errors.Is(err, ErrUnreachable) {
					t.Fatalf("Start #%d = %v, want ErrUnreachable", attempt, err)
				}
				if took > 3*time.Second {
					t.Fatalf("Start #%d took %v with ConnectTimeout 300ms", attempt, took)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "watchtree: start: cannot reach MongoDB within 300ms: ") ||
					!strings.Contains(msg, "server selection") {
					t.Fatalf("Start #%d error = %q: want the bound and the driver's server selection error", attempt, msg)
				}
			}
			spec := ordersStream("s", newSeen())
			spec.Database = "shop"
			if _, err := rt.Spawn(spec); !errors.Is(err, ErrNotStarted) {
				t.Fatalf("Spawn after a failed Start = %v, want ErrNotStarted", err)
			}
			if err := rt.Stop(ctx); err != nil {
				t.Fatalf("Stop of the never-started runtime: %v", err)
			}
		})
	}
}

// TestRuntimeStartUnreachableContextFirst: a context deadline earlier than ConnectTimeout
// bounds Start, and the error names that bound.
func TestRuntimeStartUnreachableContextFirst(t *testing.T) {
	rt, err := New(Config{Client: deadClient(t), Database: "shop", Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = rt.Start(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Start took %v with a 200ms context", took)
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Start = %v, want ErrUnreachable", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "watchtree: start: cannot reach MongoDB within 2") || strings.Contains(msg, "within 10s") {
		t.Fatalf("Start error = %q: want the context's bound (about 200ms), not ConnectTimeout", msg)
	}
}

// TestRuntimeStartRetryAfterUnreachable: a server frozen during Start makes it fail with
// ErrUnreachable; once the server answers again, the same runtime starts.
func TestRuntimeStartRetryAfterUnreachable(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	ctx := testCtx(t)
	if err := e.client.Ping(ctx, nil); err != nil { // the client knows the primary before the freeze
		t.Fatal(err)
	}
	rt, err := New(Config{Client: e.client, Database: e.db, ConnectTimeout: 300 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Pause()
	err = rt.Start(ctx)
	e.srv.Resume()
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Start on a frozen server = %v, want ErrUnreachable", err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatalf("Start after the server came back: %v", err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
