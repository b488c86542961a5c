package mongosim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// With apiStrict, an aggregate whose pipeline has a stage outside API version 1 fails with
// APIStrictError naming the stage, on a database ($listLocalSessions) as on a collection;
// without apiStrict, or with version-1 stages, it runs.
func TestAPIStrictAggregateStages(t *testing.T) {
	srv, _ := startServer(t, Options{})
	strict := connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1).SetStrict(true))
	})
	loose := connectClient(t, srv, func(o *options.ClientOptions) {
		o.SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1))
	})
	ctx := context.Background()
	pipeline := mongo.Pipeline{{{Key: "$listLocalSessions", Value: bson.D{}}}, {{Key: "$limit", Value: 1}}}
	_, err := strict.Database("admin").Aggregate(ctx, pipeline)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeAPIStrictError || !strings.Contains(ce.Message, "$listLocalSessions is not allowed with 'apiStrict: true' in API Version 1") {
		t.Fatalf("database aggregate with $listLocalSessions under apiStrict: %v, want APIStrictError naming the stage", err)
	}
	cur, err := loose.Database("admin").Aggregate(ctx, pipeline)
	if err != nil {
		t.Fatalf("the same aggregate without apiStrict: %v", err)
	}
	_ = cur.Close(ctx)
	coll := strict.Database("api").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$indexStats", Value: bson.D{}}}}); !errors.As(err, &ce) || ce.Code != codeAPIStrictError {
		t.Fatalf("$indexStats under apiStrict: %v, want APIStrictError", err)
	}
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$count", Value: "n"}}})
	if err != nil {
		t.Fatalf("version-1 stages under apiStrict: %v", err)
	}
	_ = cur.Close(ctx)
}

// Converting an index to unique over duplicates fails with CannotConvertIndexToUnique (359),
// whose reply lists the violations: the _ids of each group of documents sharing a key.
func TestCollModUniqueViolations(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	db := cl.Database("pu")
	coll := db.Collection("v")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	docs := []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}},
		bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 2}}, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 3}},
		bson.D{{Key: "_id", Value: 5}, {Key: "x", Value: 3}}}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	collMod := func(index bson.D) (bson.Raw, error) {
		return db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "v"}, {Key: "index", Value: index}}).Raw()
	}
	if _, err := collMod(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "prepareUnique", Value: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 6}, {Key: "x", Value: 2}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("a new duplicate under prepareUnique: %v, want DuplicateKey", err)
	}
	_, err := collMod(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "unique", Value: true}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeCannotConvertIndexToUnique || ce.Name != "CannotConvertIndexToUnique" {
		t.Fatalf("conversion over duplicates: %v, want CannotConvertIndexToUnique (359)", err)
	}
	want := `{"violations": [{"ids": [{"$numberInt":"1"},{"$numberInt":"2"}]},{"ids": [{"$numberInt":"4"},{"$numberInt":"5"}]}]}`
	var got struct {
		Violations bson.RawValue `bson:"violations"`
	}
	if err := bson.Unmarshal(ce.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if s := `{"violations": ` + got.Violations.String() + `}`; s != want {
		t.Fatalf("violations %s, want %s", s, want)
	}
}

// Since 5.0 an update operator with an empty operand ({$set: {}}) is a no-op, not an error:
// the client bulkWrite of the specifications' rawData case (the driver drops rawData for an
// 8.0 server) matches without modifying, and a collection update does the same.
func TestEmptySetIsANoOp(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("crud-tests").Collection("coll0")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	o := options.ClientBulkWrite()
	if err := xoptions.SetInternalClientBulkWriteOptions(o, "rawData", true); err != nil {
		t.Fatal(err)
	}
	empty := bson.D{{Key: "$set", Value: bson.D{}}}
	res, err := cl.BulkWrite(ctx, []mongo.ClientBulkWrite{
		{Database: "crud-tests", Collection: "coll0", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{}).SetUpdate(empty)},
		{Database: "crud-tests", Collection: "coll0", Model: mongo.NewClientUpdateManyModel().SetFilter(bson.D{}).SetUpdate(empty)},
	}, o)
	if err != nil {
		t.Fatalf("client bulkWrite with empty $set: %v", err)
	}
	if res.MatchedCount != 2 || res.ModifiedCount != 0 {
		t.Fatalf("result %+v, want 2 matched and none modified", res)
	}
	bw := srv.CommandsNamed("bulkWrite")
	if len(bw) != 1 || hasKey(bw[0].Body, "rawData") {
		t.Fatalf("bulkWrite commands %v: the driver sends rawData to 8.2+ only", bw)
	}
	ur, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{}}, {Key: "$inc", Value: bson.D{}}})
	if err != nil || ur.MatchedCount != 1 || ur.ModifiedCount != 0 {
		t.Fatalf("updateOne with empty operands: %+v, %v", ur, err)
	}
	// No change event: the next one is the insert made now.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatal(cs.Err())
	}
	if op := cs.Current.Lookup("operationType").StringValue(); op != "insert" {
		t.Fatalf("first event %s: a no-op update must not produce one", cs.Current)
	}
}

// returnKey over a multikey index returns, once per document, the key the index scan meets
// first within the filter's bounds (in the scan's direction); a projection is ignored; $and
// conjuncts select the index as top-level fields do; a backward scan reads the largest key.
func TestFindReturnKeyMultikey(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("rk").Collection("multi")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "tags", Value: bson.A{5, 1, 9}}, {Key: "b", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "tags", Value: bson.A{}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "tags", Value: 4}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "tags", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	find := func(filter bson.D, o *options.FindOptionsBuilder) string {
		t.Helper()
		cur, err := coll.Find(ctx, filter, o.SetReturnKey(true))
		if err != nil {
			t.Fatalf("find %v: %v", filter, err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(out))
		for i, d := range out {
			parts[i] = d.String()
		}
		return strings.Join(parts, " ")
	}
	if got := find(bson.D{{Key: "tags", Value: bson.D{{Key: "$gt", Value: 4}}}}, options.Find().SetSort(bson.D{{Key: "tags", Value: 1}})); got != `{"tags": {"$numberInt":"5"}}` {
		t.Fatalf("tags > 4: %s, want the first key in bounds, 5", got)
	}
	if got := find(bson.D{{Key: "tags", Value: 9}}, options.Find().SetProjection(bson.D{{Key: "b", Value: 1}})); got != `{"tags": {"$numberInt":"9"}}` {
		t.Fatalf("tags 9 with a projection: %s, want the matched key only", got)
	}
	if got := find(bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "tags", Value: bson.D{{Key: "$gte", Value: 1}}}}}}}, options.Find().SetSort(bson.D{{Key: "tags", Value: -1}})); got != `{"tags": {"$numberInt":"9"}} {"tags": {"$numberInt":"4"}}` {
		t.Fatalf("$and tags >= 1, sorted descending: %s, want the largest key of each document", got)
	}
	if got := find(bson.D{{Key: "_id", Value: 2}}, options.Find().SetHint("tags_1")); got != `{"tags": {"$undefined":true}}` {
		t.Fatalf("an empty array: %s, want its undefined key", got)
	}
	// A hashed index's keys are hashes mongosim does not compute: refused, not answered wrong.
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "b", Value: "hashed"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.Find(ctx, bson.D{}, options.Find().SetHint("b_hashed").SetReturnKey(true))
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != codeUnsupported || !strings.Contains(ce.Message, "hashed") {
		t.Fatalf("returnKey on a hashed index: %v, want the not-supported error naming it", err)
	}
}
