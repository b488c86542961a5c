package mongosim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// wDocs returns the committed documents of db.coll in natural order, read from the engine.
func wDocs(srv *Server, db, coll string) []bson.D {
	e := srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.collLocked(db, coll)
	if c == nil {
		return nil
	}
	var out []bson.D
	c.scan(func(d bson.D) bool { out = append(out, d); return true })
	return out
}

// wOplog returns the retained oplog entries, oldest first.
func wOplog(srv *Server) []*oplogEntry {
	e := srv.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*oplogEntry, e.oplog.len())
	for i := range out {
		out[i] = e.oplog.at(i)
	}
	return out
}

// wDocEntries returns the document entries (insert/update/replace/delete) of db.coll.
func wDocEntries(srv *Server, db, coll string) []*oplogEntry {
	var out []*oplogEntry
	for _, en := range wOplog(srv) {
		if en.db == db && en.coll == coll {
			switch en.op {
			case "insert", "update", "replace", "delete":
				out = append(out, en)
			}
		}
	}
	return out
}

// wRun runs a command and returns its raw reply (also when it reports writeErrors), failing
// the test on a command error.
func wRun(t *testing.T, db *mongo.Database, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := db.RunCommand(testCtx(t), cmd).Raw()
	var wex mongo.WriteException
	if errors.As(err, &wex) && wex.Raw != nil {
		return wex.Raw
	}
	if err != nil {
		t.Fatalf("%s: %v", cmd[0].Key, err)
	}
	return raw
}

// wJSON renders a document as relaxed-free canonical extended JSON, for comparisons.
func wJSON(v any) string {
	if v == nil {
		return "<nil>"
	}
	b, err := bson.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return bson.Raw(b).String()
}

// wAllJSON renders documents one after the other, for comparisons.
func wAllJSON(docs []bson.D) string {
	parts := make([]string, len(docs))
	for i, d := range docs {
		parts[i] = wJSON(d)
	}
	return strings.Join(parts, " ")
}

// wRunErr runs a command that must fail and returns its command error.
func wRunErr(t *testing.T, db *mongo.Database, cmd bson.D) mongo.CommandError {
	t.Helper()
	err := db.RunCommand(testCtx(t), cmd).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want a command error, got %v", cmd[0].Key, err)
	}
	return ce
}

// wWantType fails unless raw has key with the BSON type want.
func wWantType(t *testing.T, raw bson.Raw, key string, want bson.Type) bson.RawValue {
	t.Helper()
	v, err := raw.LookupErr(strings.Split(key, ".")...)
	if err != nil {
		t.Fatalf("reply %s has no %s", raw, key)
	}
	if v.Type != want {
		t.Fatalf("%s: type %s, want %s (reply %s)", key, v.Type, want, raw)
	}
	return v
}

func wInt32(t *testing.T, raw bson.Raw, key string) int32 {
	t.Helper()
	return wWantType(t, raw, key, bson.TypeInt32).Int32()
}

func TestWriteInsertReplyShape(t *testing.T) {
	_, cl := startServer(t, Options{})
	db := cl.Database("w")
	raw := wRun(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "x", Value: 2}}}}})
	if n := wInt32(t, raw, "n"); n != 2 {
		t.Fatalf("n = %d, want 2", n)
	}
	wWantType(t, raw, "ok", bson.TypeDouble)
	if _, err := raw.LookupErr("writeErrors"); err == nil {
		t.Fatalf("unexpected writeErrors in %s", raw)
	}
	res, err := db.Collection("c").InsertMany(testCtx(t), []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}})
	if err != nil || len(res.InsertedIDs) != 2 {
		t.Fatalf("InsertMany: %v %v", res, err)
	}
}

func TestWriteInsertGeneratesIDFirst(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	wRun(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "y", Value: 1}, {Key: "_id", Value: "late"}}}}})
	docs := wDocs(srv, "w", "c")
	if len(docs) != 2 {
		t.Fatalf("docs = %v", docs)
	}
	if docs[0][0].Key != "_id" {
		t.Fatalf("generated _id not first: %v", docs[0])
	}
	if _, ok := docs[0][0].Value.(bson.ObjectID); !ok {
		t.Fatalf("generated _id is %T, want ObjectID", docs[0][0].Value)
	}
	if docs[1][0].Key != "_id" || docs[1][0].Value != "late" || docs[1][1].Key != "y" {
		t.Fatalf("_id not moved first: %v", docs[1])
	}
}

