package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// call is one handler call as a test saw it.
type call struct {
	handler string // "insert", "update", "change", ...
	op      watchtree.OperationType
	doc     int64
	full    *Order // FullDocument
	pre     *Order // FullDocumentBeforeChange
	raw     bson.Raw
	id      string
}

type calls struct {
	mu   sync.Mutex
	list []call
}

// rec returns a handler that records its calls under name. The event is copied out: handlers
// must not keep *Event after returning.
func (c *calls) rec(name string) watchtree.Handler[Order] {
	return func(_ context.Context, ev *watchtree.Event[Order]) error {
		id, _ := ev.DocumentID().AsInt64OK()
		cl := call{handler: name, op: ev.OperationType(), doc: id, id: ev.ID(), raw: append(bson.Raw(nil), ev.Raw()...)}
		if ev.FullDocument != nil {
			d := *ev.FullDocument
			cl.full = &d
		}
		if ev.FullDocumentBeforeChange != nil {
			d := *ev.FullDocumentBeforeChange
			cl.pre = &d
		}
		c.mu.Lock()
		c.list = append(c.list, cl)
		c.mu.Unlock()
		return nil
	}
}

func (c *calls) get() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.list...)
}

func (c *calls) waitN(t *testing.T, n int) []call {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d handler calls", n), func() bool { return len(c.get()) >= n },
		func() string { return fmt.Sprintf("got %d: %+v", len(c.get()), c.get()) })
	return c.get()
}

// TestTypedDispatchAndFallback: insert and update reach their typed handlers, replace and delete
// (no typed handler) reach OnChange; events are decoded once into T with every Event accessor
// filled, in stream order with one lane.
func TestTypedDispatchAndFallback(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	var got calls
	type meta struct {
		stream  string
		ns      watchtree.Namespace
		attempt int
		changed map[string]bool
		hasCT   bool
		hasWall bool
		key     bson.Raw
	}
	var metaMu sync.Mutex
	metas := map[string]meta{}
	keep := func(name string) watchtree.Handler[Order] {
		inner := got.rec(name)
		return func(ctx context.Context, ev *watchtree.Event[Order]) error {
			m := meta{stream: ev.Stream(), ns: ev.Namespace(), attempt: ev.Attempt(), hasCT: ev.ClusterTime().T != 0,
				hasWall: !ev.WallTime().IsZero(), key: append(bson.Raw(nil), ev.DocumentKey()...),
				changed: map[string]bool{"v": ev.Changed("v"), "amount": ev.Changed("amount")}}
			metaMu.Lock()
			metas[ev.ID()] = m
			metaMu.Unlock()
			return inner(ctx, ev)
		}
	}
	h := r.spawn(t, watchtree.Stream[Order]{
		Name: "typed", Collection: "orders",
		OnInsert: keep("insert"), OnUpdate: keep("update"), OnChange: keep("change"),
	})
	r.waitRunning(t, h)

	orders := e.db.Collection("orders")
	e.insertOrders("orders", 1, 3)
	e.must(func(ctx context.Context) error {
		if _, err := orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
			return err
		}
		if _, err := orders.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 2}}, Order{ID: 2, V: 5, Amount: 2}); err != nil {
			return err
		}
		_, err := orders.DeleteOne(ctx, bson.D{{Key: "_id", Value: 3}})
		return err
	})

	list := got.waitN(t, 6)
	want := []struct {
		handler string
		op      watchtree.OperationType
		doc     int64
	}{
		{"insert", watchtree.OpInsert, 1}, {"insert", watchtree.OpInsert, 2}, {"insert", watchtree.OpInsert, 3},
		{"update", watchtree.OpUpdate, 1}, {"change", watchtree.OpReplace, 2}, {"change", watchtree.OpDelete, 3},
	}
	if len(list) != len(want) {
		t.Fatalf("got %d calls, want %d: %+v", len(list), len(want), list)
	}
	ids := map[string]bool{}
	for i, w := range want {
		c := list[i]
		if c.handler != w.handler || c.op != w.op || c.doc != w.doc {
			t.Errorf("call %d = %s(%s, doc %d), want %s(%s, doc %d)", i, c.handler, c.op, c.doc, w.handler, w.op, w.doc)
		}
		if c.id == "" || ids[c.id] {
			t.Errorf("call %d: event ID %q empty or repeated", i, c.id)
		}
		ids[c.id] = true
		if c.id != tokenData(c.raw.Lookup("_id").Document()) {
			t.Errorf("call %d: ID() %q is not the resume token's _data (%s)", i, c.id, c.raw.Lookup("_id"))
		}
		m := metas[c.id]
		if m.stream != "typed" || m.ns != (watchtree.Namespace{DB: e.dbName, Coll: "orders"}) || m.attempt != 1 || !m.hasCT || !m.hasWall && !e.real() {
			t.Errorf("call %d: stream %q ns %v attempt %d clusterTime %v wallTime %v", i, m.stream, m.ns, m.attempt, m.hasCT, m.hasWall)
		}
		if v, ok := bson.Raw(m.key).Lookup("_id").AsInt64OK(); !ok || v != w.doc {
			t.Errorf("call %d: DocumentKey %s, want {_id: %d}", i, m.key, w.doc)
		}
	}
	// Decoded documents: inserts and the replace carry the document, the update (default
	// fullDocument mode) and the delete do not; the update description says what changed.
	for i := 0; i < 3; i++ {
		if list[i].full == nil || list[i].full.ID != int64(i+1) || list[i].full.Amount != float64(i+1) {
			t.Errorf("insert %d: FullDocument %+v", i+1, list[i].full)
		}
	}
	if list[3].full != nil {
		t.Errorf("update: FullDocument %+v, want nil in the default mode", list[3].full)
	}
	if m := metas[list[3].id]; !m.changed["v"] || m.changed["amount"] {
		t.Errorf("update: Changed(v)=%v Changed(amount)=%v, want true, false", m.changed["v"], m.changed["amount"])
	}
	if list[4].full == nil || list[4].full.V != 5 {
		t.Errorf("replace: FullDocument %+v, want V 5", list[4].full)
	}
	if list[5].full != nil {
		t.Errorf("delete: FullDocument %+v, want nil", list[5].full)
	}
}

