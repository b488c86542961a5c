package mongosim

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// aoSeed inserts docs into coll.
func aoSeed(t *testing.T, coll *mongo.Collection, docs ...bson.D) {
	t.Helper()
	if len(docs) == 0 {
		return
	}
	in := make([]any, len(docs))
	for i, d := range docs {
		in[i] = d
	}
	if _, err := coll.InsertMany(testCtx(t), in); err != nil {
		t.Fatal(err)
	}
}

// aoAggregate runs pipeline on coll and returns the documents the aggregate itself returned.
func aoAggregate(t *testing.T, coll *mongo.Collection, pipeline mongo.Pipeline) ([]bson.D, error) {
	t.Helper()
	cur, err := coll.Aggregate(testCtx(t), pipeline)
	if err != nil {
		return nil, err
	}
	var out []bson.D
	err = cur.All(testCtx(t), &out)
	return out, err
}

// aoDocs returns the documents of coll sorted by _id, as canonical JSON.
func aoDocs(t *testing.T, coll *mongo.Collection) string {
	t.Helper()
	cur, err := coll.Find(testCtx(t), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var raws []bson.Raw
	if err := cur.All(testCtx(t), &raws); err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(raws))
	for i, r := range raws {
		parts[i] = r.String()
	}
	return strings.Join(parts, " ")
}

func aoJSON(docs ...bson.D) string {
	parts := make([]string, len(docs))
	for i, d := range docs {
		b, _ := bson.Marshal(d)
		parts[i] = bson.Raw(b).String()
	}
	return strings.Join(parts, " ")
}

// aoEvents reads n events of cs as "operationType ns.coll[->to.coll] _id" strings.
func aoEvents(t *testing.T, cs *mongo.ChangeStream, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		if !cs.Next(testCtx(t)) {
			t.Fatalf("change stream ended after %v: %v", out, cs.Err())
		}
		ev := cs.Current
		s := ev.Lookup("operationType").StringValue() + " " + ev.Lookup("ns", "coll").StringValue()
		if to, err := ev.LookupErr("to", "coll"); err == nil {
			s += "->" + to.StringValue()
		}
		if id, err := ev.LookupErr("documentKey", "_id"); err == nil {
			s += " " + id.String()
		}
		if strings.HasPrefix(ev.Lookup("ns", "coll").StringValue(), "tmp.agg_out.") {
			s = strings.Replace(s, ev.Lookup("ns", "coll").StringValue(), "tmp", 1)
		}
		out = append(out, s)
	}
	return out
}

func aoWantCode(t *testing.T, what string, err error, code int32) {
	t.Helper()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(code)) {
		t.Fatalf("%s: %v, want code %d", what, err, code)
	}
}

