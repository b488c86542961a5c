package mongosim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// snapIDs returns the _id and x of every document a find of coll returns in ctx, sorted on _id.
func snapIDs(t *testing.T, ctx context.Context, coll *mongo.Collection, filter bson.D, opts ...options.Lister[options.FindOptions]) []string {
	t.Helper()
	cur, err := coll.Find(ctx, filter, opts...)
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, bson.Raw(mustMarshal(t, bson.D{{Key: "_id", Value: d["_id"]}, {Key: "x", Value: d["x"]}})).String())
	}
	slices.Sort(out)
	return out
}

// readConcernOf returns the readConcern a recorded command carried.
func readConcernOf(rec CommandRecord) bson.D {
	v, _ := lookupD(rec.Body, "readConcern")
	d, _ := v.(bson.D)
	return d
}

// A snapshot session: the first read sends readConcern snapshot without atClusterTime, the
// server picks the latest cluster time and reports it in the cursor; every later read of the
// session (find, aggregate, distinct, by _id and sorted on _id) sends that atClusterTime and
// sees the data as it was then, whatever was written since. A new session sees the new data.
func TestSnapshotSessionReadsAtItsFirstTime(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("snap").Collection("s")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	srv.ResetCommands()
	before := snapIDs(t, sctx, coll, bson.D{})
	if len(before) != 2 {
		t.Fatalf("first snapshot read: %v", before)
	}
	finds := srv.CommandsNamed("find")
	rc := readConcernOf(finds[0])
	if lv, _ := lookupD(rc, "level"); lv != "snapshot" || hasKey(rc, "atClusterTime") {
		t.Fatalf("first read's readConcern %v, want level snapshot without atClusterTime", rc)
	}

	// Changes after the snapshot time: an update, a delete, an insert, a new collection.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	// A committed transaction's writes are undone as well.
	tsess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer tsess.EndSession(ctx)
	if _, err := tsess.WithTransaction(ctx, func(tc context.Context) (any, error) {
		if _, err := coll.InsertOne(tc, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 4}}); err != nil {
			return nil, err
		}
		_, err := coll.UpdateOne(tc, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 5}}}})
		return nil, err
	}); err != nil {
		t.Fatal(err)
	}
	later := cl.Database("snap").Collection("later")
	if _, err := later.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	srv.ResetCommands()
	if got := snapIDs(t, sctx, coll, bson.D{}); !slices.Equal(got, before) {
		t.Fatalf("second snapshot read %v, want the data of the first %v", got, before)
	}
	rc = readConcernOf(srv.CommandsNamed("find")[0])
	at, ok := lookupD(rc, "atClusterTime")
	if !ok {
		t.Fatalf("second read's readConcern %v: the driver must have read atClusterTime from the first reply", rc)
	}
	if got := snapIDs(t, sctx, coll, bson.D{{Key: "_id", Value: 2}}); len(got) != 1 {
		t.Fatalf("find by _id 2 in the snapshot: %v, want the deleted document", got)
	}
	if got := snapIDs(t, sctx, coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 1}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(5)); !slices.Equal(got, before) {
		t.Fatalf("find sorted on _id in the snapshot: %v, want %v", got, before)
	}
	cur, err := coll.Aggregate(sctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$x"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var agg []bson.M
	if err := cur.All(sctx, &agg); err != nil || len(agg) != 1 || agg[0]["sum"] != int32(2) {
		t.Fatalf("aggregate in the snapshot: %v, %v, want sum 2", agg, err)
	}
	var vals []int32
	if err := coll.Distinct(sctx, "x", bson.D{}).Decode(&vals); err != nil || !slices.Equal(vals, []int32{1}) {
		t.Fatalf("distinct in the snapshot: %v, %v, want [1]", vals, err)
	}
	if got := snapIDs(t, sctx, later, bson.D{}); len(got) != 0 {
		t.Fatalf("a collection created after the snapshot time: %v, want nothing", got)
	}
	for _, r := range srv.Commands() {
		if r.Name == "aggregate" || r.Name == "distinct" {
			if v, _ := lookupD(readConcernOf(r), "atClusterTime"); v != at {
				t.Fatalf("%s sent readConcern %v, want atClusterTime %v", r.Name, readConcernOf(r), at)
			}
		}
	}

	fresh, err := cl.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.EndSession(ctx)
	if got := snapIDs(t, mongo.NewSessionContext(ctx, fresh), coll, bson.D{}); len(got) != 3 || slices.Equal(got, before) {
		t.Fatalf("a new snapshot session reads %v, want the current documents 1, 3 and 4", got)
	}
}

