package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// bigDoc is the document type of the large-event test: a and the _id.
type bigDoc struct {
	ID int64  `bson:"_id"`
	A  string `bson:"a,omitempty"`
}

// seenEvent is what the large-event handler recorded of one delivery.
type seenEvent struct {
	op             watchtree.OperationType
	id             int64
	token          string
	post, pre, upd int // sizes of fullDocument.a, fullDocumentBeforeChange.a, updatedFields.a
	preChar        byte
}

// TestLargeEventSplitEndToEnd: an update of a 13 MB document with fullDocument and a pre-image
// makes a change event of about 40 MB, three times the 16 MiB limit. The stream (SplitAuto, on
// because it asks for full documents and pre-images) has the server split it, joins the
// fragments, and hands the handler one whole event, in order between the events around it. On
// mongosim the cursor is also made to die between two fragments: the stream restarts from its
// checkpoint and reads the whole event again. No checkpoint ever points inside the split event.
func TestLargeEventSplitEndToEnd(t *testing.T) {
	const field = 13 << 20
	e := newEnv(t)
	e.createColl("big", true)
	coll := e.db.Collection("big")
	// At rounds down to the second: start at the next whole second, after everything the server
	// did when it started, so the start point is inside its history.
	start := time.Now().Truncate(time.Second).Add(time.Second)
	waitFor(t, "the next whole second", func() bool { return !time.Now().Before(start) })
	e.must(func(ctx context.Context) error {
		_, err := coll.InsertOne(ctx, bigDoc{ID: 1, A: strings.Repeat("x", field)})
		return err
	})
	e.must(func(ctx context.Context) error { _, err := coll.InsertOne(ctx, bigDoc{ID: 2}); return err })
	e.must(func(ctx context.Context) error {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: strings.Repeat("y", field)}}}})
		return err
	})
	e.must(func(ctx context.Context) error { _, err := coll.InsertOne(ctx, bigDoc{ID: 3}); return err })

	r := e.startRuntime(nil)
	if !e.real() {
		// The first getMore returns the first fragment, the second (skipped) the next one, the
		// third fails without a resumable label: the cursor dies between two fragments.
		e.failPoint(bson.D{{Key: "skip", Value: 1}, {Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "appName", Value: r.app},
			{Key: "errorCode", Value: 50}})
	}
	var mu sync.Mutex
	var seen []seenEvent
	record := func(_ context.Context, ev *watchtree.Event[bigDoc]) error {
		s := seenEvent{op: ev.OperationType(), id: ev.DocumentID().AsInt64(), token: tokenData(ev.ResumeToken())}
		if ev.FullDocument != nil {
			s.post = len(ev.FullDocument.A)
		}
		if ev.FullDocumentBeforeChange != nil {
			s.pre = len(ev.FullDocumentBeforeChange.A)
			if s.pre > 0 {
				s.preChar = ev.FullDocumentBeforeChange.A[0]
			}
		}
		if ev.UpdateDescription != nil {
			if v, err := ev.UpdateDescription.UpdatedFields.LookupErr("a"); err == nil {
				s.upd = len(v.StringValue())
			}
		}
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		return nil
	}
	h := r.spawn(t, watchtree.Stream[bigDoc]{Name: "big", Collection: "big", Lanes: 1,
		FullDocument: watchtree.FullDocumentUpdateLookup, FullDocumentBeforeChange: watchtree.PreImageRequired,
		StartPosition: watchtree.At(start), Restart: fastRestart, OnChange: record})
	r.waitRunning(t, h)

	distinct := func() []seenEvent {
		mu.Lock()
		defer mu.Unlock()
		var out []seenEvent
		have := map[string]bool{}
		for _, s := range seen {
			if !have[s.token] {
				have[s.token] = true
				out = append(out, s)
			}
		}
		return out
	}
	waitFor(t, "the four events handled", func() bool { return len(distinct()) >= 4 },
		func() string { return fmt.Sprintf("%d distinct events: %+v", len(distinct()), distinct()) })
	got := distinct()
	want := []struct {
		op watchtree.OperationType
		id int64
	}{{watchtree.OpInsert, 1}, {watchtree.OpInsert, 2}, {watchtree.OpUpdate, 1}, {watchtree.OpInsert, 3}}
	for i, w := range want {
		if got[i].op != w.op || got[i].id != w.id {
			t.Fatalf("event %d is %s of %d, want %s of %d (order around the split event): %+v", i, got[i].op, got[i].id, w.op, w.id, got)
		}
	}
	upd := got[2]
	if upd.post != field || upd.pre != field || upd.upd != field || upd.preChar != 'x' {
		t.Fatalf("the update reached the handler with fullDocument.a %d, pre-image.a %d (%q), updatedFields.a %d bytes; want %d each, the pre-image the old value",
			upd.post, upd.pre, upd.preChar, upd.upd, field)
	}
	if !e.real() {
		r.obs.wait(t, "a restart after the cursor died between fragments", ofType[observe.Restarted])
	}
	// Every position the stream saved is a whole event's: resuming there never starts inside the
	// split event. The update's own token (its last fragment's) is the only one at its time.
	for _, ev := range r.obs.find(ofType[observe.Checkpointed]) {
		tok := tokenData(ev.(observe.Checkpointed).Token)
		if tok > got[1].token && tok < upd.token {
			t.Fatalf("checkpoint %s lies inside the split event (after %s, before its last fragment %s)", tok, got[1].token, upd.token)
		}
	}
	// Redeliveries after the restart are whole events too.
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if s.op == watchtree.OpUpdate && (s.post != field || s.pre != field || s.token != upd.token) {
			t.Fatalf("a delivery of the update was partial or had another position: %+v", s)
		}
	}
}
