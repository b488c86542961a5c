package engine

import (
	"context"
	"github.com/watchtree/watchtree/internal/policyx"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/testenv"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/test/mongosim"
)

// testWait bounds every wait of the engine tests; nothing sleeps, they poll with a deadline.
const testWait = 20 * time.Second

// env is one test's server (nil against a real replica set), client and database.
type env struct {
	srv    *mongosim.Server
	client *mongo.Client
	db     string
}

// newEnv connects to testenv.URIEnv's replica set when set, else starts a mongosim, with a
// database unique to the test.
func newEnv(t *testing.T) *env {
	te := testenv.New(t, "wt_engine_")
	return &env{srv: te.Srv, client: te.Client, db: te.DB}
}

// needSim skips t against a real replica set: it needs mongosim's hooks.
func (e *env) needSim(t *testing.T) { (&testenv.Env{Srv: e.srv}).NeedSim(t) }

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
		InstanceName: "engine-test", ShutdownTimeout: 30 * time.Second, ConnectTimeout: 10 * time.Second, Clock: clock.Real(),
		Lease: policyx.WithDefaults(policy.Lease{})}
}