func TestWriteInsertDuplicateKeyOrdered(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	raw := wRun(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}})
	if n := wInt32(t, raw, "n"); n != 1 {
		t.Fatalf("ordered: n = %d, want 1 (stop at the first error)", n)
	}
	we := raw.Lookup("writeErrors").Array()
	vals, _ := we.Values()
	if len(vals) != 1 {
		t.Fatalf("writeErrors = %s", we)
	}
	e0 := vals[0].Document()
	if wInt32(t, e0, "index") != 1 || wInt32(t, e0, "code") != 11000 {
		t.Fatalf("write error = %s", e0)
	}
	if got, want := e0.Lookup("errmsg").StringValue(), "E11000 duplicate key error collection: w.c index: _id_ dup key: { _id: 1 }"; got != want {
		t.Fatalf("errmsg = %q, want %q", got, want)
	}
	if kp := e0.Lookup("keyPattern").Document().String(); kp != `{"_id": {"$numberInt":"1"}}` {
		t.Fatalf("keyPattern = %s", kp)
	}
	if kv := e0.Lookup("keyValue").Document().String(); kv != `{"_id": {"$numberInt":"1"}}` {
		t.Fatalf("keyValue = %s", kv)
	}
	if got := len(wDocs(srv, "w", "c")); got != 1 {
		t.Fatalf("stored %d documents, want 1", got)
	}

	// Through the driver: a WriteException that IsDuplicateKeyError recognises.
	_, err := db.Collection("c").InsertOne(testCtx(t), bson.D{{Key: "_id", Value: 1}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("IsDuplicateKeyError(%v) = false", err)
	}
	var wex mongo.WriteException
	if !errors.As(err, &wex) || len(wex.WriteErrors) != 1 || wex.WriteErrors[0].Code != 11000 {
		t.Fatalf("want a WriteException with one 11000, got %#v", err)
	}
}

func TestWriteInsertDuplicateKeyUnordered(t *testing.T) {
	srv, cl := startServer(t, Options{})
	coll := cl.Database("w").Collection("c")
	_, err := coll.InsertMany(testCtx(t), []any{
		bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}},
	}, options.InsertMany().SetOrdered(false))
	var wex mongo.BulkWriteException
	if !errors.As(err, &wex) {
		t.Fatalf("want BulkWriteException, got %v", err)
	}
	if len(wex.WriteErrors) != 2 || wex.WriteErrors[0].Index != 1 || wex.WriteErrors[1].Index != 3 {
		t.Fatalf("write errors = %+v, want indexes 1 and 3", wex.WriteErrors)
	}
	if got := len(wDocs(srv, "w", "c")); got != 3 {
		t.Fatalf("stored %d documents, want 3 (unordered continues)", got)
	}
}

func TestWriteInsertValidation(t *testing.T) {
	_, cl := startServer(t, Options{})
	db := cl.Database("w")
	cases := []struct {
		doc  bson.D
		code int32
	}{
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$a", Value: 1}}}}, codeDollarPrefixedFieldName},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$b", Value: 1}}}}}}, codeDollarPrefixedFieldName},
		{bson.D{{Key: "_id", Value: bson.A{1, 2}}}, codeInvalidIdField},
		{bson.D{{Key: "_id", Value: bson.Regex{Pattern: "a"}}}, codeBadValue},
	}
	for _, tc := range cases {
		raw := wRun(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{tc.doc}}})
		vals, _ := raw.Lookup("writeErrors").Array().Values()
		if len(vals) != 1 || wInt32(t, vals[0].Document(), "code") != tc.code {
			t.Fatalf("insert %v: reply %s, want code %d", tc.doc, raw, tc.code)
		}
	}
	// Top-level and nested $-prefixed fields are stored (5.0+).
	raw := wRun(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 9}, {Key: "$price", Value: 50}, {Key: "a", Value: bson.D{{Key: "$x", Value: 1}}}}}}})
	if wInt32(t, raw, "n") != 1 {
		t.Fatalf("$-prefixed fields: %s", raw)
	}
	got, err := db.Collection("c").FindOne(context.Background(), bson.D{{Key: "_id", Value: 9}}).Raw()
	if err != nil || got.Lookup("$price").AsInt64() != 50 {
		t.Fatalf("stored $price: %s, %v", got, err)
	}
}