// atClusterTime given explicitly reads the data as of that time, across a drop; the reply
// reports it; its errors are a server's.
func TestSnapshotReadAtClusterTime(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("snap")
	coll := db.Collection("at")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	t1 := srv.ClusterTime()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "x", Value: 10}}); err != nil {
		t.Fatal(err)
	}
	t2 := srv.ClusterTime()
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "x", Value: 9}}); err != nil {
		t.Fatal(err)
	}
	snapFind := func(rc bson.D) (bson.Raw, error) {
		return db.RunCommand(ctx, bson.D{{Key: "find", Value: "at"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "readConcern", Value: rc}}).Raw()
	}
	batch := func(raw bson.Raw) []string {
		var out []string
		arr, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
		for _, v := range arr {
			out = append(out, v.Document().String())
		}
		return out
	}
	for _, tc := range []struct {
		at   bson.Timestamp
		want []string
	}{
		{t1, []string{`{"_id": {"$numberInt":"1"},"x": {"$numberInt":"1"}}`}},
		{t2, []string{`{"_id": {"$numberInt":"1"},"x": {"$numberInt":"10"}}`, `{"_id": {"$numberInt":"2"},"x": {"$numberInt":"2"}}`}},
		{srv.ClusterTime(), []string{`{"_id": {"$numberInt":"9"},"x": {"$numberInt":"9"}}`}},
	} {
		raw, err := snapFind(bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: tc.at}})
		if err != nil {
			t.Fatalf("find at %v: %v", tc.at, err)
		}
		if got := batch(raw); !slices.Equal(got, tc.want) {
			t.Fatalf("find at %v: %v, want %v", tc.at, got, tc.want)
		}
		tt, ti := raw.Lookup("cursor", "atClusterTime").Timestamp()
		if (bson.Timestamp{T: tt, I: ti}) != tc.at {
			t.Fatalf("cursor atClusterTime %v, want %v", raw.Lookup("cursor", "atClusterTime"), tc.at)
		}
	}
	raw, err := db.RunCommand(ctx, bson.D{{Key: "distinct", Value: "at"}, {Key: "key", Value: "x"},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t2}}}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if tt, ti := raw.Lookup("atClusterTime").Timestamp(); (bson.Timestamp{T: tt, I: ti}) != t2 || len(raw.Lookup("values").Array().Index(1).Value) == 0 {
		t.Fatalf("distinct at t2: %v", raw)
	}

	codeOf := func(err error) (int32, string) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("want a command error, got %v", err)
		}
		return ce.Code, ce.Message
	}
	future := bson.Timestamp{T: srv.ClusterTime().T + 1000, I: 1}
	for _, tc := range []struct {
		name string
		rc   bson.D
		code int32
		msg  string
	}{
		{"future", bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: future}}, codeInvalidOptions, "greater than the current clusterTime"},
		{"null", bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{}}}, codeInvalidOptions, "atClusterTime"},
		{"not a timestamp", bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: "bad"}}, codeTypeMismatch, "atClusterTime"},
		{"majority", bson.D{{Key: "level", Value: "majority"}, {Key: "atClusterTime", Value: t1}}, codeInvalidOptions, "snapshot"},
		{"causal", bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t1}, {Key: "afterClusterTime", Value: t1}}, codeInvalidOptions, "causally consistent"},
	} {
		_, err := snapFind(tc.rc)
		if code, msg := codeOf(err); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Fatalf("%s: %d %q, want %d naming %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	// count and writes refuse readConcern snapshot.
	for _, cmd := range []bson.D{
		{{Key: "count", Value: "at"}},
		{{Key: "insert", Value: "at"}, {Key: "documents", Value: bson.A{bson.D{}}}},
	} {
		err := db.RunCommand(ctx, append(cmd, bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}})).Err()
		if code, _ := codeOf(err); code != codeInvalidOptions {
			t.Fatalf("%s with readConcern snapshot: %v, want InvalidOptions", cmd[0].Key, err)
		}
	}

	// A rename after the snapshot time cannot be read across.
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "snap.at"}, {Key: "to", Value: "snap.moved"}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = snapFind(bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t2}})
	if code, _ := codeOf(err); code != codeSnapshotUnavailable {
		t.Fatalf("find at t2 across a rename: %v, want SnapshotUnavailable (246)", err)
	}

	// History gone: SnapshotTooOld.
	srv.TruncateOplog(srv.ClusterTime())
	_, err = snapFind(bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t1}})
	if code, msg := codeOf(err); code != codeSnapshotTooOld || !strings.Contains(msg, "older than the oldest available timestamp") {
		t.Fatalf("find at t1 after truncation: %d %q, want SnapshotTooOld (239)", code, msg)
	}
	// The collection-level readConcern works for aggregate without a session too.
	rcColl := db.Collection("moved", options.Collection().SetReadConcern(readconcern.Snapshot()))
	if n, err := rcColl.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("countDocuments (aggregate) with readConcern snapshot: %d, %v", n, err)
	}
}

