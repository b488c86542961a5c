package mongosim

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// pbrtTime decodes the cluster time of a change stream's current resume token.
func pbrtTime(t *testing.T, cs *mongo.ChangeStream) bson.Timestamp {
	t.Helper()
	var d bson.D
	if err := bson.Unmarshal(cs.ResumeToken(), &d); err != nil {
		t.Fatal(err)
	}
	tok, cerr := decodeResumeToken(d)
	if cerr != nil {
		t.Fatal(cerr)
	}
	return tok.ts
}

// An idle change stream's postBatchResumeToken moves past the periodic no-op, measured on the
// injected clock, as on a replica set; the no-op is no event and shows in the oplog as op "n".
func TestNoopWriterAdvancesIdlePBRT(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	var offset atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	srv, cl := startServer(t, Options{Now: now})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if cs.TryNext(ctx) {
		t.Fatalf("unexpected event %v", cs.Current)
	}
	before := pbrtTime(t, cs)

	// Idle for less than the interval: no no-op, the token stays.
	offset.Store(int64(5 * time.Second))
	if cs.TryNext(ctx) {
		t.Fatalf("unexpected event %v", cs.Current)
	}
	if got := pbrtTime(t, cs); got.T != before.T {
		t.Fatalf("PBRT moved to %v before the no-op interval (from %v)", got, before)
	}

	// Past the interval: within the writer's real-time poll the token moves to the new second.
	offset.Store(int64(11 * time.Second))
	deadline := time.Now().Add(10 * time.Second)
	for pbrtTime(t, cs).T < before.T+11 {
		if time.Now().After(deadline) {
			t.Fatalf("PBRT still %v after the no-op interval passed (from %v)", pbrtTime(t, cs), before)
		}
		if cs.TryNext(ctx) {
			t.Fatalf("the no-op became an event: %v", cs.Current)
		}
	}
	n, err := cl.Database("local").Collection("oplog.rs").CountDocuments(ctx, bson.D{{Key: "op", Value: "n"}, {Key: "o.msg", Value: "periodic noop"}})
	if err != nil || n != 1 {
		t.Fatalf("oplog.rs periodic no-ops = %d (%v), want 1", n, err)
	}
	_ = srv
}

// A negative NoopInterval turns the writer off: an idle stream's token stays.
func TestNoopWriterOff(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	var offset atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	_, cl := startServer(t, Options{Now: now, NoopInterval: -1})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	cs.TryNext(ctx)
	before := pbrtTime(t, cs)
	offset.Store(int64(time.Minute))
	for range 30 { // 30 idle getMores of 50ms each: longer than the writer's 1s poll
		if cs.TryNext(ctx) {
			t.Fatalf("unexpected event %v", cs.Current)
		}
	}
	if got := pbrtTime(t, cs); got != before {
		t.Fatalf("PBRT moved to %v with the writer off (from %v)", got, before)
	}
}