func TestWriteInsertTooLarge(t *testing.T) {
	big := strings.Repeat("x", maxBSONSize)
	_, _, err := prepareInsert(bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: big}})
	if err == nil || err.Code != codeBSONObjectTooLarge {
		t.Fatalf("prepareInsert(17MB) = %v, want code %d", err, codeBSONObjectTooLarge)
	}
	if _, _, err := prepareInsert(bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: big[:maxBSONSize-100]}}); err != nil {
		t.Fatalf("prepareInsert(just under 16MB) = %v", err)
	}
}

func TestWriteUpdateReplyShapes(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	coll := db.Collection("c")
	ctx := testCtx(t)
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "b"}, {Key: "v", Value: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	// One statement modifies 2, one is a no-op, one upserts.
	raw := wRun(t, db, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "a"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "multi", Value: true}},
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "b"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "z"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 7}}}}}, {Key: "upsert", Value: true}},
	}}})
	if n := wInt32(t, raw, "n"); n != 4 {
		t.Fatalf("n = %d, want 4 (2 + 1 matched + 1 upserted)", n)
	}
	if m := wInt32(t, raw, "nModified"); m != 2 {
		t.Fatalf("nModified = %d, want 2 (no-op $set does not count)", m)
	}
	ups, _ := raw.Lookup("upserted").Array().Values()
	if len(ups) != 1 || wInt32(t, ups[0].Document(), "index") != 2 {
		t.Fatalf("upserted = %s", raw.Lookup("upserted"))
	}
	upID := wWantType(t, ups[0].Document(), "_id", bson.TypeObjectID).ObjectID()
	var found bool
	for _, d := range wDocs(srv, "w", "c") {
		if d[0].Value == upID {
			found = true
			if k, _ := lookupD(d, "k"); k != "z" {
				t.Fatalf("upserted doc %v lacks the query's equality field", d)
			}
		}
	}
	if !found {
		t.Fatalf("upserted document %v not stored", upID)
	}
	// No upserted field when nothing was upserted.
	raw = wRun(t, db, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}},
	}}})
	if _, err := raw.LookupErr("upserted"); err == nil {
		t.Fatalf("empty upserted must be omitted: %s", raw)
	}

	// Driver results.
	ur, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}})
	if err != nil || ur.MatchedCount != 1 || ur.ModifiedCount != 1 || ur.UpsertedID != nil {
		t.Fatalf("UpdateOne = %+v, %v", ur, err)
	}
	ur, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}})
	if err != nil || ur.MatchedCount != 1 || ur.ModifiedCount != 0 {
		t.Fatalf("no-op UpdateOne = %+v, %v", ur, err)
	}
	ur, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "all", Value: true}}}})
	if err != nil || ur.MatchedCount != 4 || ur.ModifiedCount != 4 {
		t.Fatalf("UpdateMany = %+v, %v", ur, err)
	}
	ur, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 42}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil || ur.MatchedCount != 0 || ur.UpsertedCount != 1 || ur.UpsertedID != int32(42) {
		t.Fatalf("upsert UpdateOne = %+v, %v", ur, err)
	}
	rr, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 42}}, bson.D{{Key: "r", Value: 1}})
	if err != nil || rr.MatchedCount != 1 || rr.ModifiedCount != 1 {
		t.Fatalf("ReplaceOne = %+v, %v", rr, err)
	}
	rr, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 43}}, bson.D{{Key: "r", Value: 2}}, options.Replace().SetUpsert(true))
	if err != nil || rr.UpsertedID != int32(43) {
		t.Fatalf("upsert ReplaceOne = %+v, %v", rr, err)
	}
	for _, d := range wDocs(srv, "w", "c") {
		if d[0].Value == int32(42) && (len(d) != 2 || d[1].Key != "r") {
			t.Fatalf("replacement kept old fields: %v", d)
		}
		if d[0].Value == int32(43) && (len(d) != 2 || d[1].Key != "r") {
			t.Fatalf("replacement upsert = %v, want {_id: 43, r: 2}", d)
		}
	}
}

