package mongosim

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestFindIDInMatchesTheScan: a find {_id: {$in: [...]}} (read by point lookups in the _id
// index) returns what the same filter returns by a scan ({_id: {$in}} combined with an
// always-true condition, which takes the scan): the same documents, in the same natural order,
// with absent and repeated values, numbers that are equal across types, and document _ids;
// inside a transaction too, where it reads the transaction's view.
func TestFindIDInMatchesTheScan(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("ix").Collection("c")
	docs := []any{
		bson.D{{Key: "_id", Value: int32(3)}}, bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "s", Value: "x"}, {Key: "e", Value: "1"}}}},
		bson.D{{Key: "_id", Value: int64(1)}}, bson.D{{Key: "_id", Value: 2.0}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	in := bson.A{int64(2), "a", 99, bson.D{{Key: "s", Value: "x"}, {Key: "e", Value: "1"}}, 1.0, "a", int32(3)}
	ids := func(ctx interface{ Done() <-chan struct{} }, filter bson.D) []string {
		t.Helper()
		cur, err := coll.Find(testCtx(t), filter)
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.D
		if err := cur.All(testCtx(t), &out); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, d := range out {
			s = append(s, bson.Raw(must(bson.Marshal(d))).String())
		}
		return s
	}
	lookup := ids(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}})
	scan := ids(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}, {Key: "z", Value: bson.D{{Key: "$exists", Value: false}}}})
	if len(lookup) != 5 || !slices.Equal(lookup, scan) {
		t.Fatalf("lookup %v, scan %v: want the same 5 documents in natural order", lookup, scan)
	}

	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: int32(99)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(sctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(sctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{99, "a", int32(3)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.D
	if err := cur.All(sctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0][0].Value != int32(3) || got[1][0].Value != int32(99) {
		t.Fatalf("inside the transaction: %v, want _id 3 then 99 (its own insert, without its delete)", got)
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTxnViewIndexesCopyOnWrite: a transaction's view shares the collection's secondary index
// entries until one side writes; then each keeps its own. A unique index refuses a duplicate
// against the view's own entries inside the transaction, the committed collection never sees the
// transaction's keys before the commit (an outside insert of the same key succeeds, and the
// commit then conflicts), and an aborted transaction leaves the committed index as it was.
func TestTxnViewIndexesCopyOnWrite(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("ix").Collection("u")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)

	// Abort: the view's writes never reach the committed index.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: "a"}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate k inside the transaction: %v, want a duplicate key error", err)
	}
	_ = sess.AbortTransaction(ctx)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "k", Value: "c"}}); err != nil {
		t.Fatalf("k c after the aborted transaction: %v, want it free", err)
	}

	// The committed side writes after the view was made: the view does not see it.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx = mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 6}, {Key: "k", Value: "d"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "k", Value: "e"}}); err != nil {
		t.Fatalf("outside insert while the transaction is open: %v", err)
	}
	if _, err := coll.InsertOne(sctx, bson.D{{Key: "_id", Value: 8}, {Key: "k", Value: "e"}}); err != nil {
		t.Fatalf("k e inside the transaction (its snapshot predates the outside insert): %v", err)
	}
	if err := sess.CommitTransaction(ctx); err == nil {
		t.Fatal("commit of k e, taken meanwhile: nil, want an error")
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || n != 4 {
		t.Fatalf("%d documents (%v), want 4: 1, 2, 5, 7", n, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
