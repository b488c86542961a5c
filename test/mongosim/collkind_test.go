package mongosim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ckInfo returns the listCollections document of db.name.
func ckInfo(t *testing.T, db *mongo.Database, name string) bson.Raw {
	t.Helper()
	cur, err := db.ListCollections(testCtx(t), bson.D{{Key: "name", Value: name}})
	if err != nil {
		t.Fatal(err)
	}
	var infos []bson.Raw
	if err := cur.All(testCtx(t), &infos); err != nil || len(infos) != 1 {
		t.Fatalf("listCollections %s: %v %v", name, infos, err)
	}
	return infos[0]
}

func ckIDs(t *testing.T, coll *mongo.Collection) string {
	t.Helper()
	cur, err := coll.Find(testCtx(t), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(testCtx(t), &docs); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.Lookup("_id").String()
	}
	return strings.Join(ids, ",")
}

// A capped collection keeps its newest documents within size and max, in insertion order; the
// removals reach change streams as deletes.
func TestCappedCollection(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("cap")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetCapped(true).SetSizeInBytes(100_000).SetMaxDocuments(3)); err != nil {
		t.Fatal(err)
	}
	info := ckInfo(t, db, "c")
	if !info.Lookup("options", "capped").Boolean() || info.Lookup("options", "max").AsInt64() != 3 || info.Lookup("options", "size").AsInt64() != 100_000 {
		t.Fatalf("options: %s", info)
	}
	coll := db.Collection("c")
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	for _, id := range []int{5, 1, 4, 2, 3} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ckIDs(t, coll); got != `{"$numberInt":"4"},{"$numberInt":"2"},{"$numberInt":"3"}` {
		t.Fatalf("capped documents: %s, want 4,2,3 (the newest three, in insertion order)", got)
	}
	ev := aoEvents(t, cs, 7)
	want := `insert c {"$numberInt":"5"}|insert c {"$numberInt":"1"}|insert c {"$numberInt":"4"}|insert c {"$numberInt":"2"}|delete c {"$numberInt":"5"}|insert c {"$numberInt":"3"}|delete c {"$numberInt":"1"}`
	if strings.Join(ev, "|") != want {
		t.Fatalf("events %q, want %s", ev, want)
	}
	// The size bound: 5000 bytes are raised to 5120 (a multiple of 256), which hold five
	// documents of 1022 bytes, so the sixth removes the first.
	if err := db.CreateCollection(ctx, "s", options.CreateCollection().SetCapped(true).SetSizeInBytes(5000)); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 1000)
	for i := 1; i <= 6; i++ {
		if _, err := db.Collection("s").InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "p", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ckIDs(t, db.Collection("s")); got != `{"$numberInt":"2"},{"$numberInt":"3"},{"$numberInt":"4"},{"$numberInt":"5"},{"$numberInt":"6"}` {
		t.Fatalf("size-capped documents: %s, want 2 to 6", got)
	}
	err = db.CreateCollection(ctx, "nosize", options.CreateCollection().SetCapped(true))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeInvalidOptions) {
		t.Fatalf("capped without size: %v, want InvalidOptions (72)", err)
	}
	// Writes to a capped collection are not allowed in a transaction.
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		return coll.InsertOne(sc, bson.D{{Key: "_id", Value: 9}})
	})
	if !errors.As(err, &se) || !se.HasErrorCode(codeOperationNotSupportedInTransaction) {
		t.Fatalf("insert into a capped collection in a transaction: %v, want 263", err)
	}
}