// TestFilterAndPipeline: server-side pipeline stages decide which events reach the process (and
// may add fields), the in-process Filter settles the rest without a handler call, and the
// checkpoint moves past filtered and unhandled events.
func TestFilterAndPipeline(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	var got calls
	h := r.spawn(t, watchtree.Stream[Order]{
		Name: "filtered", Collection: "orders",
		Pipeline: []bson.M{
			{"$match": bson.M{"operationType": bson.M{"$in": bson.A{"insert", "update"}}, "fullDocument.kind": bson.M{"$ne": "internal"}}},
			{"$addFields": bson.M{"tag": "from-pipeline"}},
		},
		Filter:     func(ev *watchtree.Event[Order]) bool { return ev.FullDocument == nil || ev.FullDocument.Amount < 100 },
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1},
		OnInsert:   got.rec("insert"), // updates pass the pipeline but have no handler: unhandled
	})
	r.waitRunning(t, h)

	docs := []Order{
		{ID: 1, Amount: 10},                   // handled
		{ID: 2, Amount: 10, Kind: "internal"}, // dropped by the pipeline
		{ID: 3, Amount: 500},                  // rejected by Filter
		{ID: 4, Amount: 20},                   // handled
	}
	orders := e.db.Collection("orders")
	for _, d := range docs {
		e.must(func(ctx context.Context) error { _, err := orders.InsertOne(ctx, d); return err })
	}
	e.must(func(ctx context.Context) error { // passes the pipeline, no OnUpdate: settles as unhandled
		_, err := orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
		return err
	})
	e.must(func(ctx context.Context) error { // filtered again: the last event of the stream
		_, err := orders.InsertOne(ctx, Order{ID: 5, Amount: 1000})
		return err
	})

	list := got.waitN(t, 2)
	if len(list) != 2 || list[0].doc != 1 || list[1].doc != 4 {
		t.Fatalf("handled %+v, want orders 1 and 4 only", list)
	}
	for _, c := range list {
		if tag, _ := c.raw.Lookup("tag").StringValueOK(); tag != "from-pipeline" {
			t.Errorf("order %d: raw event lacks the pipeline's tag field: %s", c.doc, c.raw)
		}
	}
	// The checkpoint reaches the last (filtered) event: filtered and unhandled events settle.
	// Its token is the event of order 5, or a later post-batch token.
	var lastID string
	waitFor(t, "the checkpoint to pass every event", func() bool {
		cp, ok := e.checkpoint("filtered")
		if !ok {
			return false
		}
		lastID = tokenData(cp.Token)
		return lastID > list[1].id && cp.Source != "initial" && r.obs.find(ofType[observe.Checkpointed]) != nil &&
			len(got.get()) == 2 && checkpointPastAll(e, lastID)
	}, func() string { return "checkpoint " + lastID })
	if n := len(got.get()); n != 2 {
		t.Errorf("handled %d events after the checkpoint moved, want 2", n)
	}
}

