package mongosim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The namespace pushdown (nspushdown.go) must not change what a stream returns: each stream
// below reads the same oplog twice through the driver, once opened with the pushdown and once
// without, and the two transcripts (every event byte for byte, every resume token after every
// TryNext, the error that ends the stream) must be identical.

// pdWorkload writes a mix of namespaces and event kinds into database pd (collections a, b, c,
// x and y; a has pre- and post-images) and pdother, and ends with dropping pd (dropDatabase
// and the database streams' invalidate). It returns the cluster time before the first write
// and one resume token of an event in pdother.
func pdWorkload(t *testing.T, srv *Server, cl *mongo.Client) bson.Timestamp {
	t.Helper()
	ctx := testCtx(t)
	start := srv.eng.clock.last()
	db := cl.Database("pd")
	if err := db.CreateCollection(ctx, "a", options.CreateCollection().
		SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	a, b, c, x := db.Collection("a"), db.Collection("b"), db.Collection("c"), db.Collection("x")
	other := cl.Database("pdother").Collection("a")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		for _, coll := range []*mongo.Collection{a, b, c, x, other} {
			must(coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}}))
		}
	}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 10}}}}
	must(a.UpdateOne(ctx, bson.D{{Key: "_id", Value: 0}}, set))
	must(x.UpdateOne(ctx, bson.D{{Key: "_id", Value: 0}}, set)) // no post-image: "required" fails here
	must(b.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "w", Value: 1}}))
	must(x.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}))
	must(a.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}))
	must(x.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}}))
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	must(sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		for _, coll := range []*mongo.Collection{x, a, x} {
			if _, err := coll.InsertOne(sc, bson.D{{Key: "v", Value: "txn"}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}))
	must(nil, db.Collection("y").Drop(ctx)) // never created: no event
	must(nil, c.Drop(ctx))
	must(nil, cl.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "pd.b"}, {Key: "to", Value: "pd.b2"}}).Err())
	must(db.Collection("b2").InsertOne(ctx, bson.D{{Key: "v", Value: 1}}))
	must(nil, db.Drop(ctx))
	return start
}

// pdTranscript reads a stream to its end: until it is invalidated or fails, or a TryNext finds
// nothing (the oplog holds no more). Each line is one TryNext: the event or "-", and the
// resume token the driver holds after it.
func pdTranscript(t *testing.T, w interface {
	Watch(context.Context, any, ...options.Lister[options.ChangeStreamOptions]) (*mongo.ChangeStream, error)
}, pipeline mongo.Pipeline, opts *options.ChangeStreamOptionsBuilder) []string {
	t.Helper()
	ctx := testCtx(t)
	cs, err := w.Watch(ctx, pipeline, opts)
	if err != nil {
		return []string{"open: " + err.Error()}
	}
	defer cs.Close(context.Background())
	var lines []string
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("stream does not end")
		}
		got := cs.TryNext(ctx)
		ev := "-"
		if got {
			ev = bson.Raw(cs.Current).String()
		}
		lines = append(lines, ev+" token "+bson.Raw(cs.ResumeToken()).String())
		if err := cs.Err(); err != nil {
			return append(lines, "error: "+err.Error())
		}
		if !got || cs.ID() == 0 && cs.RemainingBatchLength() == 0 {
			return lines
		}
	}
}

func pdMatch(filter bson.D) bson.D { return bson.D{{Key: "$match", Value: filter}} }

func pdIn(vals ...any) bson.D { return bson.D{{Key: "$in", Value: append(bson.A{}, vals...)}} }