// A clustered collection returns its documents in _id order and reports its clustered index.
func TestClusteredCollection(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("clu")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetClusteredIndex(bson.D{
		{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	for _, id := range []int{3, 1, 2} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ckIDs(t, coll); got != `{"$numberInt":"1"},{"$numberInt":"2"},{"$numberInt":"3"}` {
		t.Fatalf("clustered natural order: %s, want 1,2,3", got)
	}
	if info := ckInfo(t, db, "c"); info.Lookup("options", "clusteredIndex", "unique").Boolean() != true {
		t.Fatalf("options: %s", info)
	}
	raw, _ := srvIndexSpec(t, cl, "clu", "c", "_id_")
	if v, err := raw.LookupErr("clustered"); err != nil || !v.Boolean() {
		t.Fatalf("listIndexes: %s, want clustered: true", raw)
	}
	err := db.CreateCollection(ctx, "bad", options.CreateCollection().SetClusteredIndex(bson.D{
		{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "unique", Value: true}}))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeInvalidOptions) {
		t.Fatalf("clustered on {a: 1}: %v, want InvalidOptions", err)
	}
}

// A time-series collection takes measurements with a date in its time field and returns them;
// listCollections reports its type and options.
func TestTimeSeriesCollection(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("ts")
	if err := db.CreateCollection(ctx, "m", options.CreateCollection().SetTimeSeriesOptions(
		options.TimeSeries().SetTimeField("t").SetMetaField("sensor"))); err != nil {
		t.Fatal(err)
	}
	info := ckInfo(t, db, "m")
	if info.Lookup("type").StringValue() != "timeseries" || info.Lookup("options", "timeseries", "granularity").StringValue() != "seconds" ||
		info.Lookup("options", "timeseries", "bucketMaxSpanSeconds").Int32() != 3600 || info.Lookup("options", "timeseries", "metaField").StringValue() != "sensor" {
		t.Fatalf("listCollections: %s", info)
	}
	coll := db.Collection("m")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "t", Value: now}, {Key: "sensor", Value: "a"}, {Key: "v", Value: 1}},
		bson.D{{Key: "t", Value: now.Add(time.Minute)}, {Key: "sensor", Value: "b"}, {Key: "v", Value: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		T      time.Time
		Sensor string
		V      int
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "t", Value: bson.D{{Key: "$gt", Value: now}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &got); err != nil || len(got) != 1 || got[0].Sensor != "b" || !got[0].T.Equal(now.Add(time.Minute)) {
		t.Fatalf("find: %+v %v", got, err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "sensor", Value: "c"}})
	var wex mongo.WriteException
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeBadValue || !strings.Contains(wex.WriteErrors[0].Message, "'t' must be present") {
		t.Fatalf("a measurement without its time: %v", err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "t", Value: "yesterday"}})
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeBadValue {
		t.Fatalf("a measurement whose time is a string: %v", err)
	}
}

// A validator refuses writes that fail it with DocumentValidationFailure (121) and an errInfo
// naming the document and the failed rules, unless validation is bypassed, the level is
// moderate and the document was already invalid, or the action is warn.
func TestValidator(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("val")
	schema := bson.D{{Key: "$jsonSchema", Value: bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"name", "age"}},
		{Key: "properties", Value: bson.D{
			{Key: "name", Value: bson.D{{Key: "bsonType", Value: "string"}}},
			{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: 0}}},
		}},
	}}}
	if err := db.CreateCollection(ctx, "p", options.CreateCollection().SetValidator(schema)); err != nil {
		t.Fatal(err)
	}
	p := db.Collection("p")
	if _, err := p.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}, {Key: "age", Value: int32(30)}}); err != nil {
		t.Fatalf("valid insert: %v", err)
	}
	_, err := p.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}})
	var wex mongo.WriteException
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeDocumentValidationFailure || wex.WriteErrors[0].Message != "Document failed validation" {
		t.Fatalf("insert missing age: %v, want 121", err)
	}
	ei := bson.Raw(wex.WriteErrors[0].Details)
	if ei.Lookup("failingDocumentId").Int32() != 2 || ei.Lookup("details", "operatorName").StringValue() != "$jsonSchema" ||
		!strings.Contains(ei.Lookup("details", "schemaRulesNotSatisfied").String(), `"missingProperties": ["age"]`) {
		t.Fatalf("errInfo: %s", ei)
	}
	_, err = p.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "age", Value: int32(-1)}}}})
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeDocumentValidationFailure {
		t.Fatalf("update to a negative age: %v, want 121", err)
	}
	err = p.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: 7}}}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeDocumentValidationFailure) {
		t.Fatalf("findAndModify to an invalid document: %v, want 121", err)
	}
	if _, err := p.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}, options.InsertOne().SetBypassDocumentValidation(true)); err != nil {
		t.Fatalf("bypassDocumentValidation: %v", err)
	}

	// A query-operator validator, made moderate, then warn, by collMod.
	q := db.Collection("q")
	if _, err := q.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "qty", Value: -5}}); err != nil {
		t.Fatal(err)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "q"}, {Key: "validator", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gte", Value: 0}}}}},
		{Key: "validationLevel", Value: "moderate"}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = q.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "qty", Value: -1}})
	if !errors.As(err, &wex) || wex.WriteErrors[0].Code != codeDocumentValidationFailure {
		t.Fatalf("invalid insert under a query validator: %v", err)
	}
	ei = bson.Raw(wex.WriteErrors[0].Details)
	if ei.Lookup("details", "operatorName").StringValue() != "$gte" || ei.Lookup("details", "consideredValue").Int32() != -1 {
		t.Fatalf("errInfo of a query validator: %s", ei)
	}
	if _, err := q.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: -6}}}}); err != nil {
		t.Fatalf("moderate: updating an already invalid document: %v", err)
	}
	if info := ckInfo(t, db, "q"); info.Lookup("options", "validationLevel").StringValue() != "moderate" {
		t.Fatalf("options after collMod: %s", info)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "q"}, {Key: "validationAction", Value: "warn"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "qty", Value: -1}}); err != nil {
		t.Fatalf("validationAction warn: %v", err)
	}
}

