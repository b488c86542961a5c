package mongostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

func mustMarshal(v any) bson.Raw {
	b, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 123_000_000, time.UTC)

// shape is "key:type" for each element of a raw document, in order.
func shape(t *testing.T, d bson.Raw) string {
	t.Helper()
	els, err := d.Elements()
	if err != nil {
		t.Fatalf("elements of %v: %v", d, err)
	}
	parts := make([]string, len(els))
	for i, e := range els {
		parts[i] = e.Key() + ":" + e.Value().Type.String()
	}
	return strings.Join(parts, " ")
}

func rawDoc(t *testing.T, db *mongo.Database, coll string, id any) bson.Raw {
	t.Helper()
	raw, err := db.Collection(coll).FindOne(testCtx(t), bson.D{{Key: "_id", Value: id}}).Raw()
	if err != nil {
		t.Fatalf("find %s %v: %v", coll, id, err)
	}
	return raw
}

// dlKey is the _id of the stream's dead letter id.
func dlKey(stream, id string) bson.D {
	return bson.D{{Key: "stream", Value: stream}, {Key: "id", Value: id}}
}

func wantShape(t *testing.T, what string, d bson.Raw, want string) {
	t.Helper()
	if got := shape(t, d); got != want {
		t.Errorf("%s on the wire:\n got  %s\n want %s", what, got, want)
	}
}