// $out replaces the target with the pipeline's result, keeping the target's indexes, and
// returns no documents; into another database too. A database change stream sees the
// temporary collection's inserts, the target's drop and the rename over it.
func TestAggregateOut(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("ao")
	src, dst := db.Collection("src"), db.Collection("dst")
	aoSeed(t, src, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 3}})
	aoSeed(t, dst, bson.D{{Key: "_id", Value: 9}, {Key: "old", Value: true}})
	if _, err := dst.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	cs, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)

	got, err := aoAggregate(t, src, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}}}}, {{Key: "$out", Value: "dst"}}})
	if err != nil || len(got) != 0 {
		t.Fatalf("$out: %v %v, want no documents", got, err)
	}
	if want := aoJSON(bson.D{{Key: "_id", Value: int32(2)}, {Key: "a", Value: int32(2)}}, bson.D{{Key: "_id", Value: int32(3)}, {Key: "a", Value: int32(3)}}); aoDocs(t, dst) != want {
		t.Fatalf("after $out: %s, want %s", aoDocs(t, dst), want)
	}
	specs, err := dst.Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 || specs[1].Name != "a_1" || specs[1].Unique == nil || !*specs[1].Unique {
		t.Fatalf("indexes after $out: %+v %v, want _id_ and the unique a_1", specs, err)
	}
	ev := aoEvents(t, cs, 4)
	want := []string{`insert tmp {"$numberInt":"2"}`, `insert tmp {"$numberInt":"3"}`, "drop dst", "rename tmp->dst"}
	if strings.Join(ev, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", ev, want)
	}
	// Into another database, a collection that does not exist yet.
	if _, err := aoAggregate(t, src, mongo.Pipeline{{{Key: "$out", Value: bson.D{{Key: "db", Value: "ao2"}, {Key: "coll", Value: "copy"}}}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := cl.Database("ao2").Collection("copy").CountDocuments(ctx, bson.D{}); n != 3 {
		t.Fatalf("ao2.copy holds %d documents, want 3", n)
	}
	// A duplicate key in the result leaves the target as it was and no temporary collection.
	_, err = aoAggregate(t, src, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "a", Value: 0}}}}, {{Key: "$out", Value: "dst"}}})
	aoWantCode(t, "$out with duplicate keys", err, codeDuplicateKey)
	if n, _ := dst.CountDocuments(ctx, bson.D{}); n != 2 {
		t.Fatalf("dst changed by a failed $out: %d documents", n)
	}
	names, _ := db.ListCollectionNames(ctx, bson.D{})
	for _, n := range names {
		if strings.HasPrefix(n, "tmp.") {
			t.Fatalf("temporary collection left: %v", names)
		}
	}
	_, err = aoAggregate(t, src, mongo.Pipeline{{{Key: "$out", Value: "x"}}, {{Key: "$match", Value: bson.D{}}}})
	aoWantCode(t, "$out before the end", err, codeFinalStageOnly)
	_, err = aoAggregate(t, src, mongo.Pipeline{{{Key: "$out", Value: bson.D{{Key: "db", Value: "admin"}, {Key: "coll", Value: "x"}}}}})
	aoWantCode(t, "$out into admin", err, codeOutInternalDB)
}

// $merge's modes write what a server writes, with the same change events.
func TestAggregateMergeModes(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("am")
	src, dst := db.Collection("src"), db.Collection("dst")
	aoSeed(t, src, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 10}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 20}})
	reset := func(docs ...bson.D) {
		t.Helper()
		if err := dst.Drop(ctx); err != nil {
			t.Fatal(err)
		}
		aoSeed(t, dst, docs...)
	}
	old := bson.D{{Key: "_id", Value: 1}, {Key: "b", Value: 1}}
	merge := func(spec bson.D) error {
		t.Helper()
		_, err := aoAggregate(t, src, mongo.Pipeline{{{Key: "$merge", Value: append(bson.D{{Key: "into", Value: "dst"}}, spec...)}}})
		return err
	}
	i32 := func(v int) int32 { return int32(v) }
	cases := []struct {
		name string
		spec bson.D
		want string
	}{
		{"default: merge, insert", nil, aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "b", Value: i32(1)}, {Key: "a", Value: i32(10)}}, bson.D{{Key: "_id", Value: i32(2)}, {Key: "a", Value: i32(20)}})},
		{"replace", bson.D{{Key: "whenMatched", Value: "replace"}}, aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "a", Value: i32(10)}}, bson.D{{Key: "_id", Value: i32(2)}, {Key: "a", Value: i32(20)}})},
		{"keepExisting", bson.D{{Key: "whenMatched", Value: "keepExisting"}}, aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "b", Value: i32(1)}}, bson.D{{Key: "_id", Value: i32(2)}, {Key: "a", Value: i32(20)}})},
		{"merge, discard", bson.D{{Key: "whenNotMatched", Value: "discard"}}, aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "b", Value: i32(1)}, {Key: "a", Value: i32(10)}})},
		{"pipeline", bson.D{{Key: "whenMatched", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "sum", Value: bson.D{{Key: "$add", Value: bson.A{"$b", "$$new.a"}}}}}}}}}},
			aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "b", Value: i32(1)}, {Key: "sum", Value: i32(11)}}, bson.D{{Key: "_id", Value: i32(2)}, {Key: "a", Value: i32(20)}})},
		{"pipeline with let", bson.D{{Key: "let", Value: bson.D{{Key: "x", Value: "$a"}}}, {Key: "whenMatched", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: "$$x"}}}}}}},
			aoJSON(bson.D{{Key: "_id", Value: i32(1)}, {Key: "b", Value: i32(1)}, {Key: "x", Value: i32(10)}}, bson.D{{Key: "_id", Value: i32(2)}, {Key: "a", Value: i32(20)}})},
	}
	for _, tc := range cases {
		reset(old)
		if err := merge(tc.spec); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := aoDocs(t, dst); got != tc.want {
			t.Fatalf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	reset(old)
	aoWantCode(t, "whenMatched fail", merge(bson.D{{Key: "whenMatched", Value: "fail"}}), codeDuplicateKey)
	reset(bson.D{{Key: "_id", Value: 2}})
	aoWantCode(t, "whenNotMatched fail", merge(bson.D{{Key: "whenNotMatched", Value: "fail"}}), codeMergeNoMatch)
	aoWantCode(t, "keepExisting with discard", merge(bson.D{{Key: "whenMatched", Value: "keepExisting"}, {Key: "whenNotMatched", Value: "discard"}}), 51181)

	// The change events of a default $merge: an update for the match, an insert otherwise; a
	// replace with whenMatched replace.
	reset(old)
	cs, err := dst.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if err := merge(nil); err != nil {
		t.Fatal(err)
	}
	// Replacing a document by an identical one is a no-op (no event), so change them.
	if _, err := aoAggregate(t, src, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "c", Value: 1}}}},
		{{Key: "$merge", Value: bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: "replace"}}}}}); err != nil {
		t.Fatal(err)
	}
	ev := aoEvents(t, cs, 4)
	want := []string{`update dst {"$numberInt":"1"}`, `insert dst {"$numberInt":"2"}`, `replace dst {"$numberInt":"1"}`, `replace dst {"$numberInt":"2"}`}
	if strings.Join(ev, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", ev, want)
	}
}