// checkpointPastAll reports whether token data pos is at or after the newest event of the
// test's database, watchtree's own collections aside: a database change stream resumed after
// pos sees nothing.
func checkpointPastAll(e *env, pos string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	own := bson.A{"_wt_checkpoints", "_wt_dead_letters", "_wt_gaps"}
	cs, err := e.db.Watch(ctx, []bson.M{{"$match": bson.M{"ns.coll": bson.M{"$nin": own}}}}, options.ChangeStream().
		SetResumeAfter(bson.D{{Key: "_data", Value: pos}}).SetMaxAwaitTime(10*time.Millisecond))
	if err != nil {
		return false
	}
	defer cs.Close(context.Background())
	return !cs.TryNext(ctx) && cs.Err() == nil
}

// TestFullDocumentModes: what Event.FullDocument holds on updates in every fullDocument mode.
func TestFullDocumentModes(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	cases := []struct {
		name   string
		mode   watchtree.FullDocumentMode
		images bool
		// want returns the FullDocument version expected on the update that set v (-1: nil;
		// -2: any non-nil version >= v, for updateLookup, which reads the current document).
		want func(v int) int
	}{
		{"default", watchtree.FullDocumentDefault, false, func(int) int { return -1 }},
		{"updateLookup", watchtree.FullDocumentUpdateLookup, false, func(int) int { return -2 }},
		{"whenAvailable-images", watchtree.FullDocumentWhenAvailable, true, func(v int) int { return v }},
		{"whenAvailable-noImages", watchtree.FullDocumentWhenAvailable, false, func(int) int { return -1 }},
		{"required", watchtree.FullDocumentRequired, true, func(v int) int { return v }},
	}
	recs := make([]*calls, len(cases))
	for i, c := range cases {
		e.createColl(c.name, c.images)
		recs[i] = &calls{}
		h := r.spawn(t, watchtree.Stream[Order]{Name: "fd-" + c.name, Collection: c.name, FullDocument: c.mode,
			OnUpdate: recs[i].rec("update")})
		r.waitRunning(t, h)
	}
	for _, c := range cases {
		coll := e.db.Collection(c.name)
		e.must(func(ctx context.Context) error {
			if _, err := coll.InsertOne(ctx, Order{ID: 1}); err != nil {
				return err
			}
			for v := 1; v <= 2; v++ {
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			list := recs[i].waitN(t, 2)
			for j, cl := range list[:2] {
				v := j + 1
				switch want := c.want(v); {
				case want == -1 && cl.full != nil:
					t.Errorf("update to v%d: FullDocument %+v, want nil", v, cl.full)
				case want == -2 && (cl.full == nil || cl.full.V < v):
					t.Errorf("update to v%d: FullDocument %+v, want the current document (v >= %d)", v, cl.full, v)
				case want >= 0 && (cl.full == nil || cl.full.V != want):
					t.Errorf("update to v%d: FullDocument %+v, want the post-image v%d", v, cl.full, want)
				}
			}
		})
	}
}

// TestPreImages: FullDocumentBeforeChange holds the pre-image on update, replace and delete when
// the collection records them, and nil (whenAvailable) when it does not.
func TestPreImages(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	e.createColl("withImages", true)
	e.createColl("noImages", false)
	var with, without calls
	h1 := r.spawn(t, watchtree.Stream[Order]{Name: "pre-required", Collection: "withImages",
		FullDocumentBeforeChange: watchtree.PreImageRequired, OnChange: with.rec("change")})
	h2 := r.spawn(t, watchtree.Stream[Order]{Name: "pre-whenAvailable", Collection: "noImages",
		FullDocumentBeforeChange: watchtree.PreImageWhenAvailable, OnChange: without.rec("change")})
	r.waitRunning(t, h1)
	r.waitRunning(t, h2)
	for _, name := range []string{"withImages", "noImages"} {
		coll := e.db.Collection(name)
		e.must(func(ctx context.Context) error {
			if _, err := coll.InsertOne(ctx, Order{ID: 1, V: 0}); err != nil {
				return err
			}
			if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
				return err
			}
			if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, Order{ID: 1, V: 2}); err != nil {
				return err
			}
			_, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
			return err
		})
	}
	list := with.waitN(t, 4)
	wantOps := []watchtree.OperationType{watchtree.OpInsert, watchtree.OpUpdate, watchtree.OpReplace, watchtree.OpDelete}
	for i, op := range wantOps {
		if list[i].op != op {
			t.Fatalf("event %d is %s, want %s", i, list[i].op, op)
		}
	}
	if list[0].pre != nil {
		t.Errorf("insert: pre-image %+v, want nil", list[0].pre)
	}
	for i := 1; i <= 3; i++ { // update, replace, delete see versions 0, 1, 2 before the change
		if list[i].pre == nil || list[i].pre.V != i-1 {
			t.Errorf("%s: pre-image %+v, want v%d", list[i].op, list[i].pre, i-1)
		}
	}
	for _, c := range without.waitN(t, 4) {
		if c.pre != nil {
			t.Errorf("%s without recorded images: pre-image %+v, want nil", c.op, c.pre)
		}
	}
}