func TestWriteUpdateUpsertSeed(t *testing.T) {
	srv, cl := startServer(t, Options{})
	coll := cl.Database("w").Collection("c")
	ctx := testCtx(t)
	ur, err := coll.UpdateOne(ctx,
		bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: "x"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: 5}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: true}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: 1}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil || ur.UpsertedCount != 1 {
		t.Fatalf("upsert: %+v %v", ur, err)
	}
	docs := wDocs(srv, "w", "c")
	if len(docs) != 1 {
		t.Fatalf("docs = %v", docs)
	}
	d := docs[0]
	if _, ok := d[0].Value.(bson.ObjectID); !ok || d[0].Key != "_id" {
		t.Fatalf("upserted _id = %v, want a generated ObjectID first", d)
	}
	for _, want := range []string{"a", "b", "s", "created"} {
		if _, ok := lookupD(d, want); !ok {
			t.Fatalf("upserted doc %v lacks %s", d, want)
		}
	}
	if _, ok := lookupD(d, "n"); ok {
		t.Fatalf("upserted doc %v took a non-equality field", d)
	}
	// $setOnInsert applies only on insert.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: 2}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	if v, _ := lookupD(wDocs(srv, "w", "c")[0], "created"); v != int32(1) {
		t.Fatalf("$setOnInsert applied on update: created = %v", v)
	}
}

func TestWriteUpdateErrors(t *testing.T) {
	srv, cl := startServer(t, Options{})
	coll := cl.Database("w").Collection("c")
	ctx := testCtx(t)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: 2}}}})
	var wex mongo.WriteException
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeImmutableField {
		t.Fatalf("changing _id: %v, want code 66", err)
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$bogus", Value: bson.D{{Key: "a", Value: 1}}}})
	if !errors.As(err, &wex) {
		t.Fatalf("unknown operator: %v, want a write error", err)
	}
	for _, st := range []bson.D{
		{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}},
	} {
		raw := wRun(t, cl.Database("w"), bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{st}}})
		vals, _ := raw.Lookup("writeErrors").Array().Values()
		if len(vals) != 1 || wInt32(t, vals[0].Document(), "code") != codeUnsupported ||
			!strings.Contains(vals[0].Document().Lookup("errmsg").StringValue(), "mongosim does not support") {
			t.Fatalf("unsupported option %v: %s", st, raw)
		}
	}
	// updateOne's sort (8.0) picks the document to update.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	raw := wRun(t, cl.Database("w"), bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "picked", Value: true}}}}}, {Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}}}}})
	if wInt32(t, raw, "nModified") != 1 {
		t.Fatalf("update with sort: %s", raw)
	}
	if _, picked := lookupD(wDocs(srv, "w", "c")[1], "picked"); !picked {
		t.Fatalf("sort {_id: -1} did not pick _id 2: %v", wDocs(srv, "w", "c"))
	}
	// Unknown statement fields fail.
	raw = wRun(t, cl.Database("w"), bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: int32(1)}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}}}}})
	if vals, _ := raw.Lookup("writeErrors").Array().Values(); len(vals) != 1 || wInt32(t, vals[0].Document(), "code") != 40415 {
		t.Fatalf("delete with an unknown field: %s", raw)
	}
	// A simple collation is accepted.
	raw = wRun(t, cl.Database("w"), bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}}}}}})
	if wInt32(t, raw, "nModified") != 1 {
		t.Fatalf("simple collation: %s", raw)
	}
}

