package mongosim

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// rdSeed inserts n documents {_id: i, a: i, g: i%3, tags: ["t<i%2>", "all"], sub: {x: i%4}}
// for i in 0..n-1 into test.<coll>.
func rdSeed(t *testing.T, cl *mongo.Client, coll string, n int) *mongo.Collection {
	t.Helper()
	c := cl.Database("test").Collection(coll)
	docs := make([]any, n)
	for i := 0; i < n; i++ {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i)}, {Key: "g", Value: int32(i % 3)},
			{Key: "tags", Value: bson.A{[]string{"t0", "t1"}[i%2], "all"}},
			{Key: "sub", Value: bson.D{{Key: "x", Value: int32(i % 4)}}}}
	}
	if _, err := c.InsertMany(testCtx(t), docs); err != nil {
		t.Fatalf("seed InsertMany: %v", err)
	}
	return c
}

// rdFindIDs runs Find and returns the _id values in result order.
func rdFindIDs(t *testing.T, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []int32 {
	t.Helper()
	ctx := testCtx(t)
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		t.Fatalf("Find(%v): %v", filter, err)
	}
	var docs []bson.D
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatalf("Find(%v).All: %v", filter, err)
	}
	ids := []int32{}
	for _, d := range docs {
		id, _ := lookupD(d, "_id")
		n, _ := id.(int32)
		ids = append(ids, n)
	}
	return ids
}

func rdWantIDs(t *testing.T, what string, got []int32, want ...int32) {
	t.Helper()
	if want == nil {
		want = []int32{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}

func rdWantCode(t *testing.T, what string, err error, code int32) {
	t.Helper()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(code)) {
		t.Fatalf("%s: err = %v, want code %d", what, err, code)
	}
}

func TestReadFindFilterSortSkipLimit(t *testing.T) {
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "f", 10)

	rdWantIDs(t, "range", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 3}, {Key: "$lt", Value: 7}}}}), 3, 4, 5, 6)
	rdWantIDs(t, "$in", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{1, 8, 42}}}}}), 1, 8)
	rdWantIDs(t, "$or + dotted", rdFindIDs(t, c, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "sub.x", Value: 3}}, bson.D{{Key: "a", Value: 0}}}}}), 0, 3, 7)
	rdWantIDs(t, "array element", rdFindIDs(t, c, bson.D{{Key: "tags", Value: "t1"}, {Key: "a", Value: bson.D{{Key: "$lt", Value: 6}}}}), 1, 3, 5)
	rdWantIDs(t, "$exists false", rdFindIDs(t, c, bson.D{{Key: "nope", Value: bson.D{{Key: "$exists", Value: true}}}}))
	rdWantIDs(t, "sort desc", rdFindIDs(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "a", Value: -1}}).SetLimit(3)), 9, 8, 7)
	rdWantIDs(t, "multi-key sort", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 6}}}},
		options.Find().SetSort(bson.D{{Key: "g", Value: 1}, {Key: "a", Value: -1}})), 3, 0, 4, 1, 5, 2)
	rdWantIDs(t, "skip+limit sorted", rdFindIDs(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "a", Value: -1}}).SetSkip(2).SetLimit(3)), 7, 6, 5)
	rdWantIDs(t, "skip+limit natural", rdFindIDs(t, c, bson.D{}, options.Find().SetSkip(8).SetLimit(5)), 8, 9)
	rdWantIDs(t, "skip past the end", rdFindIDs(t, c, bson.D{}, options.Find().SetSkip(50)))
	rdWantIDs(t, "$natural -1 hint", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 4}}}}, options.Find().SetHint(bson.D{{Key: "$natural", Value: -1}}).SetLimit(3)), 3, 2, 1)
	rdWantIDs(t, "$natural -1 sort", rdFindIDs(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}).SetLimit(2)), 9, 8)
	rdWantIDs(t, "_id equality", rdFindIDs(t, c, bson.D{{Key: "_id", Value: 4.0}}), 4)
	rdWantIDs(t, "_id $eq", rdFindIDs(t, c, bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: int64(5)}}}}), 5)
	rdWantIDs(t, "_id equality, no match", rdFindIDs(t, c, bson.D{{Key: "_id", Value: 42}}))
	rdWantIDs(t, "_id operator", rdFindIDs(t, c, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 7}}}}), 8, 9)
	rdWantIDs(t, "missing collection", rdFindIDs(t, cl.Database("test").Collection("nothere"), bson.D{}))

	ctx := testCtx(t)
	var one bson.D
	if err := c.FindOne(ctx, bson.D{{Key: "g", Value: 2}}, options.FindOne().SetSort(bson.D{{Key: "a", Value: -1}})).Decode(&one); err != nil {
		t.Fatal(err)
	}
	if id, _ := lookupD(one, "_id"); id != int32(8) {
		t.Fatalf("FindOne sorted = %v, want _id 8", one)
	}
	if err := c.FindOne(ctx, bson.D{{Key: "a", Value: 100}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("FindOne without match: %v, want ErrNoDocuments", err)
	}
}

