package mongosim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// bigString returns n bytes of c.
func bigString(c byte, n int) string { return strings.Repeat(string(c), n) }

// largeFieldSize is the size of the field largeEventSetup stores: replacing it yields an update
// event of three times that (updateDescription, fullDocument and fullDocumentBeforeChange each
// hold it), too large for two 16 MiB fragments. The runtime's test (test/integration) splits a
// 40 MB event; 9 MB keeps this package's race-enabled run short.
const largeFieldSize = 9 << 20

// largeEventSetup creates db.c with pre-images, inserts {_id: 1, a: largeFieldSize of "x"},
// and returns the collection.
func largeEventSetup(t *testing.T, cl *mongo.Client, db string) *mongo.Collection {
	t.Helper()
	ctx := context.Background()
	if err := cl.Database(db).RunCommand(ctx, bson.D{{Key: "create", Value: "c"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	coll := cl.Database(db).Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bigString('x', largeFieldSize)}}); err != nil {
		t.Fatal(err)
	}
	return coll
}

func splitStreamOpts() *options.ChangeStreamOptionsBuilder {
	return options.ChangeStream().SetFullDocument(options.UpdateLookup).SetFullDocumentBeforeChange(options.Required)
}

var splitStage = mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}

// nextEvent returns the next change event, failing the test on an error.
func nextEvent(t *testing.T, cs *mongo.ChangeStream) bson.Raw {
	t.Helper()
	if !cs.Next(testCtx(t)) {
		t.Fatalf("Next: %v", cs.Err())
	}
	return append(bson.Raw(nil), cs.Current...)
}

func TestSplitLargeEventFragments(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := largeEventSetup(t, cl, "split")
	cs, err := coll.Watch(ctx, splitStage, splitStreamOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}, {Key: "small", Value: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: bigString('y', largeFieldSize)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "small", Value: true}}); err != nil {
		t.Fatal(err)
	}

	before := nextEvent(t, cs)
	if _, err := before.LookupErr("splitEvent"); err == nil || before.Lookup("documentKey", "_id").AsInt64() != 0 {
		t.Fatalf("first event %s: want the small insert, whole", before)
	}
	var frags []bson.Raw
	var tokens []string
	for i := 1; ; i++ {
		f := nextEvent(t, cs)
		se, err := f.LookupErr("splitEvent")
		if err != nil {
			t.Fatalf("fragment %d has no splitEvent: %.200s", i, f)
		}
		if got := se.Document().Lookup("fragment").Int32(); got != int32(i) {
			t.Fatalf("fragment number %d, want %d", got, i)
		}
		if len(f) > maxBSONSize {
			t.Fatalf("fragment %d is %d bytes, over 16 MiB", i, len(f))
		}
		frags = append(frags, f)
		tokens = append(tokens, f.Lookup("_id", "_data").StringValue())
		if i > 1 && tokens[i-1] <= tokens[i-2] {
			t.Fatalf("fragment tokens not increasing: %s then %s", tokens[i-2], tokens[i-1])
		}
		if of := se.Document().Lookup("of").Int32(); of == int32(i) {
			break
		}
	}
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3 for a 27 MB event of three 9 MB fields", len(frags))
	}
	// Reassembled, the fragments are the whole event: each top-level field once.
	fields := map[string]int{}
	total := 0
	for _, f := range frags {
		elems, _ := f.Elements()
		for _, e := range elems {
			if e.Key() != "_id" && e.Key() != "splitEvent" {
				fields[e.Key()]++
				total += len(e)
			}
		}
	}
	for _, k := range []string{"operationType", "clusterTime", "ns", "documentKey", "updateDescription", "fullDocument", "fullDocumentBeforeChange"} {
		if fields[k] != 1 {
			t.Fatalf("field %s appears %d times across the fragments, want once (%v)", k, fields[k], fields)
		}
	}
	if total < 3*largeFieldSize {
		t.Fatalf("fragments carry %d bytes, want the whole event (> %d)", total, 3*largeFieldSize)
	}
	after := nextEvent(t, cs)
	if after.Lookup("documentKey", "_id").AsInt64() != 2 {
		t.Fatalf("event after the split one: %s", after)
	}
	if after.Lookup("_id", "_data").StringValue() <= tokens[len(tokens)-1] {
		t.Fatal("the next event's token must sort after every fragment's")
	}

	// Resuming from the first fragment's token yields the later fragments, then the next event.
	rs, err := coll.Watch(ctx, splitStage, splitStreamOpts().SetResumeAfter(frags[0].Lookup("_id").Document()))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	for i := 2; i <= len(frags); i++ {
		f := nextEvent(t, rs)
		if got := f.Lookup("_id", "_data").StringValue(); got != tokens[i-1] {
			t.Fatalf("resumed fragment %d token %s, want %s", i, got, tokens[i-1])
		}
	}
	if next := nextEvent(t, rs); next.Lookup("documentKey", "_id").AsInt64() != 2 {
		t.Fatalf("after the last fragment: %s", next)
	}
	// From the last fragment's token: the next event.
	ls, err := coll.Watch(ctx, splitStage, splitStreamOpts().SetResumeAfter(frags[len(frags)-1].Lookup("_id").Document()))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close(ctx)
	if next := nextEvent(t, ls); next.Lookup("documentKey", "_id").AsInt64() != 2 {
		t.Fatalf("resumed after the last fragment: %s", next)
	}
	// A fragment token without the stage is refused.
	if _, err := coll.Watch(ctx, mongo.Pipeline{}, splitStreamOpts().SetResumeAfter(frags[0].Lookup("_id").Document())); err == nil {
		t.Fatal("resuming from a fragment token without $changeStreamSplitLargeEvent must fail")
	}
}

func TestSplitLargeEventWithoutStageFailsTooLarge(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := largeEventSetup(t, cl, "nosplit")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, splitStreamOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: bigString('y', largeFieldSize)}}}}); err != nil {
		t.Fatal(err)
	}
	if cs.Next(testCtx(t)) {
		t.Fatal("a 40 MB event without $changeStreamSplitLargeEvent must fail the stream")
	}
	var se mongo.ServerError
	if !errors.As(cs.Err(), &se) || !se.HasErrorCode(codeBSONObjectTooLarge) {
		t.Fatalf("error %v, want BSONObjectTooLarge (10334)", cs.Err())
	}
}

func TestSplitLargeEventStageRules(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := context.Background()
	coll := cl.Database("splitrules").Collection("c")
	cases := []struct {
		name string
		p    mongo.Pipeline
		code int32
	}{
		{"not last", mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}, {{Key: "$match", Value: bson.D{}}}}, 7182802},
		{"non-empty spec", mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{{Key: "x", Value: 1}}}}}, 7182800},
	}
	for _, tc := range cases {
		_, err := coll.Watch(ctx, tc.p)
		if ce := commandError(t, err); ce.Code != tc.code {
			t.Fatalf("%s: %v, want code %d", tc.name, err, tc.code)
		}
	}
	// Valid with other stages before it; small events are not split.
	cs, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, cs)
	if _, err := ev.LookupErr("splitEvent"); err == nil {
		t.Fatalf("a small event must not be split: %s", ev)
	}
}
