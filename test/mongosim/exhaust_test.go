package mongosim

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// exhaustHello sends an awaitable hello with exhaustAllowed for the given topologyVersion.
func (r *rawConn) exhaustHello(reqID int32, tv bson.Raw, maxAwaitMS int64) {
	r.t.Helper()
	var tvd bson.D
	if err := bson.Unmarshal(tv, &tvd); err != nil {
		r.t.Fatal(err)
	}
	r.send(opMsgBytes(r.t, reqID, msgExhaustAllowed, bson.D{
		{Key: "hello", Value: int32(1)}, {Key: "helloOk", Value: true},
		{Key: "topologyVersion", Value: tvd}, {Key: "maxAwaitTimeMS", Value: maxAwaitMS},
		{Key: "$db", Value: "admin"},
	}, nil))
}

// firstHello runs a plain hello and returns its topologyVersion.
func (r *rawConn) firstHello() bson.Raw {
	r.t.Helper()
	r.send(opMsgBytes(r.t, 1, 0, bson.D{{Key: "hello", Value: int32(1)}, {Key: "$db", Value: "admin"}}, nil))
	rp := r.read()
	if rp.flags != 0 {
		r.t.Fatalf("plain hello reply flagged %#x", rp.flags)
	}
	return rp.doc.Lookup("topologyVersion").Document()
}

func tvCounter(t *testing.T, doc bson.Raw) int64 {
	t.Helper()
	n, ok := doc.Lookup("topologyVersion", "counter").Int64OK()
	if !ok {
		t.Fatalf("reply without an Int64 topologyVersion.counter: %s", doc)
	}
	return n
}

// An exhaust hello is answered by a stream: every reply flagged moreToCome and answering the
// previous reply, one after each await period with no request in between, and one at once on
// a topology change.
func TestExhaustHelloStreamsRepliesUntilTheClientHangsUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := Start(ctx, Options{HelloAwaitLimit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := dialRaw(t, srv)
	tv := r.firstHello()

	r.exhaustHello(7, tv, 50)
	prev := int32(7)
	for i := 0; i < 4; i++ {
		rp := r.read()
		if rp.flags != msgMoreToCome {
			t.Fatalf("streamed reply %d flagBits %#x, want moreToCome", i, rp.flags)
		}
		if rp.hdr.responseTo != prev {
			t.Fatalf("streamed reply %d responseTo %d, want %d (the previous reply's requestID)", i, rp.hdr.responseTo, prev)
		}
		if ok, _ := rp.doc.Lookup("isWritablePrimary").BooleanOK(); !ok {
			t.Fatalf("streamed reply %d is not a primary's hello: %s", i, rp.doc)
		}
		prev = rp.hdr.requestID
	}

	// With a long await every reply comes from a topology change, not the timer: the first
	// (its topologyVersion is current, so it waits too) and the streamed ones.
	r2 := dialRaw(t, srv)
	tv = r2.firstHello()
	r2.exhaustHello(9, tv, 600_000)
	prev = 9
	base := tv.Lookup("counter").Int64()
	for i := int64(1); i <= 2; i++ {
		if err := srv.StepDown(time.Hour); err != nil {
			t.Fatal(err)
		}
		changed := r2.read()
		if changed.flags != msgMoreToCome || changed.hdr.responseTo != prev {
			t.Fatalf("change reply %d flags %#x responseTo %d, want moreToCome and %d", i, changed.flags, changed.hdr.responseTo, prev)
		}
		if got := tvCounter(t, changed.doc); got != base+i {
			t.Fatalf("change reply %d counter %d, want %d", i, got, base+i)
		}
		if sec, _ := changed.doc.Lookup("secondary").BooleanOK(); !sec {
			t.Fatalf("after StepDown the streamed hello says %s", changed.doc)
		}
		prev = changed.hdr.requestID
	}

	// Hanging up ends both streams on the server at once, although nothing is being sent.
	before := srv.ConnectionCount()
	_ = r2.nc.Close()
	waitFor(t, 5*time.Second, "the server to close the hung-up stream's connection", func() bool {
		return srv.ConnectionCount() == before-1
	})
	_ = r.nc.Close()
	waitFor(t, 5*time.Second, "the server to close the second stream", func() bool {
		return srv.ConnectionCount() == before-2
	})
}

// An error ends the stream: it is not flagged moreToCome, and the connection answers requests
// again.
func TestExhaustHelloErrorEndsTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := dialRaw(t, srv)
	tv := r.firstHello()
	r.exhaustHello(3, tv, 20)
	if rp := r.read(); rp.flags != msgMoreToCome {
		t.Fatalf("first reply flags %#x", rp.flags)
	}
	if err := srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"hello"}}, {Key: "errorCode", Value: 91}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		rp := r.read()
		if rp.flags == msgMoreToCome {
			continue // replies streamed before the fail point took effect
		}
		if code, _ := rp.doc.Lookup("code").AsInt64OK(); code != 91 {
			t.Fatalf("reply without moreToCome is not the injected error: %s", rp.doc)
		}
		break
	}
	r.send(opMsgBytes(t, 4, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}, nil))
	if rp := r.read(); rp.hdr.responseTo != 4 || rp.flags != 0 {
		t.Fatalf("ping after the stream: responseTo %d flags %#x", rp.hdr.responseTo, rp.flags)
	}
}

// The Go driver streams its heartbeats too: they keep succeeding, a step-down reaches it
// through the stream, and Disconnect ends its monitoring connections.
func TestGoDriverHeartbeatsStreamWithoutFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var awaited, failed int
	var sawSecondary bool
	connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetServerMonitor(&event.ServerMonitor{
			ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
				mu.Lock()
				defer mu.Unlock()
				if e.Awaited {
					awaited++
				}
			},
			ServerHeartbeatFailed: func(*event.ServerHeartbeatFailedEvent) {
				mu.Lock()
				failed++
				mu.Unlock()
			},
			ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
				mu.Lock()
				defer mu.Unlock()
				if e.NewDescription.Kind == "RSSecondary" {
					sawSecondary = true
				}
			},
		})
	})
	waitFor(t, 10*time.Second, "four awaited heartbeats", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return awaited >= 4
	})
	if err := srv.StepDown(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the client to see the step-down", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sawSecondary
	})
	mu.Lock()
	defer mu.Unlock()
	if failed != 0 {
		t.Fatalf("%d heartbeats failed", failed)
	}
}