func TestReadFindProjection(t *testing.T) {
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "p", 3)
	ctx := testCtx(t)
	var got bson.D
	err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}, options.FindOne().SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "sub.x", Value: 1}, {Key: "_id", Value: 0}})).Decode(&got)
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "a", Value: int32(2)}, {Key: "sub", Value: bson.D{{Key: "x", Value: int32(2)}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("inclusion projection = %v, want %v", got, want)
	}
	err = c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}, options.FindOne().SetProjection(bson.D{{Key: "tags", Value: 0}, {Key: "sub", Value: 0}, {Key: "g", Value: 0}})).Decode(&got)
	if err != nil {
		t.Fatal(err)
	}
	want = bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("exclusion projection = %v, want %v", got, want)
	}
	// An invalid projection fails even on a collection without documents.
	_, err = cl.Database("test").Collection("empty").Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}))
	if err == nil {
		t.Fatal("mixed inclusion/exclusion projection succeeded")
	}
}

// TestReadFindBatchesGetMoreKillCursors checks batchSize, the limit across getMores, the cursor
// being closed by the server when exhausted, killCursors and CursorNotFound after it.
func TestReadFindBatchesGetMoreKillCursors(t *testing.T) {
	srv, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "b", 25)
	ctx := testCtx(t)

	srv.ResetCommands()
	ids := rdFindIDs(t, c, bson.D{}, options.Find().SetBatchSize(5))
	if len(ids) != 25 {
		t.Fatalf("batchSize 5 over 25 docs returned %d docs", len(ids))
	}
	if n := len(srv.CommandsNamed("getMore")); n != 4 {
		t.Fatalf("getMores = %d, want 4 (5 + 4x5 documents)", n)
	}
	if n := len(srv.CommandsNamed("killCursors")); n != 0 {
		t.Fatalf("killCursors = %d for a cursor the server exhausted, want 0", n)
	}

	srv.ResetCommands()
	ids = rdFindIDs(t, c, bson.D{}, options.Find().SetBatchSize(5).SetLimit(12))
	rdWantIDs(t, "limit 12 batchSize 5", ids, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	if n := len(srv.CommandsNamed("getMore")); n != 2 {
		t.Fatalf("getMores = %d, want 2 (5+5+2)", n)
	}
	if n := len(srv.CommandsNamed("killCursors")); n != 0 {
		t.Fatalf("killCursors = %d; the server closes the cursor when the limit is reached", n)
	}

	// Default first batch: 101 documents.
	srv.ResetCommands()
	c101 := rdSeed(t, cl, "big", 150)
	cur, err := c101.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.RemainingBatchLength() != 101 {
		t.Fatalf("default first batch = %d documents, want 101", cur.RemainingBatchLength())
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// batchSize 0 asks for an empty first batch.
	cur, err = c.Find(ctx, bson.D{}, options.Find().SetBatchSize(0))
	if err != nil {
		t.Fatal(err)
	}
	if cur.RemainingBatchLength() != 0 || cur.ID() == 0 {
		t.Fatalf("batchSize 0: first batch %d docs, id %d; want 0 docs and an open cursor", cur.RemainingBatchLength(), cur.ID())
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// killCursors on Close, then CursorNotFound for that id.
	srv.ResetCommands()
	cur, err = c.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) {
		t.Fatal(cur.Err())
	}
	id := cur.ID()
	if id == 0 {
		t.Fatal("cursor with 23 documents left has id 0")
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	kills := srv.CommandsNamed("killCursors")
	if len(kills) != 1 {
		t.Fatalf("killCursors = %d, want 1", len(kills))
	}
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "b"}}).Err()
	rdWantCode(t, "getMore after killCursors", err, codeCursorNotFound)
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "getMore", Value: int64(12345)}, {Key: "collection", Value: "b"}}).Err()
	rdWantCode(t, "getMore of an unknown id", err, codeCursorNotFound)
}

