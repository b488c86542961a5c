package mongostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

// uriEnv names the variable that points the tests at a real replica set instead of mongosim.
const uriEnv = "WATCHTREE_MONGODB_URI"

// realURI returns the real replica set's URI, or "" to use mongosim.
func realURI() string { return os.Getenv(uriEnv) }

// env is one test's server and client. srv is nil against a real replica set.
type env struct {
	srv    *mongosim.Server
	client *mongo.Client
}

// newEnv connects to WATCHTREE_MONGODB_URI when set, else starts a mongosim with simOpts. The
// clientOpts adjust the client's options. The server and client are closed when t ends.
func newEnv(t testing.TB, simOpts mongosim.Options, clientOpts ...func(*options.ClientOptions)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uri := realURI()
	e := &env{}
	if uri == "" {
		srv, err := mongosim.Start(ctx, simOpts)
		if err != nil {
			t.Fatalf("mongosim.Start: %v", err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		e.srv, uri = srv, srv.URI()
	}
	// A short heartbeat: after a killed connection the driver finds the primary again quickly
	// (driver v2.10.0 sometimes misses cancelling its in-flight streaming hello after a closed
	// connection and then waits a whole heartbeat interval before it can select a server).
	co := options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond)
	for _, f := range clientOpts {
		f(co)
	}
	client, err := mongo.Connect(co)
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	t.Cleanup(func() {
		// Disconnect ends the client's sessions on the server; when a test closed the server,
		// that waits for server selection until the deadline, so keep it short.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = client.Disconnect(ctx)
	})
	e.client = client
	return e
}

// needSim skips t against a real replica set: it needs mongosim's hooks.
func needSim(t testing.TB) {
	t.Helper()
	if realURI() != "" {
		t.Skipf("needs mongosim's hooks; %s is set", uriEnv)
	}
}

var unsafeDBChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// db returns a database unique to t (so runs against a real server never collide), dropped
// when t ends on a real server.
func (e *env) db(t testing.TB) *mongo.Database {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeDBChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	db := e.client.Database("wt_" + hex.EncodeToString(b[:]) + "_" + name)
	if e.srv != nil {
		return db // the simulator is thrown away with its data
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
	})
	return db
}

// newStore returns a store on a fresh database of e, with its indexes.
func (e *env) newStore(t testing.TB, opts mongostore.Options) (*mongostore.Store, *mongo.Database) {
	t.Helper()
	db := e.db(t)
	s, err := mongostore.New(db, opts)
	if err != nil {
		t.Fatalf("mongostore.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatalf("EnsureIndexes: %v", err)
	}
	return s, db
}

// testCtx is a context bounded by a deadline and by the test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
