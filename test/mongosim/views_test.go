package mongosim

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A view answers find, aggregate, count and distinct with its pipeline applied to its source,
// also when the source is another view, and reflects later writes to the source.
func TestViewReads(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("vw")
	src := db.Collection("people")
	aoSeed(t, src,
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}, {Key: "age", Value: 30}, {Key: "city", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}, {Key: "age", Value: 17}, {Key: "city", Value: "y"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "cid"}, {Key: "age", Value: 45}, {Key: "city", Value: "y"}})
	if err := db.CreateView(ctx, "adults", "people", mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 18}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "age", Value: 0}}}},
	}); err != nil {
		t.Fatalf("create view: %v", err)
	}
	if err := db.CreateView(ctx, "adultsInY", "adults", mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "city", Value: "y"}}}}}); err != nil {
		t.Fatalf("create view on a view: %v", err)
	}
	adults := db.Collection("adults")
	if got, want := aoDocs(t, adults), aoJSON(bson.D{{Key: "_id", Value: int32(1)}, {Key: "name", Value: "ann"}, {Key: "city", Value: "x"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "name", Value: "cid"}, {Key: "city", Value: "y"}}); got != want {
		t.Fatalf("find on the view: %s, want %s", got, want)
	}
	var one bson.M
	if err := adults.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&one); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("findOne of a document the view filters out: %v %v", one, err)
	}
	if n, err := adults.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("countDocuments: %d %v", n, err)
	}
	if n, err := adults.EstimatedDocumentCount(ctx); err != nil || n != 2 {
		t.Fatalf("estimatedDocumentCount (count without a query): %d %v", n, err)
	}
	var cities []string
	if err := adults.Distinct(ctx, "city", bson.D{}).Decode(&cities); err != nil || len(cities) != 2 {
		t.Fatalf("distinct: %v %v", cities, err)
	}
	got, err := aoAggregate(t, db.Collection("adultsInY"), mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "name", Value: 1}}}}})
	if err != nil || len(got) != 1 || got[0][1].Value != "cid" {
		t.Fatalf("aggregate on a view of a view: %v %v", got, err)
	}
	// Sorted and limited finds go through the view too (not the _id index of the source).
	cur, err := adults.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	var top []bson.M
	if err := cur.All(ctx, &top); err != nil || len(top) != 1 || top[0]["_id"] != int32(3) || top[0]["age"] != nil {
		t.Fatalf("find sorted on _id: %v %v", top, err)
	}
	if _, err := src.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "age", Value: 50}, {Key: "city", Value: "y"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Collection("adultsInY").CountDocuments(ctx, bson.D{}); n != 2 {
		t.Fatalf("the view does not show a later insert: %d", n)
	}
}

// listCollections shows a view as type "view" with its definition; writes to it fail with
// CommandNotSupportedOnView (166); drop removes it.
func TestViewCatalogAndWrites(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("vc")
	aoSeed(t, db.Collection("c"), bson.D{{Key: "_id", Value: 1}})
	pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 0}}}}}}}
	if err := db.CreateView(ctx, "v", "c", pipeline); err != nil {
		t.Fatal(err)
	}
	cur, err := db.ListCollections(ctx, bson.D{{Key: "type", Value: "view"}})
	if err != nil {
		t.Fatal(err)
	}
	var infos []bson.Raw
	if err := cur.All(ctx, &infos); err != nil || len(infos) != 1 {
		t.Fatalf("listCollections {type: view}: %v %v", infos, err)
	}
	if infos[0].Lookup("name").StringValue() != "v" || infos[0].Lookup("options", "viewOn").StringValue() != "c" ||
		!infos[0].Lookup("info", "readOnly").Boolean() {
		t.Fatalf("view info: %s", infos[0])
	}
	if err := db.CreateView(ctx, "v", "c", pipeline); !mongo.IsDuplicateKeyError(err) {
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(codeNamespaceExists) {
			t.Fatalf("creating the view again: %v, want NamespaceExists (48)", err)
		}
	}
	if err := db.CreateCollection(ctx, "v"); err == nil {
		t.Fatal("creating a collection over the view: no error")
	}

	v := db.Collection("v")
	wantView := func(what string, err error) {
		t.Helper()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(codeCommandNotSupportedOnView) || !se.HasErrorMessage("vc.v is a view, not a collection") {
			t.Fatalf("%s: %v, want CommandNotSupportedOnView (166)", what, err)
		}
	}
	_, err = v.InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	wantView("insertOne", err)
	_, err = v.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	wantView("updateMany", err)
	_, err = v.DeleteOne(ctx, bson.D{})
	wantView("deleteOne", err)
	wantView("findOneAndDelete", v.FindOneAndDelete(ctx, bson.D{}).Err())
	_, err = v.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}})
	wantView("createIndexes", err)
	_, err = aoAggregate(t, db.Collection("c"), mongo.Pipeline{{{Key: "$out", Value: "v"}}})
	wantView("$out into the view", err)
	_, err = v.Watch(ctx, mongo.Pipeline{})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeCommandNotSupportedOnView) {
		t.Fatalf("change stream on a view: %v, want 166", err)
	}
	err = db.CreateView(ctx, "bad", "c", mongo.Pipeline{{{Key: "$out", Value: "x"}}})
	if !errors.As(err, &se) || !se.HasErrorCode(codeOptionNotSupportedOnView) {
		t.Fatalf("view with $out: %v, want 167", err)
	}

	if err := v.Drop(ctx); err != nil {
		t.Fatalf("drop the view: %v", err)
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil || len(names) != 1 || names[0] != "c" {
		t.Fatalf("after dropping the view: %v %v", names, err)
	}
	if n, _ := db.Collection("c").CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatal("dropping the view changed its source")
	}
	// A database holding only a view exists and is dropped with it.
	if err := cl.Database("vonly").CreateView(ctx, "v", "none", mongo.Pipeline{}); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.Database("vonly").Collection("v").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("view of a missing collection: %d %v", n, err)
	}
	if err := cl.Database("vonly").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if names, _ := cl.Database("vonly").ListCollectionNames(ctx, bson.D{}); len(names) != 0 {
		t.Fatalf("views left after dropDatabase: %v", names)
	}
}