// TestReadFindSingleBatch checks singleBatch, negative limits and FindOne: one batch, cursor id 0,
// no getMore.
func TestReadFindSingleBatch(t *testing.T) {
	srv, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "s", 10)
	ctx := testCtx(t)
	srv.ResetCommands()
	rdWantIDs(t, "negative limit", rdFindIDs(t, c, bson.D{}, options.Find().SetLimit(-3)), 0, 1, 2)
	rdWantIDs(t, "negative limit, smaller batch", rdFindIDs(t, c, bson.D{}, options.Find().SetLimit(-3).SetBatchSize(2)), 0, 1)
	var raw bson.Raw
	raw, err := cl.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "s"}, {Key: "batchSize", Value: 4}, {Key: "singleBatch", Value: true}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := raw.Lookup("cursor", "id").Int64OK(); !ok || id != 0 {
		t.Fatalf("singleBatch cursor id = %v, want Int64 0", raw.Lookup("cursor", "id"))
	}
	if ns := raw.Lookup("cursor", "ns").StringValue(); ns != "test.s" {
		t.Fatalf("cursor.ns = %q, want test.s", ns)
	}
	if arr, _ := raw.Lookup("cursor", "firstBatch").Array().Values(); len(arr) != 4 {
		t.Fatalf("singleBatch firstBatch has %d docs, want 4", len(arr))
	}
	if err := c.FindOne(ctx, bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.CommandsNamed("getMore")); n != 0 {
		t.Fatalf("getMores = %d, want 0", n)
	}
	if n := len(srv.CommandsNamed("killCursors")); n != 0 {
		t.Fatalf("killCursors = %d, want 0", n)
	}
}

// TestReadFindOptions checks the accepted and the rejected find options.
func TestReadFindOptions(t *testing.T) {
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "o", 5)
	ctx := testCtx(t)
	// Harmless options are accepted and do not change the result.
	rdWantIDs(t, "harmless options", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 2}}}},
		options.Find().SetComment("hello").SetHint(bson.D{{Key: "_id", Value: 1}}).SetNoCursorTimeout(true).
			SetAllowDiskUse(true).SetAllowPartialResults(true).SetMaxAwaitTime(0).
			SetCollation(&options.Collation{Locale: "simple"})), 3, 4)
	// let variables reach $expr.
	rdWantIDs(t, "let", rdFindIDs(t, c, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$a", "$$want"}}}}},
		options.Find().SetLet(bson.D{{Key: "want", Value: 4}})), 4)
	// readConcern and readPreference are accepted.
	rc := cl.Database("test").Collection("o", options.Collection().SetReadConcern(readconcern.Majority()))
	rdWantIDs(t, "readConcern majority", rdFindIDs(t, rc, bson.D{{Key: "a", Value: 1}}), 1)

	for name, opts := range map[string]*options.FindOptionsBuilder{
		"min":          options.Find().SetMin(bson.D{{Key: "a", Value: 1}}).SetHint(bson.D{{Key: "a", Value: 1}}),
		"max":          options.Find().SetMax(bson.D{{Key: "a", Value: 1}}).SetHint(bson.D{{Key: "a", Value: 1}}),
		"showRecordId": options.Find().SetShowRecordID(true),
		"collation":    options.Find().SetCollation(&options.Collation{Locale: "fr"}),
	} {
		_, err := c.Find(ctx, bson.D{}, opts)
		rdWantCode(t, name, err, codeUnsupported)
	}
	_, err := c.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	rdWantCode(t, "tailable on a non-capped collection", err, codeBadValue)
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "o"}, {Key: "bogus", Value: 1}}).Err()
	rdWantCode(t, "unknown field", err, 40415)
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "o"}, {Key: "skip", Value: -1}}).Err()
	rdWantCode(t, "negative skip", err, 51024)
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "o"}, {Key: "filter", Value: "x"}}).Err()
	rdWantCode(t, "filter of the wrong type", err, codeTypeMismatch)
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "o"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$bogus", Value: 1}}}}}}).Err()
	if err == nil {
		t.Fatal("unknown query operator accepted")
	}
}