func TestChangeStreamNamespacePushdownChangesNoResult(t *testing.T) {
	srv, cl := startServer(t, Options{NoopInterval: -1})
	start := pdWorkload(t, srv, cl)
	startAt := func() *options.ChangeStreamOptionsBuilder {
		return options.ChangeStream().SetStartAtOperationTime(&start).SetBatchSize(2).
			SetMaxAwaitTime(10 * time.Millisecond)
	}
	hub := pdMatch(bson.D{{Key: "ns.coll", Value: pdIn("a", "b", "zz")}}) // the engine's hub
	db, client, collA := cl.Database("pd"), cl, cl.Database("pd").Collection("a")
	type watcher = interface {
		Watch(context.Context, any, ...options.Lister[options.ChangeStreamOptions]) (*mongo.ChangeStream, error)
	}
	cases := []struct {
		name     string
		w        watcher
		pipeline mongo.Pipeline
		opts     *options.ChangeStreamOptionsBuilder
		pushed   bool // the pushdown applies: fewer events are built with it
	}{
		{"hub", db, mongo.Pipeline{hub}, startAt(), true},
		{"hub, then a $match of the user", db, mongo.Pipeline{hub, pdMatch(bson.D{{Key: "operationType", Value: "insert"}})}, startAt(), true},
		{"hub, then $project", db, mongo.Pipeline{hub, bson.D{{Key: "$project", Value: bson.D{{Key: "ns", Value: 1}}}}}, startAt(), true},
		{"hub, updateLookup", db, mongo.Pipeline{hub}, startAt().SetFullDocument(options.UpdateLookup), true},
		{"hub, expanded events", db, mongo.Pipeline{hub}, startAt().SetShowExpandedEvents(true), true},
		{"hub, split events", db, mongo.Pipeline{hub, bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}, startAt(), true},
		// x's update has no post-image: the stream fails there, whatever the $match says.
		{"hub, post-image required", db, mongo.Pipeline{hub}, startAt().SetFullDocument(options.Required), true},
		{"hub, pre-image required", db, mongo.Pipeline{hub}, startAt().SetFullDocumentBeforeChange(options.Required), true},
		{"$in with null: dropDatabase and invalidate pass", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn("a", nil)}})}, startAt(), true},
		{"equality", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: "x"}})}, startAt(), true},
		{"$eq", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$eq", Value: "b"}}}})}, startAt(), true},
		{"$eq null", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$eq", Value: nil}}}})}, startAt(), true},
		{"empty $in", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn()}})}, startAt(), true},
		{"ns.coll and another field", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn("a", "x")}, {Key: "operationType", Value: "insert"}})}, startAt(), true},
		{"ns document", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns", Value: bson.D{{Key: "db", Value: "pd"}, {Key: "coll", Value: "a"}}}})}, startAt(), true},
		{"ns documents with $in", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns", Value: pdIn(bson.D{{Key: "db", Value: "pd"}}, bson.D{{Key: "db", Value: "pd"}, {Key: "coll", Value: "x"}})}})}, startAt(), true},
		{"ns.db on a cluster stream", client, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.db", Value: "pdother"}})}, startAt(), true},
		{"ns.db and ns.coll on a cluster stream", client, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.db", Value: "pd"}, {Key: "ns.coll", Value: pdIn("b", "c")}})}, startAt(), true},
		{"collection stream", collA, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn("a", "b")}})}, startAt(), false},
		// Not pushed down: a regular expression, a top-level operator, a second stage.
		{"$in with a regex", db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn("a", bson.Regex{Pattern: "^x"})}})}, startAt(), false},
		{"$or", db, mongo.Pipeline{pdMatch(bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "ns.coll", Value: "a"}}}}})}, startAt(), false},
		{"after $project", db, mongo.Pipeline{bson.D{{Key: "$project", Value: bson.D{{Key: "ns", Value: 1}}}}, hub}, startAt(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built0 := srv.eng.eventsBuilt.Load()
			with := pdTranscript(t, tc.w, tc.pipeline, tc.opts)
			built1 := srv.eng.eventsBuilt.Load()
			srv.eng.noNSPushdown.Store(true)
			without := pdTranscript(t, tc.w, tc.pipeline, tc.opts)
			srv.eng.noNSPushdown.Store(false)
			built2 := srv.eng.eventsBuilt.Load()
			if strings.Join(with, "\n") != strings.Join(without, "\n") {
				t.Fatalf("with the pushdown:\n%s\nwithout:\n%s", strings.Join(with, "\n"), strings.Join(without, "\n"))
			}
			withBuilt, withoutBuilt := built1-built0, built2-built1
			if tc.pushed != (withBuilt < withoutBuilt) || withBuilt > withoutBuilt {
				t.Fatalf("events built: %d with the pushdown, %d without (pushed down: %v)", withBuilt, withoutBuilt, tc.pushed)
			}
			t.Logf("%d TryNexts; events built: %d with the pushdown, %d without", len(with), withBuilt, withoutBuilt)
		})
	}

	// The transcripts must tell the kinds apart, or the comparison above proves little.
	opsOf := func(lines []string) string {
		var ops []string
		for _, l := range lines {
			if i := strings.Index(l, `"operationType": "`); i >= 0 {
				ops = append(ops, strings.SplitN(l[i+len(`"operationType": "`):], `"`, 2)[0])
			} else if strings.HasPrefix(l, "error: ") {
				ops = append(ops, "error")
			}
		}
		return strings.Join(ops, ",")
	}
	if got, want := opsOf(pdTranscript(t, db, mongo.Pipeline{hub}, startAt())), strings.Repeat("insert,", 6)+
		"update,replace,delete,insert,rename,drop"; got != want { // drop: a's, by dropDatabase
		t.Errorf("hub stream: %s, want %s", got, want)
	}
	if got := opsOf(pdTranscript(t, db, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: pdIn(nil)}})}, startAt())); got != "dropDatabase,invalidate" {
		t.Errorf("$in [null] stream: %s, want dropDatabase,invalidate", got)
	}
	if got := opsOf(pdTranscript(t, db, mongo.Pipeline{hub}, startAt().SetFullDocument(options.Required))); !strings.HasSuffix(got, "error") {
		t.Errorf("post-image required: %s, want an error at x's update", got)
	}
}

// TestChangeStreamNamespacePushdownResumeFromAnotherNamespace: a stream resumed from the token
// of an event outside its namespace fails at its next event, even one its $match drops (as
// before the pushdown).
func TestChangeStreamNamespacePushdownResumeFromAnotherNamespace(t *testing.T) {
	srv, cl := startServer(t, Options{NoopInterval: -1})
	ctx := testCtx(t)
	start := pdWorkload(t, srv, cl)
	cluster, err := cl.Watch(ctx, mongo.Pipeline{pdMatch(bson.D{{Key: "ns.db", Value: "pdother"}})},
		options.ChangeStream().SetStartAtOperationTime(&start))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close(context.Background())
	if !cluster.TryNext(ctx) {
		t.Fatalf("no event in pdother: %v", cluster.Err())
	}
	tok := cluster.ResumeToken()
	for _, off := range []bool{false, true} {
		srv.eng.noNSPushdown.Store(off)
		lines := pdTranscript(t, cl.Database("pd"), mongo.Pipeline{pdMatch(bson.D{{Key: "ns.coll", Value: "zz"}})},
			options.ChangeStream().SetResumeAfter(tok).SetMaxAwaitTime(10*time.Millisecond))
		// The open's first batch already meets the next event of pd (dropped by the $match).
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "open: ") || !strings.Contains(last, "resume token was not found") {
			t.Fatalf("pushdown off %v: %s", off, fmt.Sprint(lines))
		}
	}
	srv.eng.noNSPushdown.Store(false)
}
