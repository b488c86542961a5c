package engine

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/messages"
)

// nextEvent reads the next event from c with TryNext, polling up to testWait.
func nextEvent(t *testing.T, c stream.Cursor) bson.Raw {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		if c.TryNext(ctx) {
			return append(bson.Raw(nil), c.Current()...)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("cursor: %v", err)
		}
	}
	t.Fatalf("no event within %v", testWait)
	return nil
}

// TestDriverWatcherPositions: Current captures a position (token and operation time) that
// resumes right after everything written before it, and Open honours resumeAfter,
// startAtOperationTime and the unspecified (now) kind, for every scope.
func TestDriverWatcherPositions(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		spec *Spec
	}{
		{"collection", &Spec{Name: "w-coll", Collection: "orders"}},
		{"database", &Spec{Name: "w-db", Database: e.db}},
		{"cluster", &Spec{Name: "w-cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDriverWatcher(tc.spec, e.client, e.db)
			ctx := testCtx(t)
			base := 100 * (1 + len(tc.name))
			insertOrders(t, e, base-1, base) // before the position: never seen
			tok, ts, err := w.Current(ctx)
			if err != nil {
				t.Fatalf("Current: %v", err)
			}
			if len(tok) == 0 || ts.IsZero() {
				t.Fatalf("Current = %v, %v", tok, ts)
			}
			insertOrders(t, e, base, base+1)
			for _, pos := range []stream.Position{
				{Kind: messages.StartKind_START_KIND_RESUME_AFTER, Token: tok},
				{Kind: messages.StartKind_START_KIND_START_AT_OPERATION_TIME, OperationTime: bson.Timestamp{T: ts.T, I: ts.I + 1}},
			} {
				c, err := w.Open(ctx, pos)
				if err != nil {
					t.Fatalf("Open %v: %v", pos.Kind, err)
				}
				ev := nextEvent(t, c)
				if id := ev.Lookup("documentKey", "_id").AsInt64(); id != int64(base) {
					t.Fatalf("%v: first event is document %d, want %d", pos.Kind, id, base)
				}
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestDriverWatcherOptions: the aggregate carries the comment "watchtree:<stream>", the
// fullDocument modes and the user's pipeline; getMores wait MaxAwaitTime.
func TestDriverWatcherOptions(t *testing.T) {
	e := newEnv(t)
	e.needSim(t)
	cs := &Spec{
		Name: "opts", Collection: "orders",
		FullDocument: "updateLookup",
		PreImage:     "whenAvailable",
		Pipeline:     []bson.Raw{stage(t, bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}})},
	}
	w := newDriverWatcher(cs, e.client, e.db)
	ctx := testCtx(t)
	e.srv.ResetCommands()
	c, err := w.Open(ctx, stream.Position{MaxAwaitTime: 20 * time.Millisecond, Comment: "watchtree:opts"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for range 2 { // the first TryNext may only look at the aggregate's empty first batch
		if c.TryNext(ctx) {
			t.Fatal("event on an idle collection")
		}
	}
	aggs := e.srv.CommandsNamed("aggregate")
	if len(aggs) != 1 {
		t.Fatalf("%d aggregates", len(aggs))
	}
	body, _ := bson.Marshal(aggs[0].Body)
	raw := bson.Raw(body)
	if got := raw.Lookup("comment").StringValue(); got != "watchtree:opts" {
		t.Fatalf("comment %q", got)
	}
	if got, ok := raw.Lookup("cursor", "batchSize").AsInt64OK(); !ok || got != int64(watchBatchSize) {
		t.Fatalf("cursor.batchSize %v, want %d", raw.Lookup("cursor", "batchSize"), watchBatchSize)
	}
	stages := raw.Lookup("pipeline").Array()
	vals, _ := stages.Values()
	if len(vals) != 3 {
		t.Fatalf("pipeline %v: want $changeStream, the user's stage, $changeStreamSplitLargeEvent", stages)
	}
	// SplitAuto with full documents on a 7.0+ server: the split stage comes last.
	if _, err := vals[2].Document().LookupErr("$changeStreamSplitLargeEvent"); err != nil {
		t.Fatalf("last stage %v, want $changeStreamSplitLargeEvent", vals[2])
	}
	if !c.(*opCursor).SplitsEvents() {
		t.Error("the cursor's pipeline splits events but SplitsEvents is false: the reader would not join fragments")
	}
	csOpts := vals[0].Document().Lookup("$changeStream").Document()
	if csOpts.Lookup("fullDocument").StringValue() != "updateLookup" ||
		csOpts.Lookup("fullDocumentBeforeChange").StringValue() != "whenAvailable" {
		t.Fatalf("$changeStream %v", csOpts)
	}
	if _, err := vals[1].Document().LookupErr("$match"); err != nil {
		t.Fatalf("user stage %v", vals[1])
	}
	gms := e.srv.CommandsNamed("getMore")
	if len(gms) == 0 {
		t.Fatal("no getMore")
	}
	gb, _ := bson.Marshal(gms[0].Body)
	if ms := bson.Raw(gb).Lookup("maxTimeMS").AsInt64(); ms != 20 {
		t.Fatalf("getMore maxTimeMS %d, want 20", ms)
	}
}

// TestDriverWatcherSplitsEvents: the cursor reports whether its pipeline ends with
// $changeStreamSplitLargeEvent (the stream's or the user's), so that the reader looks for
// splitEvent only then.
func TestDriverWatcherSplitsEvents(t *testing.T) {
	e := newEnv(t)
	e.needSim(t)
	for _, tc := range []struct {
		name  string
		split Split
		user  []bson.Raw
		want  bool
	}{
		{"off", SplitOff, nil, false},
		{"on", SplitOn, nil, true},
		{"auto without full documents", SplitAuto, nil, false},
		{"the user's own stage", SplitAuto, []bson.Raw{stage(t, bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := &Spec{Name: "splits", Collection: "orders", Split: tc.split, Pipeline: tc.user}
			ctx := testCtx(t)
			c, err := newDriverWatcher(cs, e.client, e.db).Open(ctx, stream.Position{MaxAwaitTime: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if got := c.(*opCursor).SplitsEvents(); got != tc.want {
				t.Errorf("SplitsEvents = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDriverWatcherCaptureAsksForAnEmptyFirstBatch: Current's aggregate carries batchSize 0, so
// the server's reply holds no event and its post-batch resume token is the position. Without
// it, a write between the server's start point and its reply lands in the first batch, the
// driver has no token to hand out before that event is read, and the capture fails with "the
// server sent no post-batch resume token" (seen in the crash drill under a steady writer).
func TestDriverWatcherCaptureAsksForAnEmptyFirstBatch(t *testing.T) {
	e := newEnv(t)
	e.needSim(t)
	w := newDriverWatcher(&Spec{Name: "capture", Collection: "orders"}, e.client, e.db)
	ctx := testCtx(t)
	e.srv.ResetCommands()
	if _, _, err := w.Current(ctx); err != nil {
		t.Fatalf("Current: %v", err)
	}
	aggs := e.srv.CommandsNamed("aggregate")
	if len(aggs) != 1 {
		t.Fatalf("%d aggregates, want 1", len(aggs))
	}
	body, _ := bson.Marshal(aggs[0].Body)
	if got, ok := bson.Raw(body).Lookup("cursor", "batchSize").AsInt64OK(); !ok || got != 0 {
		t.Fatalf("capture's cursor.batchSize %v, want 0", bson.Raw(body).Lookup("cursor"))
	}
}