func TestReadCount(t *testing.T) {
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "c", 10)
	ctx := testCtx(t)
	n, err := c.CountDocuments(ctx, bson.D{{Key: "g", Value: 1}})
	if err != nil || n != 3 {
		t.Fatalf("CountDocuments g=1 = %d, %v; want 3", n, err)
	}
	n, err = c.CountDocuments(ctx, bson.D{}, options.Count().SetSkip(2).SetLimit(5))
	if err != nil || n != 5 {
		t.Fatalf("CountDocuments skip 2 limit 5 = %d, %v; want 5", n, err)
	}
	n, err = c.CountDocuments(ctx, bson.D{{Key: "a", Value: 99}})
	if err != nil || n != 0 {
		t.Fatalf("CountDocuments no match = %d, %v; want 0", n, err)
	}
	n, err = c.EstimatedDocumentCount(ctx)
	if err != nil || n != 10 {
		t.Fatalf("EstimatedDocumentCount = %d, %v; want 10", n, err)
	}
	n, err = cl.Database("test").Collection("nothere").EstimatedDocumentCount(ctx)
	if err != nil || n != 0 {
		t.Fatalf("EstimatedDocumentCount of a missing collection = %d, %v; want 0", n, err)
	}
	raw, err := cl.Database("test").RunCommand(ctx, bson.D{{Key: "count", Value: "c"},
		{Key: "query", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}}},
		{Key: "skip", Value: int64(1)}, {Key: "limit", Value: int64(-4)}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := raw.Lookup("n").Int32OK(); !ok || got != 4 {
		t.Fatalf("count reply n = %v, want Int32 4", raw.Lookup("n"))
	}
}

func TestReadDistinct(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	c := cl.Database("test").Collection("d")
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(1), int32(2)}}}}, {Key: "k", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.A{bson.D{{Key: "b", Value: int32(2)}}, bson.D{{Key: "b", Value: int32(3)}}}}, {Key: "k", Value: "x"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: bson.D{{Key: "b", Value: 1.0}}}, {Key: "k", Value: "y"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: bson.D{{Key: "b", Value: bson.A{bson.A{int32(4)}}}}}, {Key: "k", Value: "x"}},
		bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: bson.D{{Key: "c", Value: int32(9)}}}, {Key: "k", Value: "x"}},
		bson.D{{Key: "_id", Value: 6}, {Key: "a", Value: bson.D{{Key: "b", Value: "s"}}}, {Key: "k", Value: "z"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := c.Distinct(ctx, "a.b", bson.D{})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	var vals []any
	if err := res.Decode(&vals); err != nil {
		t.Fatal(err)
	}
	want := []any{int32(1), int32(2), int32(3), "s", bson.A{int32(4)}}
	if len(vals) != len(want) {
		t.Fatalf("distinct a.b = %#v, want %#v", vals, want)
	}
	for i := range want {
		if !reflect.DeepEqual(vals[i], want[i]) {
			t.Fatalf("distinct a.b = %#v, want %#v", vals, want)
		}
	}
	var ks []string
	if err := c.Distinct(ctx, "k", bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: 3}}}}).Decode(&ks); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ks, []string{"x", "y"}) {
		t.Fatalf("distinct k with query = %v, want [x y]", ks)
	}
	var none []any
	if err := cl.Database("test").Collection("nothere").Distinct(ctx, "a", bson.D{}).Decode(&none); err != nil || len(none) != 0 {
		t.Fatalf("distinct on a missing collection = %v, %v", none, err)
	}
}