// A tailable cursor on a capped collection stays open at its end, returns later inserts, and
// with awaitData a getMore waits for the next insert; it fails with CappedPositionLost once
// the collection wraps past it. An empty capped collection gives no cursor.
func TestTailableCursor(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("tail")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096).SetMaxDocuments(2)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID() != 0 {
		t.Fatalf("tailable cursor on an empty capped collection: id %d, want 0", cur.ID())
	}
	_ = cur.Close(ctx)
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: -1}}}); err != nil {
		t.Fatal(err)
	}
	cur, err = coll.Find(ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 0}}}}, options.Find().SetCursorType(options.TailableAwait).SetMaxAwaitTime(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.Next(ctx) || cur.Current.Lookup("_id").Int32() != 1 {
		t.Fatalf("first document: %v %v", cur.Current, cur.Err())
	}
	if cur.ID() == 0 {
		t.Fatal("the tailable cursor closed at the end of the collection")
	}
	// A getMore waits; an insert wakes it long before its 15 s await time.
	id := cur.ID()
	got := make(chan int32, 1)
	go func() {
		if cur.Next(ctx) {
			got <- cur.Current.Lookup("_id").Int32()
		} else {
			got <- -1
		}
	}()
	waitFor(t, 10*time.Second, "the awaiting getMore", func() bool {
		srv.eng.mu.Lock()
		defer srv.eng.mu.Unlock()
		ent := srv.eng.cursors.open[id]
		return ent != nil && ent.inUse // the getMore holds the cursor while it waits
	})
	start := time.Now()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != 3 {
			t.Fatalf("awaited document: %d, want 3", id)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the insert did not wake the getMore (%v)", d)
		}
	case <-ctx.Done():
		t.Fatal("no document from the awaiting getMore")
	}
	// The collection wraps past the cursor's position (max 2): the next getMore fails.
	for _, id := range []int{4, 5} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "x", Value: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	if cur.Next(ctx) {
		t.Fatalf("a document after the position was lost: %v", cur.Current)
	}
	var se mongo.ServerError
	if !errors.As(cur.Err(), &se) || !se.HasErrorCode(codeCappedPositionLost) {
		t.Fatalf("after wrapping: %v, want CappedPositionLost (136)", cur.Err())
	}
	// Without awaitData a getMore at the end answers at once and the cursor stays open.
	cur2, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	if err != nil {
		t.Fatal(err)
	}
	defer cur2.Close(ctx)
	for cur2.TryNext(ctx) {
	}
	if cur2.Err() != nil || cur2.ID() == 0 || cur2.TryNext(ctx) {
		t.Fatalf("tailable without awaitData at the end: err %v, id %d", cur2.Err(), cur2.ID())
	}
	_, err = coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable).SetSort(bson.D{{Key: "x", Value: 1}}))
	if !errors.As(err, &se) || !se.HasErrorCode(codeBadValue) {
		t.Fatalf("tailable with a sort: %v, want BadValue", err)
	}
}
