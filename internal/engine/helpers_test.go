package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/test/mongosim"
)

// testWait bounds every wait of the engine tests; nothing sleeps, they poll with a deadline.
const testWait = 20 * time.Second

// uriEnv points the engine tests at a real replica set instead of mongosim.
const uriEnv = "WATCHTREE_MONGODB_URI"

// env is one test's server (nil against a real replica set), client and database.
type env struct {
	srv    *mongosim.Server
	client *mongo.Client
	db     string
}

// newEnv connects to WATCHTREE_MONGODB_URI when set, else starts a mongosim, and picks a
// database unique to the test (dropped at the end against a real server).
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := &env{}
	uri := os.Getenv(uriEnv)
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatalf("mongosim.Start: %v", err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		e.srv, uri = srv, srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.db = "wt_engine_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if e.srv == nil {
			_ = client.Database(e.db).Drop(ctx)
		}
		_ = client.Disconnect(ctx)
	})
	e.client = client
	return e
}

// needSim skips t against a real replica set: it needs mongosim's hooks.
func (e *env) needSim(t *testing.T) {
	t.Helper()
	if e.srv == nil {
		t.Skipf("needs mongosim's hooks; %s is set", uriEnv)
	}
}

func (e *env) coll(name string) *mongo.Collection { return e.client.Database(e.db).Collection(name) }

// insertOrders inserts the documents {_id: i} for i in [from, to) into e's "orders".
func insertOrders(t *testing.T, e *env, from, to int) {
	t.Helper()
	docs := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := e.coll("orders").InsertMany(testCtx(t), docs); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// stage marshals one pipeline stage.
func stage(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testConfig is a runtime's configuration on e's database, defaulted as the root does, with
// obs as its Observer.
func testConfig(e *env, obs observe.Observer) Config {
	return Config{Client: e.client, Database: e.db, Logger: zap.NewNop(), Observer: obs, InstanceID: "engine-test-1",
		InstanceName: "engine-test", ShutdownTimeout: 30 * time.Second, ConnectTimeout: 10 * time.Second}
}