func TestWriteUpdateArrayFiltersPipelineLet(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	coll := db.Collection("c")
	ctx := testCtx(t)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.A{1, 5, 9}}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "g.$[big]", Value: 0}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "big", Value: bson.D{{Key: "$gt", Value: 4}}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := lookupD(wDocs(srv, "w", "c")[0], "g"); fmt.Sprint(g) != "[1 0 0]" {
		t.Fatalf("arrayFilters: g = %v, want [1 0 0]", g)
	}
	// The positional operator gets the statement's filter.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "items", Value: bson.A{
		bson.D{{Key: "k", Value: 1}, {Key: "q", Value: 1}}, bson.D{{Key: "k", Value: 2}, {Key: "q", Value: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "items.k", Value: 2}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "items.$.q", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	if items, _ := lookupD(wDocs(srv, "w", "c")[1], "items"); wJSON(bson.D{{Key: "i", Value: items}}) != `{"i": [{"k": {"$numberInt":"1"},"q": {"$numberInt":"1"}},{"k": {"$numberInt":"2"},"q": {"$numberInt":"5"}}]}` {
		t.Fatalf("positional $: items = %v", items)
	}
	// Pipeline update with a let variable and $$NOW.
	raw := wRun(t, db, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.A{
			bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "$$who"}, {Key: "at", Value: "$$NOW"}}}}}}}}},
		{Key: "let", Value: bson.D{{Key: "who", Value: "alice"}}}})
	if wInt32(t, raw, "nModified") != 1 {
		t.Fatalf("pipeline update: %s", raw)
	}
	d := wDocs(srv, "w", "c")[0]
	if v, _ := lookupD(d, "owner"); v != "alice" {
		t.Fatalf("let variable: owner = %v", v)
	}
	if v, _ := lookupD(d, "at"); fmt.Sprintf("%T", v) != "bson.DateTime" {
		t.Fatalf("$$NOW: at = %T", v)
	}
}

func TestWriteDelete(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	coll := db.Collection("c")
	ctx := testCtx(t)
	for i := 0; i < 5; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "even", Value: i%2 == 0}}); err != nil {
			t.Fatal(err)
		}
	}
	dr, err := coll.DeleteOne(ctx, bson.D{{Key: "even", Value: true}})
	if err != nil || dr.DeletedCount != 1 {
		t.Fatalf("DeleteOne = %+v %v", dr, err)
	}
	if d := wDocs(srv, "w", "c"); d[0][0].Value != int32(1) {
		t.Fatalf("DeleteOne removed not the first match in natural order: %v", d)
	}
	dr, err = coll.DeleteMany(ctx, bson.D{{Key: "even", Value: true}})
	if err != nil || dr.DeletedCount != 2 {
		t.Fatalf("DeleteMany = %+v %v", dr, err)
	}
	raw := wRun(t, db, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: int32(0)}}}}})
	if wInt32(t, raw, "n") != 2 {
		t.Fatalf("delete all: %s", raw)
	}
	raw = wRun(t, db, bson.D{{Key: "delete", Value: "missing"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: int32(0)}}}}})
	if wInt32(t, raw, "n") != 0 {
		t.Fatalf("delete on a missing collection: %s", raw)
	}
}

func TestWriteOplogEntries(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	coll := db.Collection("c")
	ctx := testCtx(t)
	wRun(t, db, bson.D{{Key: "create", Value: "c"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}})
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}, {Key: "$unset", Value: bson.D{{Key: "zz", Value: ""}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}}); err != nil {
		t.Fatal(err) // no-op: no entry
	}
	if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "b", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	ens := wDocEntries(srv, "w", "c")
	var ops []string
	for i, en := range ens {
		ops = append(ops, en.op)
		if i > 0 && !tsLess(ens[i-1].ts, en.ts) {
			t.Fatalf("entry %d ts %v not after %v: one cluster time per document write", i, en.ts, ens[i-1].ts)
		}
		if en.collUUID.Subtype != 4 || len(en.collUUID.Data) != 16 {
			t.Fatalf("entry %d collUUID = %v", i, en.collUUID)
		}
		if en.lsid != nil || en.txnNumber != nil {
			t.Fatalf("non-transactional entry %d has lsid/txnNumber", i)
		}
	}
	if got := strings.Join(ops, ","); got != "insert,insert,update,update,replace,delete" {
		t.Fatalf("ops = %s", got)
	}
	up := ens[2]
	if got := wJSON(up.updateDesc); got != `{"updatedFields": {"a": {"$numberInt":"2"}},"removedFields": [],"truncatedArrays": []}` {
		t.Fatalf("updateDesc = %s", got)
	}
	if wJSON(up.docKey) != `{"_id": {"$numberInt":"1"}}` || up.pre == nil || up.post == nil {
		t.Fatalf("update entry docKey %v pre %v post %v", up.docKey, up.pre, up.post)
	}
	if wJSON(ens[4].doc) != `{"_id": {"$numberInt":"1"},"b": {"$numberInt":"1"}}` || wJSON(ens[4].pre) != `{"_id": {"$numberInt":"1"},"a": {"$numberInt":"2"}}` {
		t.Fatalf("replace entry doc %v pre %v", ens[4].doc, ens[4].pre)
	}
	if wJSON(ens[5].pre) != `{"_id": {"$numberInt":"2"},"a": {"$numberInt":"2"}}` {
		t.Fatalf("delete pre-image = %v", ens[5].pre)
	}
	// Without pre-images enabled, no pre/post are kept.
	if _, err := db.Collection("plain").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("plain").DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if pe := wDocEntries(srv, "w", "plain"); len(pe) != 2 || pe[1].pre != nil {
		t.Fatalf("plain entries = %v", pe)
	}
}

