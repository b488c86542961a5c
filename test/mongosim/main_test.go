package mongosim

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
)

// TestMain fails the package's test binary if any goroutine outlives the tests: every test
// closes its servers and disconnects its clients, so neither mongosim nor the driver may leave
// anything running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// appNames makes every client's appName unique within the test binary, so fail points with
// data.appName and CommandRecord.AppName can tell clients apart.
var appNames atomic.Int64

// testTimeout bounds every helper-driven operation; tests never wait longer than this.
const testTimeout = 20 * time.Second

// startServer starts a server with opts and connects one driver client to it with a unique
// appName. Cleanup disconnects the client, then closes the server.
// It fails the test at once if either step fails.
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
	o := options.Client().ApplyURI(srv.URI()).SetAppName(newAppName())
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