func TestReadAggregate(t *testing.T) {
	srv, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "ag", 10)
	ctx := testCtx(t)
	cur, err := c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 1}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "total", Value: bson.D{{Key: "$sum", Value: "$a"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	// g=0: a in {3,6,9}; g=1: {1,4,7}; g=2: {2,5,8}.
	wantTotals := []int64{18, 12, 15}
	if len(got) != 3 {
		t.Fatalf("$group result = %v", got)
	}
	for i, d := range got {
		n, _ := asInt64(d["n"])
		total, _ := asInt64(d["total"])
		id, _ := asInt64(d["_id"])
		if id != int64(i) || n != 3 || total != wantTotals[i] {
			t.Fatalf("group %d = %v, want _id %d n 3 total %d", i, d, i, wantTotals[i])
		}
	}

	// Batches: cursor.batchSize is honoured across getMores.
	srv.ResetCommands()
	cur, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "a", Value: -1}}}}}, options.Aggregate().SetBatchSize(3))
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.M
	if err := cur.All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 10 || all[0]["a"] != int32(9) {
		t.Fatalf("sorted aggregate = %v", all)
	}
	if n := len(srv.CommandsNamed("getMore")); n != 3 {
		t.Fatalf("getMores = %d, want 3 (3+3+3+1)", n)
	}

	// $unwind, $project with let variables, $count.
	cur, err = c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 4}}}}}},
		{{Key: "$unwind", Value: "$tags"}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "tag", Value: "$tags"},
			{Key: "big", Value: bson.D{{Key: "$gt", Value: bson.A{"$a", "$$cut"}}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "big", Value: true}}}},
		{{Key: "$count", Value: "n"}},
	}, options.Aggregate().SetLet(bson.D{{Key: "cut", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var counted []bson.M
	if err := cur.All(ctx, &counted); err != nil {
		t.Fatal(err)
	}
	if len(counted) != 1 || counted[0]["n"] != int32(4) { // a=2,3 with two tags each
		t.Fatalf("$unwind/$project/$count = %v, want [{n: 4}]", counted)
	}

	db := cl.Database("test")
	err = db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: "ag"}, {Key: "pipeline", Value: bson.A{}}}).Err()
	rdWantCode(t, "aggregate without cursor", err, codeFailedToParse)
	_, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$bogusStage", Value: 1}}})
	rdWantCode(t, "unknown stage", err, 40324)
	// $currentOp is served on admin only, as on a server.
	_, err = db.Aggregate(ctx, mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{}}}})
	rdWantCode(t, "aggregate: 1 with $currentOp outside admin", err, codeInvalidNamespace)

	// A missing collection aggregates as empty.
	cur, err = db.Collection("nothere").Aggregate(ctx, mongo.Pipeline{{{Key: "$count", Value: "n"}}})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Next(ctx) {
		t.Fatalf("aggregate over a missing collection returned %v", cur.Current)
	}
	_ = cur.Close(ctx)
}

