package mongosim

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// colNames runs find on coll and returns the "s" fields in result order.
func colNames(t *testing.T, coll *mongo.Collection, filter bson.D, o *options.FindOptionsBuilder) string {
	t.Helper()
	cur, err := coll.Find(testCtx(t), filter, o)
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	var docs []struct{ S string }
	if err := cur.All(testCtx(t), &docs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.S
	}
	return strings.Join(out, ",")
}

func colSeed(t *testing.T, coll *mongo.Collection, vals ...string) {
	t.Helper()
	docs := make([]bson.D, len(vals))
	for i, v := range vals {
		docs[i] = bson.D{{Key: "_id", Value: i + 1}, {Key: "s", Value: v}}
	}
	aoSeed(t, coll, docs...)
}

// The orders and equalities asserted here are ICU's for English, as a MongoDB 8.0 server
// applies them: lowercase before uppercase at strength 3, case ignored at 2, accents too at 1,
// digits compared as numbers with numericOrdering.
func TestCollationQueriesAndSorts(t *testing.T) {
	_, cl := startServer(t, Options{})
	coll := cl.Database("col").Collection("c")
	colSeed(t, coll, "b", "A", "a", "B", "á", "10", "2", "café", "Cafe", "cafe")
	en := func(strength int) *options.Collation { return &options.Collation{Locale: "en", Strength: strength} }
	all := bson.D{{Key: "s", Value: bson.D{{Key: "$in", Value: bson.A{"a", "A", "b", "B", "á"}}}}}
	byS := bson.D{{Key: "s", Value: 1}}

	if got := colNames(t, coll, all, options.Find().SetSort(byS)); got != "A,B,a,b,á" {
		t.Fatalf("binary sort: %s", got)
	}
	if got := colNames(t, coll, all, options.Find().SetSort(byS).SetCollation(en(3))); got != "a,A,á,b,B" {
		t.Fatalf("en sort: %s, want a,A,á,b,B", got)
	}
	if got := colNames(t, coll, all, options.Find().SetSort(bson.D{{Key: "s", Value: -1}}).SetCollation(en(3))); got != "B,b,á,A,a" {
		t.Fatalf("en sort descending: %s", got)
	}
	eq := func(v string, c *options.Collation) string {
		return colNames(t, coll, bson.D{{Key: "s", Value: v}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetCollation(c))
	}
	if got := eq("cafe", en(3)); got != "cafe" {
		t.Fatalf("strength 3 equality: %s", got)
	}
	if got := eq("cafe", en(2)); got != "Cafe,cafe" {
		t.Fatalf("strength 2 equality: %s, want Cafe,cafe", got)
	}
	if got := eq("cafe", en(1)); got != "café,Cafe,cafe" {
		t.Fatalf("strength 1 equality: %s, want café,Cafe,cafe", got)
	}
	// {_id: …} lookups and range operators go through the collation too.
	if got := colNames(t, coll, bson.D{{Key: "s", Value: bson.D{{Key: "$gt", Value: "a"}, {Key: "$lt", Value: "b"}}}}, options.Find().SetCollation(en(3))); got != "A,á" {
		t.Fatalf("range under en: %s, want A,á", got)
	}
	num := &options.Collation{Locale: "en", NumericOrdering: true}
	digits := bson.D{{Key: "s", Value: bson.D{{Key: "$in", Value: bson.A{"10", "2"}}}}}
	if got := colNames(t, coll, digits, options.Find().SetSort(byS)); got != "10,2" {
		t.Fatalf("binary digits: %s", got)
	}
	if got := colNames(t, coll, digits, options.Find().SetSort(byS).SetCollation(num)); got != "2,10" {
		t.Fatalf("numericOrdering: %s, want 2,10", got)
	}
	if got := colNames(t, coll, bson.D{{Key: "s", Value: bson.D{{Key: "$gt", Value: "9"}, {Key: "$lt", Value: "a"}}}}, options.Find().SetCollation(num)); got != "10" {
		t.Fatalf("numericOrdering range: %s, want 10", got)
	}
	ctx := testCtx(t)
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "s", Value: "CAFE"}}, options.Count().SetCollation(en(2))); err != nil || n != 2 {
		t.Fatalf("count under strength 2: %d %v", n, err)
	}
	var vals []string
	if err := coll.Distinct(ctx, "s", all, options.Distinct().SetCollation(en(2))).Decode(&vals); err != nil || len(vals) != 3 {
		t.Fatalf("distinct under strength 2: %v %v, want 3 values (a, á, b)", vals, err)
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "s", Value: "A"}}}}, {{Key: "$sort", Value: byS}}},
		options.Aggregate().SetCollation(en(1)))
	if err != nil {
		t.Fatal(err)
	}
	var agg []struct{ S string }
	if err := cur.All(ctx, &agg); err != nil || len(agg) != 3 { // a, A and á tie under strength 1
		t.Fatalf("aggregate $match/$sort under strength 1: %v %v", agg, err)
	}
	// Comparison expressions ($expr, $project) compare under the collation too.
	if got := colNames(t, coll, bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$s", "CAFE"}}}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetCollation(en(2))); got != "Cafe,cafe" {
		t.Fatalf("$expr $eq under strength 2: %s, want Cafe,cafe", got)
	}
	if got := colNames(t, coll, bson.D{{Key: "$expr", Value: bson.D{{Key: "$in", Value: bson.A{"$s", bson.A{"CAFÉ"}}}}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetCollation(en(1))); got != "café,Cafe,cafe" {
		t.Fatalf("$expr $in under strength 1: %s, want café,Cafe,cafe", got)
	}
	// $group keys equal under the collation form one group, keyed by the first value seen.
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: all}}, {{Key: "$group", Value: bson.D{{Key: "_id", Value: "$s"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}},
		options.Aggregate().SetCollation(en(2)))
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := cur.All(ctx, &groups); err != nil || len(groups) != 3 {
		t.Fatalf("$group under strength 2: %v %v, want 3 groups (a/A, b/B, á)", groups, err)
	}
}