// $merge on fields other than _id needs a unique index on exactly those fields, and every
// document must carry them; into another database too.
func TestAggregateMergeOn(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	src := cl.Database("mo").Collection("src")
	dst := cl.Database("mo2").Collection("dst")
	aoSeed(t, src, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}, {Key: "r", Value: 1}, {Key: "v", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "b"}, {Key: "r", Value: 1}, {Key: "v", Value: 2}})
	into := bson.D{{Key: "db", Value: "mo2"}, {Key: "coll", Value: "dst"}}
	noID := bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}
	run := func(on any) error {
		_, err := aoAggregate(t, src, mongo.Pipeline{noID, {{Key: "$merge", Value: bson.D{{Key: "into", Value: into}, {Key: "on", Value: on}, {Key: "whenMatched", Value: "replace"}}}}})
		return err
	}
	aoWantCode(t, "on without a target", run("k"), codeMergeNoUniqueIndex)
	aoSeed(t, dst, bson.D{{Key: "_id", Value: 100}, {Key: "k", Value: "a"}, {Key: "r", Value: 1}, {Key: "v", Value: 0}})
	aoWantCode(t, "on without a unique index", run(bson.A{"k", "r"}), codeMergeNoUniqueIndex)
	if _, err := dst.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "r", Value: 1}, {Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	aoWantCode(t, "on with a larger unique index", run("k"), codeMergeNoUniqueIndex)
	if err := run(bson.A{"k", "r"}); err != nil {
		t.Fatalf("$merge on [k, r]: %v", err)
	}
	var docs []bson.M
	cur, err := dst.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "k", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0]["_id"] != int32(100) || docs[0]["v"] != int32(1) || docs[1]["v"] != int32(2) {
		t.Fatalf("after $merge on [k, r]: %v, want _id 100 replaced (v 1) and a new document for b", docs)
	}
	_, err = aoAggregate(t, src, mongo.Pipeline{{{Key: "$unset", Value: "r"}}, {{Key: "$merge", Value: bson.D{{Key: "into", Value: into}, {Key: "on", Value: bson.A{"k", "r"}}}}}})
	aoWantCode(t, "documents without an on field", err, codeMergeOnFieldInvalid)
	// A replacement that would change the matched document's _id fails.
	_, err = aoAggregate(t, src, mongo.Pipeline{{{Key: "$merge", Value: bson.D{{Key: "into", Value: into}, {Key: "on", Value: bson.A{"k", "r"}}, {Key: "whenMatched", Value: "replace"}}}}})
	aoWantCode(t, "changing the _id of the match", err, codeImmutableField)
}
