package watchtree

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestSpawnPoolExhausted: a stream that cannot open because every connection of the client's
// own pool is busy (maxPoolSize 1, held by a slow command) fails with an error that names the
// client's connection pool and the remedy (raise maxPoolSize, or share a cursor), not
// one that blames the server ("cannot reach MongoDB"); its Status says the same.
func TestSpawnPoolExhausted(t *testing.T) {
	e := newRTEnv(t)
	e.needSim(t)
	client, err := mongo.Connect(options.Client().ApplyURI(e.srv.URI()).SetMaxPoolSize(1).SetAppName("pool1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Disconnect(ctx)
	})
	const connect = 300 * time.Millisecond
	rt, err := New(Config{Client: client, Database: e.db, ConnectTimeout: connect,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	stopSoon(t, rt)

	// Hold the pool's only connection: a distinct that the server blocks for 4s.
	const hold = 4 * time.Second
	err = e.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"distinct"}},
			{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: hold.Milliseconds()}}}})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		ctx, cancel := context.WithTimeout(context.Background(), hold+5*time.Second)
		defer cancel()
		_ = client.Database(e.db).Collection("held").Distinct(ctx, "x", bson.D{}).Err()
	}()
	t.Cleanup(func() { <-held })
	waitFor(t, "the pool's connection to be held", func() bool {
		var reply struct {
			InProg []bson.M `bson:"inprog"`
		}
		if err := e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "currentOp", Value: 1}}).Decode(&reply); err != nil {
			t.Fatalf("currentOp: %v", err)
		}
		for _, op := range reply.InProg {
			if cmd, ok := op["command"].(bson.D); ok && len(cmd) > 0 && cmd[0].Key == "distinct" {
				return true
			}
		}
		return false
	})

	spec := ordersStream("pooled", newSeen())
	spec.Restart = RestartPolicy{InitialDelay: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	spawned := make(chan error, 1)
	go func() {
		_, err := rt.Spawn(ctx, spec)
		spawned <- err
	}()
	// While Spawn waits, the stream's Status (in backoff) names the pool as well.
	waitFor(t, "the stream's first failure", func() bool {
		for _, st := range mustStreams(t, rt) {
			if st.Name == "pooled" && st.LastCause != "" {
				checkPoolMessage(t, "Status.LastCause", st.LastCause)
				return true
			}
		}
		return false
	})
	err = <-spawned
	if err == nil {
		t.Fatal("Spawn succeeded with the pool's only connection held")
	}
	t.Logf("Spawn: %v", err)
	checkPoolMessage(t, "Spawn's error", err.Error())
}

// checkPoolMessage fails t unless msg names the client's connection pool and the remedies, and
// does not blame the server.
func checkPoolMessage(t *testing.T, what, msg string) {
	t.Helper()
	for _, want := range []string{"client's connection pool", "maxPoolSize", "share a cursor"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s %q: want it to name %q", what, msg, want)
		}
	}
	if strings.Contains(msg, "cannot reach MongoDB") {
		t.Errorf("%s %q blames the server for the client's own pool", what, msg)
	}
}
