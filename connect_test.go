package watchtree

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
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

// closeServer closes e's mongosim, and makes the client's disconnect at the end of t short:
// with no server, ending the client's sessions would wait for the whole disconnect deadline.
func closeServer(t *testing.T, e *rtEnv) {
	t.Helper()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before newRTEnv's disconnect, which then finds the client disconnected
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = e.client.Disconnect(ctx)
	})
}

// stopSoon stops rt when t ends, after its server died: nothing can be flushed, so the error is
// expected; the bound keeps a dead server from holding the test.
func stopSoon(t *testing.T, rt *Runtime) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
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
			if _, err := rt.Spawn(testCtx(t), spec); !errors.Is(err, ErrNotStarted) {
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
	// The bound is the context's time left when Start began: at most 200ms, a little less on a
	// loaded machine ("within 197ms").
	msg := err.Error()
	var within time.Duration
	if rest, ok := strings.CutPrefix(msg, "watchtree: start: cannot reach MongoDB within "); ok {
		within, _ = time.ParseDuration(strings.SplitN(rest, ":", 2)[0])
	}
	if within <= 0 || within > 200*time.Millisecond {
		t.Fatalf("Start error = %q: want the context's bound (at most 200ms), not ConnectTimeout", msg)
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

// TestRuntimeStreamBacksOffWhenServerDies: a running stream whose server goes away fails within
// MaxAwaitTime + ConnectTimeout (not the driver's 30s server selection timeout) and shows
// StateBackoff with the driver's error as its cause; its restart, whose open is bounded by
// ConnectTimeout, backs off again.
func TestRuntimeStreamBacksOffWhenServerDies(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	const connect = 300 * time.Millisecond
	rt, err := New(Config{Client: e.client, Database: e.db, ConnectTimeout: connect,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopSoon(t, rt)
	spec := ordersStream("dies", newSeen())
	spec.Restart = RestartPolicy{InitialDelay: 500 * time.Millisecond, Multiplier: 1}
	h, err := rt.Spawn(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)

	closeServer(t, e)
	killed := time.Now()
	// The getMore in flight fails at once; the driver's resume then waits for a server until
	// the TryNext bound (MaxAwaitTime 1s + ConnectTimeout) ends. Generous slack for a loaded
	// machine, far below the 30s of an unbounded wait.
	bound := time.Second + connect + 3*time.Second // MaxAwaitTime (1s) + ConnectTimeout + slack
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	backoff := func(what string, deaths uint64) StreamStatus {
		t.Helper()
		for {
			st, err := h.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.State == StateBackoff && st.Deaths >= deaths {
				t.Logf("%s: backoff %v after the server's death, cause %q", what, time.Since(killed).Round(time.Millisecond), st.LastCause)
				if strings.Contains(st.LastCause, "panic") {
					t.Fatalf("%s: cause %q calls a lost server a panic", what, st.LastCause)
				}
				return st
			}
			if time.Since(killed) > bound {
				t.Fatalf("%s: no backoff within %v of the server's death: %+v", what, bound, st)
			}
			<-tick.C
		}
	}
	st := backoff("cursor", 1)
	// Either the driver's resume waits for a server until the TryNext bound ends, or the getMore
	// in flight already fails with the refused connection, or with the closed one (EOF, which
	// clears the pool; seen on a loaded machine); each names the real cause.
	boundHit := strings.Contains(st.LastCause, "cannot reach MongoDB within 1.3s") && strings.Contains(st.LastCause, "server selection")
	refused := strings.Contains(st.LastCause, "connection refused")
	closed := strings.Contains(st.LastCause, "EOF")
	if !boundHit && !refused && !closed {
		t.Fatalf("cause %q: want the bound and the driver's server selection error, or the refused or closed connection", st.LastCause)
	}
	// The restart opens a new change stream, which gets ConnectTimeout.
	bound = time.Since(killed) + spec.Restart.InitialDelay + connect + 3*time.Second
	st = backoff("reopen", 2)
	if !strings.Contains(st.LastCause, "cannot reach MongoDB within 300ms") {
		t.Fatalf("cause %q: want the open's bound", st.LastCause)
	}
}

// TestRuntimeSpawnFailsWhenServerDiedBeforeSpawn: a stream spawned after its server went away
// cannot fix its start position. Its first start fails within ConnectTimeout (the
// checkpointer's load of the checkpoint) and goes to backoff; Spawn returns when its context
// ends, with an error naming that cause, and the name is free again.
func TestRuntimeSpawnFailsWhenServerDiedBeforeSpawn(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	const connect = 300 * time.Millisecond
	rt, err := New(Config{Client: e.client, Database: e.db, ConnectTimeout: connect,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	stopSoon(t, rt)
	closeServer(t, e)
	spec := ordersStream("late", newSeen())
	spec.Restart = RestartPolicy{InitialDelay: 5 * time.Second}
	const wait = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	spawned := time.Now()
	_, err = rt.Spawn(ctx, spec)
	took := time.Since(spawned)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Spawn = %v, want an error matching context.DeadlineExceeded", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "load checkpoint") || !strings.Contains(msg, "deadline exceeded") ||
		!strings.Contains(msg, "restart attempt 1 pending") || strings.Contains(msg, "panic") {
		t.Fatalf("Spawn's error %q: want the bounded checkpoint load as the cause, in backoff", msg)
	}
	if took > wait+3*time.Second {
		t.Fatalf("Spawn took %v with a %v context", took, wait)
	}
	if _, err := rt.Handle("late"); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("the name stays taken after a failed Spawn: %v", err)
	}
}

// TestRuntimeStartServerError: a server that answers the ping with an error is reachable: Start
// fails with that error, not ErrUnreachable, and may be called again.
func TestRuntimeStartServerError(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	rt, err := New(Config{Client: e.client, Database: e.db, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	err = e.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 13}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	err = rt.Start(ctx)
	if err == nil || errors.Is(err, ErrUnreachable) || !strings.HasPrefix(err.Error(), "watchtree: start: ping the primary: ") {
		t.Fatalf("Start = %v, want the server's error on the ping, not ErrUnreachable", err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