// A transaction whose first statement gives readConcern {level: snapshot, atClusterTime}
// reads as of that time, and writing a document changed since fails with WriteConflict; an
// atClusterTime in the future fails the statement and starts no transaction.
func TestSnapshotTransactionAtClusterTime(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("snap")
	coll := db.Collection("txn")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	t1 := srv.ClusterTime()
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession(options.Session().SetCausalConsistency(false))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	txnFields := func(n int64, start bool) bson.D {
		f := bson.D{{Key: "txnNumber", Value: n}, {Key: "autocommit", Value: false}}
		if start {
			f = append(f, bson.E{Key: "startTransaction", Value: true})
		}
		return f
	}
	run := func(db *mongo.Database, cmd bson.D) (bson.Raw, error) {
		var raw bson.Raw
		err := mongo.WithSession(ctx, sess, func(sc context.Context) error {
			var err error
			raw, err = db.RunCommand(sc, cmd).Raw()
			return err
		})
		return raw, err
	}
	find := append(bson.D{{Key: "find", Value: "txn"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t1}}}}, txnFields(100, true)...)
	raw, err := run(db, find)
	if err != nil {
		t.Fatalf("find starting the transaction at t1: %v", err)
	}
	if x := raw.Lookup("cursor", "firstBatch").Array().Index(0).Document().Lookup("x").Int32(); x != 1 {
		t.Fatalf("the transaction reads x %d, want 1 (as of t1)", x)
	}
	// Only the first statement may carry a readConcern.
	again := append(bson.D{{Key: "find", Value: "txn"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: t1}}}}, txnFields(100, false)...)
	var ce mongo.CommandError
	if _, err := run(db, again); !errors.As(err, &ce) || ce.Code != codeInvalidOptions || !strings.Contains(ce.Message, "Only the first command") {
		t.Fatalf("readConcern on a later statement: %v, want InvalidOptions", err)
	}
	_, err = run(db, append(bson.D{{Key: "update", Value: "txn"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}}}}}, txnFields(100, false)...))
	if !errors.As(err, &ce) || ce.Code != codeWriteConflict || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("update of a document changed after t1: %v, want WriteConflict labelled TransientTransactionError", err)
	}

	future := bson.Timestamp{T: srv.ClusterTime().T + 1000, I: 1}
	find = append(bson.D{{Key: "find", Value: "txn"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: future}}}}, txnFields(101, true)...)
	if _, err := run(db, find); !errors.As(err, &ce) || ce.Code != codeInvalidOptions {
		t.Fatalf("transaction at a future time: %v, want InvalidOptions", err)
	}
	if _, err := run(cl.Database("admin"), append(bson.D{{Key: "abortTransaction", Value: 1}}, txnFields(101, false)...)); !errors.As(err, &ce) || ce.Code != codeNoSuchTransaction {
		t.Fatalf("abort after the refused start: %v, want NoSuchTransaction", err)
	}
}

