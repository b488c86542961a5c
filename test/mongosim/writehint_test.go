package mongosim

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// hintSetup fills hint.c with {_id: 1, a: 3}, {_id: 2, a: 1}, {_id: 3} and a sparse index
// {a: 1} named a_1.
func hintSetup(t *testing.T, cl *mongo.Client) *mongo.Collection {
	t.Helper()
	ctx := testCtx(t)
	coll := cl.Database("hint").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 3}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}},
		bson.D{{Key: "_id", Value: 3}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}},
		Options: options.Index().SetSparse(true)}); err != nil {
		t.Fatal(err)
	}
	return coll
}

func wantBadHint(t *testing.T, what string, err error) {
	t.Helper()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeBadValue) || !se.HasErrorMessage("hint provided does not correspond to an existing index") {
		t.Fatalf("%s: %v, want BadValue (2) 'hint provided does not correspond to an existing index'", what, err)
	}
}

// updateOne, deleteOne and findOneAndUpdate read through the hinted index: by name or key
// pattern, the first document in the index's order is the one written, and a sparse index
// does not hold documents without its field.
func TestWriteHintChoosesIndex(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := hintSetup(t, cl)

	res, err := coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: true}}}}, options.UpdateOne().SetHint("a_1"))
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("updateOne hint a_1: %+v %v", res, err)
	}
	if d := wDocs(srv, "hint", "c")[1]; !hasField(d, "u") {
		t.Fatalf("updateOne through {a: 1} should take _id 2 (a: 1), docs %v", wDocs(srv, "hint", "c"))
	}
	// A sparse index does not hold _id 3: a multi update through it misses it.
	res, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: true}}}}, options.UpdateMany().SetHint(bson.D{{Key: "a", Value: 1}}))
	if err != nil || res.MatchedCount != 2 {
		t.Fatalf("updateMany through the sparse index: %+v %v, want 2 matched", res, err)
	}
	// {$natural: -1} takes the last inserted.
	var got bson.D
	if err := coll.FindOneAndUpdate(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: true}}}},
		options.FindOneAndUpdate().SetHint(bson.D{{Key: "$natural", Value: -1}})).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if docID(got) != int32(3) {
		t.Fatalf("findOneAndUpdate $natural -1 returned %v, want _id 3", got)
	}
	dres, err := coll.DeleteOne(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}}, options.DeleteOne().SetHint(bson.D{{Key: "a", Value: 1}}))
	if err != nil || dres.DeletedCount != 1 {
		t.Fatalf("deleteOne hint: %+v %v", dres, err)
	}
	for _, d := range wDocs(srv, "hint", "c") {
		if docID(d) == int32(2) {
			t.Fatal("deleteOne through {a: 1} should delete _id 2")
		}
	}
	if err := coll.FindOneAndDelete(ctx, bson.D{}, options.FindOneAndDelete().SetHint("_id_")).Decode(&got); err != nil || docID(got) != int32(1) {
		t.Fatalf("findOneAndDelete hint _id_: %v %v", got, err)
	}
	// Bulk writes carry the hint per statement.
	if _, err := coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateOneModel().SetFilter(bson.D{}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}).SetHint("_id_"),
		mongo.NewDeleteManyModel().SetFilter(bson.D{}).SetHint(bson.D{{Key: "_id", Value: 1}}),
	}); err != nil {
		t.Fatalf("bulkWrite with hints: %v", err)
	}
	if n := len(wDocs(srv, "hint", "c")); n != 0 {
		t.Fatalf("%d documents left, want 0", n)
	}
}

func hasField(d bson.D, k string) bool {
	_, ok := lookupD(d, k)
	return ok
}

// A hint naming no index fails each write with BadValue and changes nothing: as a write error
// of update and delete, as the command error of findAndModify.
func TestWriteHintUnknownIndex(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := hintSetup(t, cl)
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}

	_, err := coll.UpdateOne(ctx, bson.D{}, set, options.UpdateOne().SetHint("nope"))
	var wex mongo.WriteException
	if !errors.As(err, &wex) || len(wex.WriteErrors) != 1 {
		t.Fatalf("updateOne: %v, want one write error", err)
	}
	wantBadHint(t, "updateOne", err)
	_, err = coll.UpdateMany(ctx, bson.D{}, set, options.UpdateMany().SetHint(bson.D{{Key: "b", Value: 1}}))
	wantBadHint(t, "updateMany", err)
	_, err = coll.ReplaceOne(ctx, bson.D{}, bson.D{{Key: "r", Value: 1}}, options.Replace().SetHint("nope"))
	wantBadHint(t, "replaceOne", err)
	_, err = coll.DeleteOne(ctx, bson.D{}, options.DeleteOne().SetHint("nope"))
	wantBadHint(t, "deleteOne", err)
	_, err = coll.DeleteMany(ctx, bson.D{}, options.DeleteMany().SetHint(bson.D{{Key: "a", Value: -1}}))
	wantBadHint(t, "deleteMany", err)
	err = coll.FindOneAndUpdate(ctx, bson.D{}, set, options.FindOneAndUpdate().SetHint("nope")).Err()
	wantBadHint(t, "findOneAndUpdate", err)
	err = coll.FindOneAndReplace(ctx, bson.D{}, bson.D{{Key: "r", Value: 1}}, options.FindOneAndReplace().SetHint("nope")).Err()
	wantBadHint(t, "findOneAndReplace", err)
	err = coll.FindOneAndDelete(ctx, bson.D{}, options.FindOneAndDelete().SetHint("nope")).Err()
	wantBadHint(t, "findOneAndDelete", err)
	var cex mongo.CommandError
	if !errors.As(err, &cex) {
		t.Fatalf("findAndModify: %T, want a command error", err)
	}
	docs := wDocs(srv, "hint", "c")
	if len(docs) != 3 {
		t.Fatalf("documents changed: %v", docs)
	}
	for _, d := range docs {
		if hasField(d, "x") || hasField(d, "r") {
			t.Fatalf("a refused write was applied: %v", docs)
		}
	}
	// A hint of the wrong type is refused by the parser.
	raw := wRun(t, cl.Database("hint"), bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: set}, {Key: "hint", Value: int32(1)}}}}})
	vals, _ := raw.Lookup("writeErrors").Array().Values()
	if len(vals) != 1 || wInt32(t, vals[0].Document(), "code") != codeFailedToParse {
		t.Fatalf("hint of type int: %s", raw)
	}
}

// The driver refuses a hint on an unacknowledged write before sending it (the server would
// not report an unknown index to a w:0 client); mongosim never sees the write.
func TestWriteHintUnacknowledged(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	hintSetup(t, cl)
	coll := cl.Database("hint").Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	srv.ResetCommands()
	if _, err := coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateOne().SetHint("a_1")); err == nil {
		t.Fatal("unacknowledged updateOne with hint: no error")
	}
	if _, err := coll.DeleteOne(ctx, bson.D{}, options.DeleteOne().SetHint("a_1")); err == nil {
		t.Fatal("unacknowledged deleteOne with hint: no error")
	}
	if n := len(srv.CommandsNamed("update")) + len(srv.CommandsNamed("delete")); n != 0 {
		t.Fatalf("%d writes reached the server", n)
	}
}