func TestWriteFindAndModifyShapes(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("w")
	ctx := testCtx(t)
	if _, err := db.Collection("c").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	fam := func(extra ...bson.E) bson.Raw {
		return wRun(t, db, append(bson.D{{Key: "findAndModify", Value: "c"}}, extra...))
	}
	check := func(raw bson.Raw, leo, value string) {
		t.Helper()
		if got := raw.Lookup("lastErrorObject").Document().String(); got != leo {
			t.Fatalf("lastErrorObject = %s, want %s", got, leo)
		}
		if got := raw.Lookup("value").String(); got != value {
			t.Fatalf("value = %s, want %s", got, value)
		}
	}
	one := `{"$numberInt":"1"}`
	// update matched: pre-image; sort picks _id 2.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "x", Value: 1}}}, bson.E{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}},
		bson.E{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}),
		`{"n": `+one+`,"updatedExisting": true}`, `{"_id": {"$numberInt":"2"},"x": `+one+`}`)
	// new: true returns the post-image, with fields projection.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 2}}}, bson.E{Key: "new", Value: true},
		bson.E{Key: "fields", Value: bson.D{{Key: "_id", Value: 0}}},
		bson.E{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}),
		`{"n": `+one+`,"updatedExisting": true}`, `{"x": {"$numberInt":"3"}}`)
	// no match, no upsert.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 9}}}, bson.E{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}),
		`{"n": {"$numberInt":"0"},"updatedExisting": false}`, `null`)
	// upsert, new false: value null.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 10}}}, bson.E{Key: "upsert", Value: true},
		bson.E{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}),
		`{"n": `+one+`,"updatedExisting": false,"upserted": {"$numberInt":"10"}}`, `null`)
	// upsert, new true: the inserted document.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 11}}}, bson.E{Key: "upsert", Value: true}, bson.E{Key: "new", Value: true},
		bson.E{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}),
		`{"n": `+one+`,"updatedExisting": false,"upserted": {"$numberInt":"11"}}`, `{"_id": {"$numberInt":"11"},"x": `+one+`}`)
	// remove matched / not matched.
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 11}}}, bson.E{Key: "remove", Value: true}),
		`{"n": `+one+`}`, `{"_id": {"$numberInt":"11"},"x": `+one+`}`)
	check(fam(bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: 11}}}, bson.E{Key: "remove", Value: true}),
		`{"n": {"$numberInt":"0"}}`, `null`)
	// Invalid combinations.
	ce := wRunErr(t, db, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "remove", Value: true}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}})
	if ce.Code != codeFailedToParse {
		t.Fatalf("remove+update: %v", ce)
	}
	before := wAllJSON(wDocs(srv, "w", "c"))
	ce = wRunErr(t, db, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "bad", Value: 1}}}}},
		{Key: "fields", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}}})
	if after := wAllJSON(wDocs(srv, "w", "c")); ce.Code == 0 || after != before {
		t.Fatalf("invalid projection: %+v; documents before %s after %s", ce, before, after)
	}

	// Driver helpers.
	coll := db.Collection("c")
	var got bson.M
	err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 20}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&got)
	if err != nil || got["y"] != int32(1) {
		t.Fatalf("FindOneAndUpdate upsert After = %v, %v", got, err)
	}
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 21}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}},
		options.FindOneAndUpdate().SetUpsert(true)).Err()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("FindOneAndUpdate upsert Before = %v, want ErrNoDocuments", err)
	}
	got = nil
	if err := coll.FindOneAndReplace(ctx, bson.D{{Key: "_id", Value: 21}}, bson.D{{Key: "z", Value: 2}}).Decode(&got); err != nil || got["y"] != int32(1) {
		t.Fatalf("FindOneAndReplace = %v, %v", got, err)
	}
	got = nil
	if err := coll.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: 21}}).Decode(&got); err != nil || got["z"] != int32(2) {
		t.Fatalf("FindOneAndDelete = %v, %v", got, err)
	}
}