// Versions are kept for Options.SnapshotHistory (5 minutes by default, the server's
// minSnapshotHistoryWindowInSeconds, which getParameter reports): a read at a time whose
// later changes have aged out fails with SnapshotTooOld, one within the window still reads
// the old data; with a negative window nothing is kept.
func TestSnapshotHistoryWindow(t *testing.T) {
	clock := &ttlClock{now: time.Now()}
	advance := func(d time.Duration) { clock.Set(clock.Now().Add(d)) }
	srv, cl := startServer(t, Options{Now: clock.Now})
	ctx := context.Background()
	db := cl.Database("snap")
	coll := db.Collection("window")
	setX := func(x int) {
		t.Helper()
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: x}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			t.Fatal(err)
		}
	}
	readX := func(at bson.Timestamp) (int32, error) {
		raw, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "window"},
			{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}}}).Raw()
		if err != nil {
			return 0, err
		}
		return raw.Lookup("cursor", "firstBatch").Array().Index(0).Document().Lookup("x").Int32(), nil
	}
	setX(1)
	t1 := srv.ClusterTime()
	setX(2)
	advance(4 * time.Minute)
	setX(3)
	t3 := srv.ClusterTime()
	if x, err := readX(t1); err != nil || x != 1 {
		t.Fatalf("read at t1 within the window: %d, %v, want 1", x, err)
	}
	advance(2 * time.Minute) // the change after t1 is now 6 minutes old
	setX(4)
	if _, err := readX(t1); !errors.As(err, new(mongo.CommandError)) || err.(mongo.CommandError).Code != codeSnapshotTooOld {
		t.Fatalf("read at t1 after its history aged out: %v, want SnapshotTooOld", err)
	}
	if x, err := readX(t3); err != nil || x != 3 {
		t.Fatalf("read at t3, still in the window: %d, %v, want 3", x, err)
	}
	raw, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "minSnapshotHistoryWindowInSeconds", Value: 1}}).Raw()
	if err != nil || raw.Lookup("minSnapshotHistoryWindowInSeconds").Int32() != 300 {
		t.Fatalf("getParameter minSnapshotHistoryWindowInSeconds: %s, %v", raw, err)
	}

	srv2, cl2 := startServer(t, Options{SnapshotHistory: -1})
	db2 := cl2.Database("snap")
	if _, err := db2.Collection("none").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	at := srv2.ClusterTime()
	find := func(rc bson.D) error {
		return db2.RunCommand(ctx, bson.D{{Key: "find", Value: "none"}, {Key: "readConcern", Value: rc}}).Err()
	}
	if err := find(bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}); err != nil {
		t.Fatalf("read at the latest time with no history kept: %v", err)
	}
	if _, err := db2.Collection("none").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	var ce mongo.CommandError
	if err := find(bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}); !errors.As(err, &ce) || ce.Code != codeSnapshotTooOld {
		t.Fatalf("read before a change with no history kept: %v, want SnapshotTooOld", err)
	}
	if err := find(bson.D{{Key: "level", Value: "snapshot"}}); err != nil {
		t.Fatalf("a snapshot read at the latest time: %v", err)
	}
}