// Writes match under the statement's collation; a unique index with a collation refuses keys
// equal under it; a collection's default collation applies to reads, writes and new indexes,
// unless a command asks for simple.
func TestCollationWritesIndexesAndDefault(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("colw")
	coll := db.Collection("c")
	colSeed(t, coll, "Ann", "ann", "bob")
	ci := &options.Collation{Locale: "en", Strength: 2}
	res, err := coll.UpdateMany(ctx, bson.D{{Key: "s", Value: "ANN"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: 1}}}}, options.UpdateMany().SetCollation(ci))
	if err != nil || res.ModifiedCount != 2 {
		t.Fatalf("updateMany with collation: %+v %v", res, err)
	}
	var got bson.M
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "s", Value: bson.D{{Key: "$in", Value: bson.A{"Ann", "ann"}}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "f", Value: 1}}}},
		options.FindOneAndUpdate().SetCollation(&options.Collation{Locale: "en"}).SetSort(bson.D{{Key: "s", Value: 1}}).SetReturnDocument(options.After)).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got["s"] != "ann" { // en: "ann" sorts before "Ann"
		t.Fatalf("findOneAndUpdate sorted under en picked %v, want ann", got)
	}
	if d, err := coll.DeleteOne(ctx, bson.D{{Key: "s", Value: "BOB"}}, options.DeleteOne().SetCollation(ci)); err != nil || d.DeletedCount != 1 {
		t.Fatalf("deleteOne with collation: %+v %v", d, err)
	}
	if d, err := coll.DeleteOne(ctx, bson.D{{Key: "s", Value: "ANN"}}); err != nil || d.DeletedCount != 0 {
		t.Fatalf("deleteOne without collation matched: %+v %v", d, err)
	}

	// A unique index under strength 2.
	u := db.Collection("u")
	if _, err := u.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}},
		Options: options.Index().SetUnique(true).SetCollation(ci)}); err != nil {
		t.Fatal(err)
	}
	if _, err := u.InsertOne(ctx, bson.D{{Key: "email", Value: "Me@x.org"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := u.InsertOne(ctx, bson.D{{Key: "email", Value: "me@X.ORG"}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("second email equal under the index's collation: %v, want DuplicateKey", err)
	}
	specs, err := u.Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 {
		t.Fatal(specs, err)
	}
	raw, _ := srvIndexSpec(t, cl, "colw", "u", "email_1")
	if raw.Lookup("collation", "locale").StringValue() != "en" || raw.Lookup("collation", "strength").Int32() != 2 ||
		raw.Lookup("collation", "version").StringValue() != icuVersion {
		t.Fatalf("index spec: %s", raw)
	}

	// A collection's default collation.
	if err := db.CreateCollection(ctx, "d", options.CreateCollection().SetCollation(ci)); err != nil {
		t.Fatal(err)
	}
	d := db.Collection("d")
	colSeed(t, d, "X", "x", "y")
	if got := colNames(t, d, bson.D{{Key: "s", Value: "x"}}, options.Find()); got != "X,x" {
		t.Fatalf("find under the default collation: %s", got)
	}
	if got := colNames(t, d, bson.D{{Key: "s", Value: "x"}}, options.Find().SetCollation(&options.Collation{Locale: "simple"})); got != "x" {
		t.Fatalf("find with simple on a collated collection: %s", got)
	}
	if n, _ := d.CountDocuments(ctx, bson.D{{Key: "s", Value: "X"}}); n != 2 {
		t.Fatalf("count under the default collation: %d", n)
	}
	if r, err := d.UpdateMany(ctx, bson.D{{Key: "s", Value: "x"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 1}}}}); err != nil || r.ModifiedCount != 2 {
		t.Fatalf("updateMany under the default collation: %+v %v", r, err)
	}
	if _, err := d.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "s", Value: 1}}, Options: options.Index().SetUnique(true)}); err == nil {
		t.Fatal("unique index inheriting strength 2 over X and x: built")
	}
	if _, err := d.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	raw, _ = srvIndexSpec(t, cl, "colw", "d", "k_1")
	if raw.Lookup("collation", "strength").Int32() != 2 {
		t.Fatalf("index without a collation on a collated collection: %s, want the default's", raw)
	}
	cur, err := db.ListCollections(ctx, bson.D{{Key: "name", Value: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	var infos []bson.Raw
	if err := cur.All(ctx, &infos); err != nil || len(infos) != 1 {
		t.Fatal(infos, err)
	}
	if infos[0].Lookup("options", "collation", "locale").StringValue() != "en" || infos[0].Lookup("options", "collation", "caseFirst").StringValue() != "off" {
		t.Fatalf("listCollections options: %s", infos[0])
	}
	_ = srv
}

// srvIndexSpec returns the listIndexes document of the named index.
func srvIndexSpec(t *testing.T, cl *mongo.Client, db, coll, name string) (bson.Raw, bool) {
	t.Helper()
	cur, err := cl.Database(db).Collection(coll).Indexes().List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.Raw
	if err := cur.All(testCtx(t), &specs); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Lookup("name").StringValue() == name {
			return s, true
		}
	}
	t.Fatalf("no index %s in %v", name, specs)
	return nil, false
}

// Collations mongosim does not implement fail with one error naming them; invalid ones as
// a server's parser says.
func TestCollationRefused(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("colr").Collection("c")
	colSeed(t, coll, "a")
	for _, tc := range []struct {
		c    *options.Collation
		code int32
		want string
	}{
		{&options.Collation{Locale: "fr"}, codeUnsupported, "collation locale 'fr'"},
		{&options.Collation{Locale: "en", CaseFirst: "upper"}, codeUnsupported, "caseFirst"},
		{&options.Collation{Locale: "en", CaseLevel: true}, codeUnsupported, "caseLevel"},
		{&options.Collation{Locale: "en", Alternate: "shifted"}, codeUnsupported, "alternate"},
		{&options.Collation{Locale: "en", Strength: 4}, codeUnsupported, "strength 4"},
		{&options.Collation{Locale: "en", Strength: 6}, codeBadValue, "strength"},
		{&options.Collation{Locale: "simple", Strength: 2}, codeBadValue, "simple"},
	} {
		err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetCollation(tc.c)).Err()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(int(tc.code)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("collation %+v: %v, want code %d naming %q", tc.c, err, tc.code, tc.want)
		}
	}
}