func TestWriteFindAndModifyDuplicateKey(t *testing.T) {
	_, cl := startServer(t, Options{})
	db := cl.Database("w")
	ctx := testCtx(t)
	coll := db.Collection("users")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	ce := wRunErr(t, db, bson.D{{Key: "findAndModify", Value: "users"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 2}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a"}}}}}})
	if ce.Code != codeDuplicateKey || ce.Message != `E11000 duplicate key error collection: w.users index: email_1 dup key: { email: "a" }` {
		t.Fatalf("dup key command error = %+v", ce)
	}
	if kp := ce.Raw.Lookup("keyPattern").Document().String(); kp != `{"email": {"$numberInt":"1"}}` {
		t.Fatalf("keyPattern = %s", kp)
	}
	if kv := ce.Raw.Lookup("keyValue").Document().String(); kv != `{"email": "a"}` {
		t.Fatalf("keyValue = %s", kv)
	}
	err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "b"}}}}, options.FindOneAndUpdate().SetUpsert(true)).Err()
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("upsert into a duplicate: IsDuplicateKeyError(%v) = false", err)
	}
}

// TestWriteUpsertRace runs many concurrent upserts of one key from two clients: exactly one
// inserts, every other one updates the document it inserted.
func TestWriteUpsertRace(t *testing.T) {
	srv, cl1 := startServer(t, Options{})
	cl2 := connectClient(t, srv, nil)
	ctx := testCtx(t)
	const perClient = 25
	var inserted, updated atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4*perClient)
	for _, cl := range []*mongo.Client{cl1, cl2} {
		coll := cl.Database("w").Collection("lease")
		for i := 0; i < perClient; i++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				res := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "job"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
					options.FindOneAndUpdate().SetUpsert(true))
				switch err := res.Err(); {
				case errors.Is(err, mongo.ErrNoDocuments):
					inserted.Add(1) // the pre-image is absent only for the upsert that inserted
				case err == nil:
					updated.Add(1)
				default:
					errs <- err
				}
			}()
			go func() {
				defer wg.Done()
				ur, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "job"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
					options.UpdateOne().SetUpsert(true))
				if err != nil {
					errs <- err
					return
				}
				if ur.UpsertedCount == 1 {
					inserted.Add(1)
				} else {
					updated.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if inserted.Load() != 1 || updated.Load() != 4*perClient-1 {
		t.Fatalf("inserted %d, updated %d: want exactly one insert", inserted.Load(), updated.Load())
	}
	docs := wDocs(srv, "w", "lease")
	if len(docs) != 1 {
		t.Fatalf("documents = %v", docs)
	}
	if n, _ := lookupD(docs[0], "n"); n != int32(4*perClient) {
		t.Fatalf("n = %v, want %d (no lost update)", n, 4*perClient)
	}
}

