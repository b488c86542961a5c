package mongosim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.uber.org/goleak"
)

// TestMain fails the package's test binary if any goroutine outlives the tests: every test
// closes its servers and disconnects its clients, so neither mongosim nor the driver may leave
// anything running. No goleak.IgnoreTopFunction is needed: driver v2.10.0 stops all of its
// monitors, pools and RTT goroutines in Disconnect (checked with -count=4 runs of the package).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// appNames makes every client's appName unique within the test binary, so fail points with
// data.appName and CommandRecord.AppName can tell clients apart.
var appNames atomic.Int64

// testTimeout bounds every helper-driven operation; tests never wait longer than this.
const testTimeout = 20 * time.Second

// startServer starts a server with opts and connects one driver client to it with a unique
// appName and a 500 ms heartbeat (see connectClient). Cleanup disconnects the client, then
// closes the server. It fails the test at once if either step fails.
func startServer(t testing.TB, opts Options) (*Server, *mongo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("mongosim.Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, connectClient(t, srv, nil)
}

// connectClient connects another client to srv with a unique appName (newAppName); configure
// may adjust the options, including replacing the appName (nil for none). Cleanup disconnects it (before the server closes, since
// t.Cleanup runs in reverse order).
func connectClient(t testing.TB, srv *Server, configure func(*options.ClientOptions)) *mongo.Client {
	t.Helper()
	// A 500 ms heartbeat (the driver's minimum) bounds two driver v2.10.0 races to half a
	// second instead of 10 s: Disconnect waiting out an awaitable hello whose stop signal was
	// dropped, and an in-flight streaming hello not cancelled after a closed connection.
	o := options.Client().ApplyURI(srv.URI()).SetAppName(newAppName()).
		SetHeartbeatInterval(500 * time.Millisecond)
	if configure != nil {
		configure(o)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := cl.Disconnect(ctx); err != nil {
			t.Errorf("Disconnect: %v", err)
		}
	})
	return cl
}

// newAppName returns a fresh appName, unique within the test binary.
func newAppName() string { return fmt.Sprintf("mongosim-test-%d", appNames.Add(1)) }

// testCtx returns a context bounded by testTimeout, cancelled at the end of the test.
//
// Beware: driver v2.10.0 treats any context with a deadline as a CSOT "timeout context" and
// then retries retryable reads and writes without limit until the deadline. Tests that count
// retries ("retried exactly once") must use context.Background() for that operation.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every millisecond until it is true or d passes, then fails the test
// with msg. Use it instead of sleeping.
func waitFor(t testing.TB, d time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", d, msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// cmdEvent is one command outcome as the driver saw it (from its CommandMonitor).
type cmdEvent struct {
	Name    string
	OK      bool
	Code    int32    // server error code of a failure (0 for network errors)
	Labels  []string // labels of a failure, as the driver read them
	Network bool     // the failure was a network error (no reply)
	Reply   bson.Raw // the reply of a success
}

// cmdRecorder collects the driver's command events; use Monitor() in client options.
type cmdRecorder struct {
	mu     sync.Mutex
	events []cmdEvent
}

// Monitor returns a CommandMonitor that appends to r; hello and its aliases are skipped.
func (r *cmdRecorder) Monitor() *event.CommandMonitor {
	skip := func(name string) bool { return name == "hello" || name == "isMaster" || name == "ismaster" }
	return &event.CommandMonitor{
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if skip(e.CommandName) {
				return
			}
			r.mu.Lock()
			r.events = append(r.events, cmdEvent{Name: e.CommandName, OK: true, Reply: append(bson.Raw(nil), e.Reply...)})
			r.mu.Unlock()
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			if skip(e.CommandName) {
				return
			}
			ev := cmdEvent{Name: e.CommandName}
			var de driver.Error
			if errors.As(e.Failure, &de) {
				ev.Code, ev.Labels, ev.Network = de.Code, de.Labels, de.NetworkError()
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		},
	}
}

// Named returns the recorded events of one command, oldest first.
func (r *cmdRecorder) Named(name string) []cmdEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []cmdEvent
	for _, e := range r.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// failPointEntered returns how many times the named fail point has activated so far
// (0 when it is not configured). Tests poll it to know that a command reached the server.
func failPointEntered(s *Server, name string) int32 {
	s.fp.mu.Lock()
	defer s.fp.mu.Unlock()
	if fp := s.fp.points[name]; fp != nil {
		return fp.entered
	}
	return 0
}
