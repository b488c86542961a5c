// Package testenv is the MongoDB every test of the root module's packages runs against: a real
// replica set when WATCHTREE_MONGODB_URI is set, else an in-process test/mongosim, with a
// database of the test's own. Only tests import it.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/mongosim"
)

// URIEnv names the environment variable that points the tests at a real replica set.
const URIEnv = "WATCHTREE_MONGODB_URI"

// Env is one test's server (nil against a real replica set), client and database.
type Env struct {
	Srv    *mongosim.Server
	Client *mongo.Client
	DB     string
}

// New connects to URIEnv's replica set when set, else starts a mongosim, and picks the database
// dbPrefix followed by 8 random hex digits. When t ends the database is dropped (on a real
// server), the client disconnects and the mongosim closes.
func New(t testing.TB, dbPrefix string) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := &Env{}
	uri := os.Getenv(URIEnv)
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatalf("mongosim.Start: %v", err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		e.Srv, uri = srv, srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.DB = dbPrefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if e.Srv == nil {
			_ = client.Database(e.DB).Drop(ctx)
		}
		_ = client.Disconnect(ctx)
	})
	e.Client = client
	return e
}

// NeedSim skips t against a real replica set: it needs mongosim's hooks.
func (e *Env) NeedSim(t testing.TB) {
	t.Helper()
	if e.Srv == nil {
		t.Skipf("needs mongosim's hooks; %s is set", URIEnv)
	}
}