// TestDocumentShapes pins the stored documents: field names (lowerCamelCase), order, BSON
// types, optional fields left out, and token bytes stored verbatim.
func TestDocumentShapes(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	s, db := e.newStore(t, mongostore.Options{})
	ctx := testCtx(t)
	tok := mustMarshal(bson.D{{Key: "_data", Value: "8266AABBCC000000012B022C0100296E5A1004"}})

	cp := store.Checkpoint{Stream: "orders", Token: tok, ClusterTime: bson.Timestamp{T: 1_777_000_000, I: 4},
		Source: store.SourceEvent, Epoch: 3, Owner: "host-1", Settled: 17, UpdatedAt: t0}
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	raw := rawDoc(t, db, mongostore.DefaultCheckpointCollection, "orders")
	wantShape(t, "checkpoint", raw,
		"_id:string token:embedded document clusterTime:timestamp source:string epoch:64-bit integer owner:string settled:64-bit integer updatedAt:UTC datetime")
	if got := raw.Lookup("token").Document(); !bytes.Equal(got, tok) {
		t.Errorf("stored token %v, want the bytes given %v", got, tok)
	}
	if err := s.Save(ctx, store.Checkpoint{Stream: "fresh", Source: store.SourceInitial, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	wantShape(t, "checkpoint without token and cluster time", rawDoc(t, db, mongostore.DefaultCheckpointCollection, "fresh"),
		"_id:string source:string epoch:64-bit integer owner:string settled:64-bit integer updatedAt:UTC datetime")

	inst := cp
	inst.Instance, inst.Epoch, inst.ExpiresAt = "pod-a", 0, t0.Add(30*24*time.Hour)
	if err := s.Save(ctx, inst); err != nil {
		t.Fatal(err)
	}
	raw = rawDoc(t, db, mongostore.DefaultCheckpointCollection, bson.D{{Key: "stream", Value: "orders"}, {Key: "instance", Value: "pod-a"}})
	wantShape(t, "instance checkpoint key", raw.Lookup("_id").Document(), "stream:string instance:string")
	wantShape(t, "instance checkpoint", raw,
		"_id:embedded document stream:string instance:string token:embedded document clusterTime:timestamp source:string epoch:64-bit integer owner:string settled:64-bit integer updatedAt:UTC datetime expiresAt:UTC datetime")

	g := store.Gap{ID: "orders/1", Stream: "orders", FromToken: tok, FromTime: bson.Timestamp{T: 1, I: 1},
		ToToken: tok, ToTime: bson.Timestamp{T: 2, I: 1}, Policy: store.GapRebuild, Reason: "(286) lost", At: t0}
	if err := s.RecordGap(ctx, g); err != nil {
		t.Fatal(err)
	}
	wantShape(t, "gap", rawDoc(t, db, mongostore.DefaultGapCollection, "orders/1"),
		"_id:string stream:string fromToken:embedded document fromTime:timestamp toToken:embedded document toTime:timestamp policy:string reason:string at:UTC datetime")
	g.ID, g.FromToken, g.FromTime = "orders/2", nil, bson.Timestamp{}
	if err := s.RecordGap(ctx, g); err != nil {
		t.Fatal(err)
	}
	wantShape(t, "gap without from", rawDoc(t, db, mongostore.DefaultGapCollection, "orders/2"),
		"_id:string stream:string toToken:embedded document toTime:timestamp policy:string reason:string at:UTC datetime")
	g.ID, g.Instance = "orders/pod-a/3", "pod-a"
	if err := s.RecordGap(ctx, g); err != nil {
		t.Fatal(err)
	}
	wantShape(t, "instance gap", rawDoc(t, db, mongostore.DefaultGapCollection, "orders/pod-a/3"),
		"_id:string stream:string instance:string toToken:embedded document toTime:timestamp policy:string reason:string at:UTC datetime")

	dl := store.DeadLetter{ID: "8266AA", Stream: "orders", Token: tok, OperationType: "insert",
		DocumentKey: mustMarshal(bson.D{{Key: "_id", Value: 7}}), Namespace: "shop.orders",
		Event: mustMarshal(bson.D{{Key: "operationType", Value: "insert"}}), Error: "boom", ErrorType: "panic",
		Stack: "goroutine 1", Attempts: 3, FirstAttemptAt: t0, LastAttemptAt: t0, CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour), ReplayCount: 1, LastReplayAt: t0}
	if err := s.PutDeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	raw = rawDoc(t, db, mongostore.DefaultDeadLetterCollection, dlKey("orders", "8266AA"))
	wantShape(t, "dead letter key", raw.Lookup("_id").Document(), "stream:string id:string")
	wantShape(t, "dead letter", raw,
		"_id:embedded document stream:string token:embedded document operationType:string documentKey:embedded document namespace:string event:embedded document error:string errorType:string stack:string attempts:64-bit integer firstAttemptAt:UTC datetime lastAttemptAt:UTC datetime createdAt:UTC datetime expiresAt:UTC datetime replayCount:64-bit integer lastReplayAt:UTC datetime")

	dl.Instance = "pod-a"
	if err := s.PutDeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	raw = rawDoc(t, db, mongostore.DefaultDeadLetterCollection,
		bson.D{{Key: "stream", Value: "orders"}, {Key: "instance", Value: "pod-a"}, {Key: "id", Value: "8266AA"}})
	wantShape(t, "instance dead letter key", raw.Lookup("_id").Document(), "stream:string instance:string id:string")
	wantShape(t, "instance dead letter", raw,
		"_id:embedded document stream:string instance:string token:embedded document operationType:string documentKey:embedded document namespace:string event:embedded document error:string errorType:string stack:string attempts:64-bit integer firstAttemptAt:UTC datetime lastAttemptAt:UTC datetime createdAt:UTC datetime expiresAt:UTC datetime replayCount:64-bit integer lastReplayAt:UTC datetime")

	min := store.DeadLetter{ID: "min", Stream: "orders", Token: tok, OperationType: "drop",
		Event: mustMarshal(bson.D{{Key: "operationType", Value: "drop"}}), Error: "boom", Attempts: 1, CreatedAt: t0}
	if err := s.PutDeadLetter(ctx, min); err != nil {
		t.Fatal(err)
	}
	wantShape(t, "minimal dead letter", rawDoc(t, db, mongostore.DefaultDeadLetterCollection, dlKey("orders", "min")),
		"_id:embedded document stream:string token:embedded document operationType:string event:embedded document error:string attempts:64-bit integer createdAt:UTC datetime replayCount:64-bit integer")
	if err := s.MarkReplayed(ctx, store.Scope{Stream: "orders"}, "min", t0); err != nil {
		t.Fatal(err)
	}
	raw = rawDoc(t, db, mongostore.DefaultDeadLetterCollection, dlKey("orders", "min"))
	wantShape(t, "replayed minimal dead letter", raw,
		"_id:embedded document stream:string token:embedded document operationType:string event:embedded document error:string attempts:64-bit integer createdAt:UTC datetime replayCount:64-bit integer lastReplayAt:UTC datetime")
	if n := raw.Lookup("replayCount").Int64(); n != 1 {
		t.Errorf("replayCount = %d, want 1", n)
	}
}

// TestIndexes checks what EnsureIndexes creates (the TTL index with expireAfterSeconds 0 and the
// listing indexes) and that it is idempotent.
func TestIndexes(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	s, db := e.newStore(t, mongostore.Options{})
	if err := s.EnsureIndexes(testCtx(t)); err != nil {
		t.Fatalf("second EnsureIndexes: %v", err)
	}
	indexes := func(coll string) map[string]bson.Raw {
		cur, err := db.Collection(coll).Indexes().List(testCtx(t))
		if err != nil {
			t.Fatalf("list indexes of %s: %v", coll, err)
		}
		var all []bson.Raw
		if err := cur.All(testCtx(t), &all); err != nil {
			t.Fatal(err)
		}
		m := make(map[string]bson.Raw)
		for _, ix := range all {
			m[ix.Lookup("name").StringValue()] = ix
		}
		return m
	}
	keyShape := func(ix bson.Raw) string {
		els, _ := ix.Lookup("key").Document().Elements()
		var parts []string
		for _, e := range els {
			parts = append(parts, fmt.Sprintf("%s:%d", e.Key(), e.Value().AsInt64()))
		}
		return strings.Join(parts, ",")
	}

	dl := indexes(mongostore.DefaultDeadLetterCollection)
	if len(dl) != 3 {
		t.Errorf("dead-letter indexes: %d (%v), want _id_, expiresAt_ttl and stream_1_instance_1_createdAt_1", len(dl), keys(dl))
	}
	ttl, ok := dl["expiresAt_ttl"]
	if !ok {
		t.Fatalf("no expiresAt_ttl index: %v", keys(dl))
	}
	if k := keyShape(ttl); k != "expiresAt:1" {
		t.Errorf("TTL index key %s, want expiresAt:1", k)
	}
	if v, err := ttl.LookupErr("expireAfterSeconds"); err != nil {
		t.Errorf("TTL index has no expireAfterSeconds: %v", ttl)
	} else if n, ok := v.AsInt64OK(); !ok || n != 0 {
		t.Errorf("TTL index expireAfterSeconds = %v, want 0", v)
	}
	if ix, ok := dl["stream_1_instance_1_createdAt_1"]; !ok || keyShape(ix) != "stream:1,instance:1,createdAt:1" {
		t.Errorf("listing index stream_1_instance_1_createdAt_1: %v, want key stream:1,instance:1,createdAt:1", ix)
	}
	gaps := indexes(mongostore.DefaultGapCollection)
	if ix, ok := gaps["stream_1_instance_1_at_1"]; !ok || keyShape(ix) != "stream:1,instance:1,at:1" {
		t.Errorf("gap index stream_1_instance_1_at_1: %v, want key stream:1,instance:1,at:1", ix)
	}
	cps := indexes(mongostore.DefaultCheckpointCollection)
	if len(cps) != 3 {
		t.Errorf("checkpoint indexes: %d (%v), want _id_, expiresAt_ttl and stream_1_instance_1", len(cps), keys(cps))
	}
	if ix, ok := cps["stream_1_instance_1"]; !ok || keyShape(ix) != "stream:1,instance:1" {
		t.Errorf("checkpoint listing index stream_1_instance_1: %v, want key stream:1,instance:1", ix)
	}
	cpTTL, ok := cps["expiresAt_ttl"]
	if !ok || keyShape(cpTTL) != "expiresAt:1" {
		t.Fatalf("checkpoint TTL index expiresAt_ttl: %v, want key expiresAt:1", cpTTL)
	}
	if v, err := cpTTL.LookupErr("expireAfterSeconds"); err != nil {
		t.Errorf("checkpoint TTL index has no expireAfterSeconds: %v", cpTTL)
	} else if n, ok := v.AsInt64OK(); !ok || n != 0 {
		t.Errorf("checkpoint TTL index expireAfterSeconds = %v, want 0", v)
	}
}

func keys(m map[string]bson.Raw) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTTLMonitorDeletesExpired: the server's TTL monitor (mongosim's, with an injected clock and a
// short interval) deletes expired dead letters, and only those.
func TestTTLMonitorDeletesExpired(t *testing.T) {
	needSim(t)
	clk := clock.NewFake(t0)
	e := newEnv(t, mongosim.Options{Now: clk.Now, TTLMonitorInterval: 5 * time.Millisecond})
	s, db := e.newStore(t, mongostore.Options{Now: clk.Now})
	ctx := testCtx(t)
	put := func(id string, expires time.Time) {
		t.Helper()
		if err := s.PutDeadLetter(ctx, store.DeadLetter{ID: id, Stream: "orders", Token: mustMarshal(bson.D{{Key: "_data", Value: id}}),
			OperationType: "insert", Error: "x", Attempts: 1, CreatedAt: clk.Now(), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	put("short", t0.Add(time.Hour))
	put("long", t0.Add(48*time.Hour))
	put("forever", time.Time{})

	ids := func() []string {
		cur, err := db.Collection(mongostore.DefaultDeadLetterCollection).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			Key struct {
				ID string `bson:"id"`
			} `bson:"_id"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range docs {
			out = append(out, d.Key.ID)
		}
		return out
	}
	waitIDs := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := strings.Join(ids(), ",")
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("stored dead letters %q, want %q", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	clk.Advance(2 * time.Hour)
	waitIDs("long,forever")
	if _, err := s.GetDeadLetter(ctx, store.Scope{Stream: "orders"}, "short"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDeadLetter of a deleted dead letter: %v", err)
	}
	clk.Advance(100 * 24 * time.Hour)
	waitIDs("forever")
}

// TestTTLMonitorDeletesExpiredCheckpoints: the TTL index on the checkpoints' expiresAt lets the
// server's TTL monitor (mongosim's, with an injected clock and a short interval) delete an
// instance's checkpoint that was not written for its retention, and never the shared one.
func TestTTLMonitorDeletesExpiredCheckpoints(t *testing.T) {
	needSim(t)
	clk := clock.NewFake(t0)
	e := newEnv(t, mongosim.Options{Now: clk.Now, TTLMonitorInterval: 5 * time.Millisecond})
	s, db := e.newStore(t, mongostore.Options{Now: clk.Now})
	ctx := testCtx(t)
	const retention = 30 * 24 * time.Hour
	save := func(instance string, expires time.Time) {
		t.Helper()
		if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Instance: instance, Source: store.SourceEvent,
			Token: mustMarshal(bson.D{{Key: "_data", Value: "82" + instance}}), UpdatedAt: clk.Now(), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	save("pod-a", t0.Add(retention))
	save("", time.Time{}) // the shared position never expires
	clk.Advance(retention / 2)
	save("pod-b", clk.Now().Add(retention)) // written later: expires later

	count := func() int64 {
		n, err := db.Collection(mongostore.DefaultCheckpointCollection).CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	scopes := func() string {
		cps, err := s.ListCheckpoints(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cp := range cps {
			out = append(out, cp.Scope().String())
		}
		return strings.Join(out, ",")
	}
	if got := scopes(); got != "orders,orders@pod-a,orders@pod-b" {
		t.Fatalf("ListCheckpoints before expiry: %s", got)
	}
	clk.Advance(retention/2 + time.Minute) // pod-a's retention ran out; pod-b's did not
	deadline := time.Now().Add(10 * time.Second)
	for count() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the TTL monitor left %d checkpoints, want 2 (shared and pod-b)", count())
		}
		time.Sleep(5 * time.Millisecond) // a polling tick
	}
	if got := scopes(); got != "orders,orders@pod-b" {
		t.Fatalf("ListCheckpoints after pod-a expired: %s", got)
	}
	if _, ok, err := s.Load(ctx, store.Scope{Stream: "orders", Instance: "pod-a"}); err != nil || ok {
		t.Fatalf("Load of the expired pod-a checkpoint: ok=%v err=%v", ok, err)
	}
}

// TestLegacySharedCheckpointReadable: a checkpoint of the earlier layout (_id = stream name, no
// stream or instance fields) is the stream's shared checkpoint: loaded, listed, and replaced in
// place (its _id kept) by a shared save; instance saves never touch it.
func TestLegacySharedCheckpointReadable(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	s, db := e.newStore(t, mongostore.Options{})
	ctx := testCtx(t)
	tok := mustMarshal(bson.D{{Key: "_data", Value: "8266AA01"}})
	coll := db.Collection(mongostore.DefaultCheckpointCollection)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "orders"}, {Key: "token", Value: tok},
		{Key: "source", Value: "event"}, {Key: "epoch", Value: int64(0)}, {Key: "owner", Value: "old-host-1-abc"},
		{Key: "settled", Value: int64(42)}, {Key: "updatedAt", Value: t0}}); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := s.Load(ctx, store.Scope{Stream: "orders"})
	if err != nil || !ok {
		t.Fatalf("Load of the legacy checkpoint: ok=%v err=%v", ok, err)
	}
	if cp.Stream != "orders" || cp.Instance != "" || !bytes.Equal(cp.Token, tok) || cp.Settled != 42 || !cp.UpdatedAt.Equal(t0) {
		t.Fatalf("legacy checkpoint read as %+v", cp)
	}
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Instance: "pod-a", Token: tok, Source: store.SourceMigrated, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	cps, err := s.ListCheckpoints(ctx, "orders")
	if err != nil || len(cps) != 2 || cps[0].Instance != "" || cps[1].Instance != "pod-a" {
		t.Fatalf("ListCheckpoints: %+v, %v; want the legacy one and pod-a's", cps, err)
	}
	if got := rawDoc(t, db, mongostore.DefaultCheckpointCollection, "orders"); got.Lookup("settled").Int64() != 42 {
		t.Fatalf("an instance's save changed the legacy document: %v", got)
	}
}

// TestSaveIsOneConditionalUpsert: a Save is one update command with the fencing filter and
// upsert, and a fenced one is told apart by the server's DuplicateKey, leaving the record as
// it was.
func TestSaveIsOneConditionalUpsert(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, mongosim.Options{}, rec.option)
	s, _ := e.newStore(t, mongostore.Options{Now: func() time.Time { return t0 }})
	ctx := testCtx(t)
	rec.reset()
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "8269B5B0A4000000012B0429"}})
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 5, Settled: 1, UpdatedAt: t0,
		Token: tok, ClusterTime: bson.Timestamp{T: 1_773_500_000, I: 1}}); err != nil {
		t.Fatal(err)
	}
	updates := rec.named("update")
	if len(updates) != 1 {
		t.Fatalf("Save sent %d update commands, want 1", len(updates))
	}
	stmt := updates[0].Command.Lookup("updates").Array().Index(0).Document()
	q := stmt.Lookup("q").Document().String()
	// The record may be replaced when it has no epoch, has expired, has a lower epoch, or has
	// this epoch and a position not after this one: its token's _data not after this one's, or
	// no token data and a cluster time not after this one's.
	wantQ := `{"_id": "orders","$or": [{"epoch": {"$exists": false}},` +
		`{"expiresAt": {"$lt": {"$date":{"$numberLong":"` + fmt.Sprint(t0.UnixMilli()) + `"}}}},` +
		`{"epoch": {"$lt": {"$numberLong":"5"}}},` +
		`{"epoch": {"$numberLong":"5"},"$or": [{"token._data": {"$lte": "8269B5B0A4000000012B0429"}},` +
		`{"token._data": {"$not": {"$type": "string"}},"$or": [{"clusterTime": {"$exists": false}},` +
		`{"clusterTime": {"$lte": {"$timestamp":{"t":1773500000,"i":1}}}}]}]}]}`
	if q != wantQ {
		t.Errorf("update filter %s\nwant %s", q, wantQ)
	}
	if up, ok := stmt.Lookup("upsert").BooleanOK(); !ok || !up {
		t.Errorf("update statement %v is not an upsert", stmt)
	}
	if multi, ok := stmt.Lookup("multi").BooleanOK(); ok && multi {
		t.Errorf("update statement %v is multi", stmt)
	}
	if u := stmt.Lookup("u").Document(); u.Lookup("epoch").Int64() != 5 {
		t.Errorf("replacement %v does not carry epoch 5", u)
	}
	if wc := updates[0].Command.Lookup("writeConcern", "w"); wc.StringValue() != "majority" {
		t.Errorf("writeConcern.w = %v, want majority", wc)
	}

	rec.reset()
	err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 4, Settled: 2, UpdatedAt: t0})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save with a lower epoch: %v, want ErrFenced", err)
	}
	if !strings.Contains(err.Error(), "stored epoch 5") {
		t.Errorf("fenced error %q does not name the stored epoch", err)
	}
	updates = rec.named("update")
	if len(updates) != 2 {
		t.Fatalf("fenced Save sent %d updates, want 2 (the retry after a first DuplicateKey)", len(updates))
	}
	for _, u := range updates {
		if code := u.Reply.Lookup("writeErrors").Array().Index(0).Document().Lookup("code").AsInt64(); code != 11000 {
			t.Errorf("fenced update reply %v, want a DuplicateKey (11000) write error", u.Reply)
		}
	}
	cp, _, err := s.Load(ctx, store.Scope{Stream: "orders"})
	if err != nil || cp.Epoch != 5 || cp.Settled != 1 {
		t.Fatalf("after the fenced save: %+v, %v; want epoch 5 settled 1", cp, err)
	}
}

// TestSaveRetriesOneDuplicateKey: a DuplicateKey on the first try (as a concurrent first save
// of the same stream produces) is retried; a second one means fenced.
func TestSaveRetriesOneDuplicateKey(t *testing.T) {
	needSim(t)
	e := newEnv(t, mongosim.Options{})
	s, _ := e.newStore(t, mongostore.Options{})
	ctx := testCtx(t)
	failUpdates := func(n int) {
		t.Helper()
		if err := e.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: n}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "errorCode", Value: 11000}}}}); err != nil {
			t.Fatal(err)
		}
	}
	failUpdates(1)
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: 1}); err != nil {
		t.Fatalf("Save after one DuplicateKey: %v, want success on the retry", err)
	}
	// Two DuplicateKeys while the stored record accepts the save: neither fenced nor backward
	// (a verdict the stored record does not support would stop or mislead the stream), but a
	// failure that the caller retries.
	failUpdates(2)
	err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: 2})
	if err == nil || errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrBackward) {
		t.Fatalf("Save after two DuplicateKeys over a record that accepts it: %v, want a plain error", err)
	}
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: 2}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	// Two DuplicateKeys over a higher epoch: fenced.
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 3, Settled: 3}); err != nil {
		t.Fatal(err)
	}
	failUpdates(2)
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 2, Settled: 4}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Save after two DuplicateKeys over epoch 3: %v, want ErrFenced", err)
	}
}

// TestServerDown: a frozen or closed server makes calls fail by the context's deadline, not
// hang; a cancelled call returns context.Canceled promptly.
func TestServerDown(t *testing.T) {
	needSim(t)
	bounded := func(t *testing.T, what string, d time.Duration, want error, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		if took := time.Since(start); took > d+2*time.Second {
			t.Errorf("%s took %s with a %s deadline", what, took, d)
		}
		if err == nil {
			t.Fatalf("%s on a server that is down succeeded", what)
		}
		if want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	calls := func(s *mongostore.Store) map[string]func(ctx context.Context) error {
		return map[string]func(ctx context.Context) error{
			"Save": func(ctx context.Context) error { return s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1}) },
			"Load": func(ctx context.Context) error { _, _, err := s.Load(ctx, store.Scope{Stream: "orders"}); return err },
			"PutDeadLetter": func(ctx context.Context) error {
				return s.PutDeadLetter(ctx, store.DeadLetter{ID: "x", Stream: "orders"})
			},
			"ListDeadLetters": func(ctx context.Context) error {
				_, err := s.ListDeadLetters(ctx, store.Scope{Stream: "orders"}, 0)
				return err
			},
			"RecordGap": func(ctx context.Context) error { return s.RecordGap(ctx, store.Gap{ID: "g", Stream: "orders"}) },
		}
	}

	t.Run("paused", func(t *testing.T) {
		e := newEnv(t, mongosim.Options{})
		s, _ := e.newStore(t, mongostore.Options{})
		e.srv.Pause()
		defer e.srv.Resume()
		for name, call := range calls(s) {
			bounded(t, name, 300*time.Millisecond, context.DeadlineExceeded, call)
		}
	})
	t.Run("closed", func(t *testing.T) {
		e := newEnv(t, mongosim.Options{})
		s, _ := e.newStore(t, mongostore.Options{})
		_ = e.srv.Close()
		for name, call := range calls(s) {
			bounded(t, name, 300*time.Millisecond, nil, call)
		}
	})
	t.Run("cancelled while blocked", func(t *testing.T) {
		e := newEnv(t, mongosim.Options{})
		s, _ := e.newStore(t, mongostore.Options{})
		e.srv.Pause()
		defer e.srv.Resume()
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(100*time.Millisecond, cancel)
		defer timer.Stop()
		start := time.Now()
		err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Save cancelled while the server is frozen: %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("cancelled Save returned after %s", took)
		}
	})
}

// TestKilledConnectionsLoseNoAckedSave: while every connection is killed over and over, a save
// or dead letter that reported success is never lost (retryable writes), and a checkpoint
// never moves past the last attempted one.
func TestKilledConnectionsLoseNoAckedSave(t *testing.T) {
	needSim(t)
	e := newEnv(t, mongosim.Options{})
	s, _ := e.newStore(t, mongostore.Options{})

	stop := make(chan struct{})
	var kills atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
				e.srv.KillAllConnections()
				kills.Add(1)
			}
		}
	})

	const n = 300
	var lastAcked, lastTried uint64
	var failed int
	var ackedDL []string
	for i := uint64(1); i <= n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lastTried = i
		if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: i}); err == nil {
			lastAcked = i
		} else {
			failed++
		}
		id := fmt.Sprintf("dl-%03d", i)
		if err := s.PutDeadLetter(ctx, store.DeadLetter{ID: id, Stream: "orders", CreatedAt: t0}); err == nil {
			ackedDL = append(ackedDL, id)
		}
		cancel()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d saves, %d failed, %d kills", n, failed, kills.Load())

	ctx := testCtx(t)
	var cp store.Checkpoint
	var err error
	for attempt := 0; ; attempt++ { // the last kill may still be in the client's way
		cp, _, err = s.Load(ctx, store.Scope{Stream: "orders"})
		if err == nil || attempt == 20 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if cp.Settled < lastAcked || cp.Settled > lastTried {
		t.Fatalf("stored checkpoint settled %d, want between the last acknowledged %d and the last tried %d",
			cp.Settled, lastAcked, lastTried)
	}
	dls, err := s.ListDeadLetters(ctx, store.Scope{Stream: "orders"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	have := make(map[string]bool, len(dls))
	for _, d := range dls {
		have[d.ID] = true
	}
	for _, id := range ackedDL {
		if !have[id] {
			t.Errorf("acknowledged dead letter %s lost", id)
		}
	}
}

// TestSaveAcrossStepDown: a save issued while the primary steps down succeeds once a primary is
// back (the driver retries within the context's deadline).
func TestSaveAcrossStepDown(t *testing.T) {
	needSim(t)
	e := newEnv(t, mongosim.Options{})
	s, _ := e.newStore(t, mongostore.Options{})
	ctx := testCtx(t)
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.StepDown(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, store.Checkpoint{Stream: "orders", Epoch: 1, Settled: 2}); err != nil {
		t.Fatalf("Save across a stepdown: %v", err)
	}
	if cp, _, err := s.Load(ctx, store.Scope{Stream: "orders"}); err != nil || cp.Settled != 2 {
		t.Fatalf("Load after the stepdown: %+v, %v", cp, err)
	}
}

// TestCustomCollections: Options name the collections.
func TestCustomCollections(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	db := e.db(t)
	s, err := mongostore.New(db, mongostore.Options{CheckpointCollection: "cp", DeadLetterCollection: "dl", GapCollection: "gaps"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, store.Checkpoint{Stream: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDeadLetter(ctx, store.DeadLetter{ID: "d", Stream: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordGap(ctx, store.Gap{ID: "g", Stream: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cp", "dl", "gaps"} {
		if n, err := db.Collection(c).CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
			t.Errorf("collection %s holds %d documents (%v), want 1", c, n, err)
		}
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "_wt_") {
			t.Errorf("default collection %s created although Options named others", n)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := mongostore.New(nil, mongostore.Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	for field, opts := range map[string]mongostore.Options{
		"CheckpointCollection": {CheckpointCollection: "a$b"},
		"DeadLetterCollection": {DeadLetterCollection: "system.x"},
		"GapCollection":        {GapCollection: "g\x00"},
	} {
		err := opts.Validate()
		if err == nil || !strings.Contains(err.Error(), "Options."+field) {
			t.Errorf("Validate(%+v) = %v, want an error naming Options.%s", opts, err, field)
		}
	}
	if err := (mongostore.Options{}).Validate(); err != nil {
		t.Errorf("zero Options: %v", err)
	}
}

// TestOversizedDeadLetterKeepsRecord: a change event near the 16 MiB limit cannot be stored
// inside a dead letter; the record is stored without it (eventOmitted) rather than failing
// forever, and a large event that fits is stored whole.
func TestOversizedDeadLetterKeepsRecord(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	s, _ := e.newStore(t, mongostore.Options{})
	ctx := testCtx(t)
	event := func(size int) bson.Raw {
		return mustMarshal(bson.D{{Key: "operationType", Value: "insert"},
			{Key: "fullDocument", Value: bson.D{{Key: "blob", Value: strings.Repeat("x", size)}}}})
	}
	key := mustMarshal(bson.D{{Key: "_id", Value: 1}})
	big := store.DeadLetter{ID: "big", Stream: "orders", Token: mustMarshal(bson.D{{Key: "_data", Value: "big"}}),
		OperationType: "insert", DocumentKey: key, Namespace: "shop.orders", Event: event(16*1024*1024 - 200),
		Error: "boom", Attempts: 3, CreatedAt: t0}
	if err := s.PutDeadLetter(ctx, big); err != nil {
		t.Fatalf("PutDeadLetter of a 16 MiB event: %v", err)
	}
	got, err := s.GetDeadLetter(ctx, store.Scope{Stream: "orders"}, "big")
	if err != nil {
		t.Fatal(err)
	}
	if !got.EventOmitted || got.Event != nil {
		t.Fatalf("oversized dead letter: EventOmitted %v, Event of %d bytes; want the event omitted", got.EventOmitted, len(got.Event))
	}
	if !bytes.Equal(got.DocumentKey, key) || got.Namespace != "shop.orders" || got.Attempts != 3 {
		t.Fatalf("oversized dead letter lost its identity: %+v", got)
	}

	fits := big
	fits.ID, fits.Event = "fits", event(8*1024*1024)
	if err := s.PutDeadLetter(ctx, fits); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetDeadLetter(ctx, store.Scope{Stream: "orders"}, "fits")
	if err != nil {
		t.Fatal(err)
	}
	if got.EventOmitted || !bytes.Equal(got.Event, fits.Event) {
		t.Fatalf("an 8 MiB event was not stored whole (EventOmitted %v, %d bytes)", got.EventOmitted, len(got.Event))
	}
}