// TestReadInTransactionSeesOwnWrites checks that a read inside a transaction sees the
// transaction's own uncommitted writes, and that others do not see them before commit.
func TestReadInTransactionSeesOwnWrites(t *testing.T) {
	srv, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "tx", 2)
	other := connectClient(t, srv, nil).Database("test").Collection("tx")
	ctx := testCtx(t)
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if _, err := c.InsertOne(sc, bson.D{{Key: "_id", Value: int32(100)}, {Key: "a", Value: int32(100)}}); err != nil {
			return nil, err
		}
		ids := rdFindIDs(t, c, bson.D{}) // not in the session: outside the transaction
		rdWantIDs(t, "outside the transaction before commit", ids, 0, 1)
		var in []bson.D
		cur, err := c.Find(sc, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return nil, err
		}
		if err := cur.All(sc, &in); err != nil {
			return nil, err
		}
		if len(in) != 3 {
			t.Errorf("find inside the transaction returned %d docs, want 3 (its own insert included)", len(in))
		}
		n, err := c.CountDocuments(sc, bson.D{})
		if err != nil {
			return nil, err
		}
		if n != 3 {
			t.Errorf("CountDocuments inside the transaction = %d, want 3", n)
		}
		var dist []int32
		if err := c.Distinct(sc, "_id", bson.D{}).Decode(&dist); err != nil {
			return nil, err
		}
		if len(dist) != 3 {
			t.Errorf("distinct inside the transaction = %v, want 3 ids", dist)
		}
		// The count command is not allowed in a transaction (CountDocuments, an aggregate, is).
		err = cl.Database("test").RunCommand(sc, bson.D{{Key: "count", Value: "tx"}}).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 263 {
			t.Errorf("count in a transaction: %v, want OperationNotSupportedInTransaction (263)", err)
		}
		otherIDs := rdFindIDs(t, other, bson.D{})
		rdWantIDs(t, "another client before commit", otherIDs, 0, 1)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rdWantIDs(t, "after commit", rdFindIDs(t, other, bson.D{}), 0, 1, 100)
}

// TestReadConcurrentWithWrites runs finds, counts, distincts and aggregates while other
// clients update and insert, under -race: reads filter and sort outside the engine lock, over
// documents that writers never modify in place.
func TestReadConcurrentWithWrites(t *testing.T) {
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "conc", 50)
	ctx := testCtx(t)
	errs := make(chan error, 8)
	done := make(chan struct{})
	for w := 0; w < 2; w++ {
		go func(w int) {
			for i := 0; i < 100; i++ {
				if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(i % 50)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "$push", Value: bson.D{{Key: "tags", Value: "w"}}}}); err != nil {
					errs <- err
					return
				}
				if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1000 + w*1000 + i)}, {Key: "a", Value: int32(i)}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for r := 0; r < 2; r++ {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				cur, err := c.Find(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}}}}, options.Find().SetSort(bson.D{{Key: "a", Value: -1}}).SetBatchSize(7))
				if err == nil {
					var docs []bson.D
					err = cur.All(ctx, &docs)
					if err == nil && len(docs) < 50 {
						err = errors.New("a find saw fewer than the 50 seeded documents")
					}
				}
				if err == nil {
					_, err = c.CountDocuments(ctx, bson.D{{Key: "tags", Value: "w"}})
				}
				if err == nil {
					err = c.Distinct(ctx, "tags", bson.D{}).Err()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			close(done)
			t.Fatal(err)
		}
	}
	close(done)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.CountDocuments(ctx, bson.D{})
	if err != nil || n != 250 {
		t.Fatalf("count after the writers = %d, %v; want 250", n, err)
	}
}

func TestReadIDEqualityFastPath(t *testing.T) {
	oid := bson.NewObjectID()
	for _, tc := range []struct {
		filter bson.D
		want   any
		ok     bool
	}{
		{bson.D{{Key: "_id", Value: int32(1)}}, int32(1), true},
		{bson.D{{Key: "_id", Value: oid}}, oid, true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: "x"}}}}, "x", true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: int32(1)}}}}, bson.D{{Key: "a", Value: int32(1)}}, true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 1}}}}, nil, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: bson.D{{Key: "$gt", Value: 1}}}}}}, nil, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: 1}, {Key: "$ne", Value: 2}}}}, nil, false},
		{bson.D{{Key: "_id", Value: nil}}, nil, false},
		{bson.D{{Key: "_id", Value: bson.A{1}}}, nil, false},
		{bson.D{{Key: "_id", Value: bson.Regex{Pattern: "a"}}}, nil, false},
		{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, nil, false},
		{bson.D{{Key: "a", Value: 1}}, nil, false},
		{bson.D{}, nil, false},
	} {
		got, ok := rdIDEquality(tc.filter)
		if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("rdIDEquality(%v) = %v, %v; want %v, %v", tc.filter, got, ok, tc.want, tc.ok)
		}
	}
}