func TestWriteCompactionKeepsScansProportional(t *testing.T) {
	c := newCollection("d", "c")
	for i := 0; i < 1000; i++ {
		doc, size, err := prepareInsert(bson.D{{Key: "_id", Value: int32(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.insertSlot(&docSlot{doc: doc, key: query.HashKey(doc[0].Value), size: size}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 990; i++ {
		c.removeSlot(query.HashKey(int32(i)))
	}
	if len(c.docs) > 2*c.count()+32 {
		t.Fatalf("after deleting 990 of 1000: %d slots for %d live documents", len(c.docs), c.count())
	}
	var ids []any
	c.scan(func(d bson.D) bool { ids = append(ids, d[0].Value); return true })
	if len(ids) != 10 || ids[0] != int32(990) || ids[9] != int32(999) {
		t.Fatalf("natural order after compaction = %v", ids)
	}
	if d, ok := c.findByID(int64(995)); !ok || d[0].Value != int32(995) {
		t.Fatalf("findByID(995 as int64) = %v %v", d, ok)
	}
	if c.size <= 0 {
		t.Fatalf("size = %d", c.size)
	}
}

// TestWriteRetryableDedupe replays a retryable write with the same (lsid, txnNumber): the
// stored reply comes back and nothing executes twice.
func TestWriteRetryableDedupe(t *testing.T) {
	srv, _ := startServer(t, Options{})
	lsid := bson.Binary{Subtype: 4, Data: []byte("retry-session-01")}
	retryable := func(body bson.D, n int64) *command {
		return &command{Name: body[0].Key, DB: "w", Body: body, LSID: &lsid, TxnNumber: &n}
	}
	ins := retryable(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: int32(0)}}}}}, 1)
	for i := 0; i < 2; i++ {
		reply, err := cmdInsert(srv, ins)
		if err != nil || wJSON(reply) != `{"n": {"$numberInt":"1"}}` {
			t.Fatalf("insert attempt %d = %v, %v", i, reply, err)
		}
	}
	fam := retryable(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}}, {Key: "new", Value: true}}, 2)
	var first bson.D
	for i := 0; i < 2; i++ {
		reply, err := cmdFindAndModify(srv, fam)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = reply
		} else if wJSON(reply) != wJSON(first) {
			t.Fatalf("retried findAndModify = %v, want the stored %v", reply, first)
		}
	}
	docs := wDocs(srv, "w", "c")
	if len(docs) != 1 || wJSON(docs[0]) != `{"_id": {"$numberInt":"1"},"n": {"$numberInt":"1"}}` {
		t.Fatalf("documents = %v: a retry executed twice", docs)
	}
	if ens := wDocEntries(srv, "w", "c"); len(ens) != 2 {
		t.Fatalf("%d oplog entries, want 2", len(ens))
	}
	// An older txnNumber is refused.
	if _, err := cmdInsert(srv, retryable(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(2)}}}}}, 1)); txCode(err) != codeTransactionTooOld {
		t.Fatalf("old txnNumber = %v, want 225", err)
	}
	// updateLookup sees the current committed version.
	srv.eng.mu.Lock()
	cur, ok := srv.eng.lookupCurrentLocked("w", "c", bson.D{{Key: "_id", Value: 1.0}})
	srv.eng.mu.Unlock()
	if !ok || wJSON(cur) != wJSON(docs[0]) {
		t.Fatalf("lookupCurrentLocked = %v %v", cur, ok)
	}
}

func TestWriteBulkWriteCounts(t *testing.T) {
	srv, cl := startServer(t, Options{})
	coll := cl.Database("w").Collection("bulk")
	ctx := testCtx(t)
	models := []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: "a"}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: "a"}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "g", Value: "a"}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}}),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 3}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "g", Value: "b"}}}}).SetUpsert(true),
		mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetReplacement(bson.D{{Key: "g", Value: "c"}}),
		mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 4}}).SetReplacement(bson.D{{Key: "g", Value: "d"}}).SetUpsert(true),
		mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}),
		mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "g", Value: "zzz"}}),
	}
	res, err := coll.BulkWrite(ctx, models)
	if err != nil {
		t.Fatal(err)
	}
	if res.InsertedCount != 2 || res.MatchedCount != 3 || res.ModifiedCount != 3 || res.UpsertedCount != 2 || res.DeletedCount != 1 {
		t.Fatalf("BulkWrite result = %+v", res)
	}
	if res.UpsertedIDs[3] != int32(3) || res.UpsertedIDs[5] != int32(4) {
		t.Fatalf("UpsertedIDs = %v, want {3: 3, 5: 4}", res.UpsertedIDs)
	}
	var got []string
	for _, d := range wDocs(srv, "w", "bulk") {
		got = append(got, wJSON(d))
	}
	want := `{"_id": {"$numberInt":"1"},"g": "c"} {"_id": {"$numberInt":"3"},"g": "b"} {"_id": {"$numberInt":"4"},"g": "d"}`
	if strings.Join(got, " ") != want {
		t.Fatalf("documents = %s\nwant %s", strings.Join(got, " "), want)
	}
	// An ordered bulk stops at the first failure; the error reports its model index.
	_, err = coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 10}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 11}}),
	})
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("ordered bulk with a duplicate = %v", err)
	}
	if _, ok := func() (bson.D, bool) {
		srv.eng.mu.Lock()
		defer srv.eng.mu.Unlock()
		return srv.eng.collLocked("w", "bulk").findByID(int32(11))
	}(); ok {
		t.Fatal("ordered bulk went on after the failure")
	}
}
