package sinktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ReplicaSet is the MongoDB replica set a Drill or Relay runs on: *mongosim.Server is one.
// The library does not import mongosim (a module of its own), so the sink modules' tests start
// it, through Drill.Start and Relay.Start.
type ReplicaSet interface {
	URI() string  // the connection string
	Close() error // stops it; called once the test is done with it
}

// startReplicaSet starts the replica set with start and connects a client to it, both closed
// when t ends, and returns its URI and the client.
func startReplicaSet(t *testing.T, what string, start func(context.Context) (ReplicaSet, error)) (string, *mongo.Client) {
	t.Helper()
	if start == nil {
		t.Fatalf("sinktest.%s.Start is required", what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := start(ctx)
	if err != nil {
		t.Fatalf("start the replica set: %v", err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	client, err := mongo.Connect(options.Client().ApplyURI(rs.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return rs.URI(), client
}

// The drill and the relay test write documents {_id: n, v: version} (n an int32) and read each
// change back from the broker's payload: v counts a document's writes, so a gap or a step back
// in a key's v on the broker side is a lost write or broken per-key order.

// writeVersion writes version v of document doc: the insert for v 1, an update of v after.
func writeVersion(ctx context.Context, coll *mongo.Collection, doc int, v int64) error {
	var err error
	if v == 1 {
		_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: doc}, {Key: "v", Value: v}})
	} else {
		_, err = coll.UpdateByID(ctx, doc, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}})
	}
	if err != nil {
		return fmt.Errorf("doc %d v %d: %w", doc, v, err)
	}
	return nil
}

// docKey is document doc's message key: its document key as canonical Extended JSON.
func docKey(doc int) string { return fmt.Sprintf(`{"_id":{"$numberInt":"%d"}}`, doc) }

// payloadVersion reads v from a canonical Extended JSON change event: fullDocument.v of an
// insert, updateDescription.updatedFields.v of an update.
func payloadVersion(payload []byte) (int64, error) {
	var ev bson.Raw
	if err := bson.UnmarshalExtJSON(payload, true, &ev); err != nil {
		return 0, fmt.Errorf("payload is not canonical Extended JSON: %w", err)
	}
	for _, path := range [][]string{{"fullDocument", "v"}, {"updateDescription", "updatedFields", "v"}} {
		if v, err := ev.LookupErr(path...); err == nil {
			if n, ok := v.AsInt64OK(); ok {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("no v in %s", payload)
}

// waitFor polls cond every 10 ms until it holds, and fails t after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, bounded by the deadline
	}
}