// TestReadIDPinnedBesideOtherConditions: a filter that pins _id by equality beside other
// conditions reads that one document (no scan), and the other conditions still apply.
func TestReadIDPinnedBesideOtherConditions(t *testing.T) {
	for _, tc := range []struct {
		filter bson.D
		want   any
		ok     bool
	}{
		{bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: 1}}, int32(1), true},
		{bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: bson.D{{Key: "$eq", Value: "x"}}}}, "x", true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 1}}}, {Key: "a", Value: 1}}, nil, false},
		{bson.D{{Key: "_id", Value: 1}, {Key: "_id", Value: 2}}, nil, false},
		{bson.D{{Key: "_id", Value: nil}, {Key: "a", Value: 1}}, nil, false},
		{bson.D{{Key: "a", Value: 1}}, nil, false},
	} {
		got, ok := rdIDPinned(tc.filter)
		if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("rdIDPinned(%v) = %v, %v; want %v, %v", tc.filter, got, ok, tc.want, tc.ok)
		}
	}
	_, cl := startServer(t, Options{})
	c := rdSeed(t, cl, "pinned", 10)
	rdWantIDs(t, "_id 3 and a 3", rdFindIDs(t, c, bson.D{{Key: "_id", Value: int32(3)}, {Key: "a", Value: int32(3)}}), 3)
	rdWantIDs(t, "_id 3 and a 4", rdFindIDs(t, c, bson.D{{Key: "_id", Value: int32(3)}, {Key: "a", Value: int32(4)}}))
	rdWantIDs(t, "a above 2 and _id 5", rdFindIDs(t, c, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 2}}}, {Key: "_id", Value: int32(5)}}), 5)
	rdWantIDs(t, "_id 42 (none) and a 3", rdFindIDs(t, c, bson.D{{Key: "_id", Value: int32(42)}, {Key: "a", Value: int32(3)}}))
	n, err := c.CountDocuments(testCtx(t), bson.D{{Key: "_id", Value: int32(7)}, {Key: "g", Value: int32(1)}})
	if err != nil || n != 1 {
		t.Fatalf("count of _id 7 and g 1 = %d, %v; want 1", n, err)
	}
}

func TestReadDistinctPathValues(t *testing.T) {
	doc := bson.D{
		{Key: "a", Value: bson.A{
			bson.D{{Key: "b", Value: bson.A{int32(1), bson.A{int32(2)}}}},
			bson.D{{Key: "b", Value: int32(3)}},
			int32(4),
			bson.A{bson.D{{Key: "b", Value: int32(5)}}}, // nested arrays are not traversed
		}},
		{Key: "c", Value: bson.D{{Key: "d", Value: "x"}}},
	}
	for _, tc := range []struct {
		path string
		want []any
	}{
		{"a.b", []any{int32(1), bson.A{int32(2)}, int32(3)}},
		{"a.0.b", []any{int32(1), bson.A{int32(2)}}},
		{"a.2", []any{int32(4)}},
		{"c.d", []any{"x"}},
		{"c", []any{bson.D{{Key: "d", Value: "x"}}}},
		{"c.d.e", nil},
		{"nope", nil},
	} {
		var got []any
		rdDistinctValues(doc, strings.Split(tc.path, "."), func(v any) { got = append(got, v) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("values at %q = %v, want %v", tc.path, got, tc.want)
		}
	}
}
