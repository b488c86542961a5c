package mongosim

import (
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ttlClock is a settable clock for Options.Now.
type ttlClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *ttlClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *ttlClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func ttlIDs(srv *Server, db, coll string) []any {
	var ids []any
	for _, d := range wDocs(srv, db, coll) {
		ids = append(ids, d[0].Value)
	}
	return ids
}

func TestTTLPassDeletesExpired(t *testing.T) {
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &ttlClock{now: base}
	// A long interval: only the explicit runTTLPass calls below delete anything.
	srv, cl := startServer(t, Options{Now: clock.Now, TTLMonitorInterval: time.Hour})
	ctx := testCtx(t)
	coll := cl.Database("ttl").Collection("c")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)}); err != nil {
		t.Fatal(err)
	}
	date := func(d time.Duration) bson.DateTime { return bson.NewDateTimeFromTime(base.Add(d)) }
	docs := []any{
		bson.D{{Key: "_id", Value: "old"}, {Key: "at", Value: date(-2 * time.Minute)}},                                  // expired
		bson.D{{Key: "_id", Value: "fresh"}, {Key: "at", Value: date(0)}},                                               // expires at +60s
		bson.D{{Key: "_id", Value: "array"}, {Key: "at", Value: bson.A{date(time.Hour), date(-90 * time.Second), "x"}}}, // earliest date counts
		bson.D{{Key: "_id", Value: "string"}, {Key: "at", Value: "2020-01-01"}},                                         // not a date: never
		bson.D{{Key: "_id", Value: "missing"}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	srv.eng.runTTLPass()
	if got := ttlIDs(srv, "ttl", "c"); len(got) != 3 || got[0] != "fresh" || got[1] != "string" || got[2] != "missing" {
		t.Fatalf("after the first pass: %v", got)
	}
	var deleted []any
	for _, en := range wDocEntries(srv, "ttl", "c") {
		if en.op == "delete" {
			deleted = append(deleted, en.docKey[0].Value)
		}
	}
	if len(deleted) != 2 || deleted[0] != "old" || deleted[1] != "array" {
		t.Fatalf("delete entries for %v", deleted)
	}
	// Exactly at expiry nothing happens; one millisecond later the document goes.
	clock.Set(base.Add(60 * time.Second))
	srv.eng.runTTLPass()
	if got := ttlIDs(srv, "ttl", "c"); len(got) != 3 {
		t.Fatalf("deleted at the expiry instant: %v", got)
	}
	clock.Set(base.Add(60*time.Second + time.Millisecond))
	srv.eng.runTTLPass()
	if got := ttlIDs(srv, "ttl", "c"); len(got) != 2 || got[0] != "string" {
		t.Fatalf("after expiry: %v", got)
	}
}

func TestTTLPartialIndex(t *testing.T) {
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	srv, cl := startServer(t, Options{Now: func() time.Time { return base }, TTLMonitorInterval: time.Hour})
	ctx := testCtx(t)
	coll := cl.Database("ttl").Collection("p")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0).SetPartialFilterExpression(bson.D{{Key: "temp", Value: true}})}); err != nil {
		t.Fatal(err)
	}
	old := bson.NewDateTimeFromTime(base.Add(-time.Hour))
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: old}, {Key: "temp", Value: true}},
		bson.D{{Key: "_id", Value: 2}, {Key: "at", Value: old}},
	}); err != nil {
		t.Fatal(err)
	}
	srv.eng.runTTLPass()
	if got := ttlIDs(srv, "ttl", "p"); len(got) != 1 || got[0] != int32(2) {
		t.Fatalf("partial TTL kept %v, want [2]", got)
	}
}

func TestTTLMonitorRunsOnItsOwn(t *testing.T) {
	srv, cl := startServer(t, Options{TTLMonitorInterval: 5 * time.Millisecond})
	ctx := testCtx(t)
	coll := cl.Database("ttl").Collection("auto")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: bson.NewDateTimeFromTime(time.Now().Add(-time.Minute))}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the TTL monitor deletes the expired document", func() bool {
		return len(wDocs(srv, "ttl", "auto")) == 0
	})
}

func TestTTLIndexSpecValidation(t *testing.T) {
	_, cl := startServer(t, Options{})
	db := cl.Database("ttl")
	ce := wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "ab"}, {Key: "expireAfterSeconds", Value: 10}}}}})
	if ce.Code != 67 {
		t.Fatalf("compound TTL = %+v, want 67 CannotCreateIndex", ce)
	}
	ce = wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "expireAfterSeconds", Value: -1}}}}})
	if ce.Code != codeInvalidOptions {
		t.Fatalf("negative expireAfterSeconds = %+v", ce)
	}
	// collMod changes expireAfterSeconds.
	wRun(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "expireAfterSeconds", Value: 10}}}}})
	raw := wRun(t, db, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "expireAfterSeconds", Value: 20}}}})
	if raw.Lookup("expireAfterSeconds_old").Int64() != 10 || raw.Lookup("expireAfterSeconds_new").Int64() != 20 {
		t.Fatalf("collMod index = %s", raw)
	}
	specs, err := db.Collection("c").Indexes().ListSpecifications(testCtx(t))
	if err != nil || len(specs) != 2 || specs[1].ExpireAfterSeconds == nil || *specs[1].ExpireAfterSeconds != 20 {
		t.Fatalf("after collMod: %+v %v", specs, err)
	}
}
