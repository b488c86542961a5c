package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
)

// target is an idempotent projection: document _id → newest version seen. A write carrying an
// older version than the one held is rejected (counted), so replays and the snapshot/stream
// overlap never move a document back.
type target struct {
	mu       sync.Mutex
	docs     map[int64]int // _id → V
	deleted  map[int64]bool
	seen     map[string]int // event ID → deliveries
	stale    int            // writes rejected as older
	snapDocs map[int64]int  // snapshot deliveries per document
	snapIDs  map[int64]string
}

func newTarget() *target {
	return &target{docs: map[int64]int{}, deleted: map[int64]bool{}, seen: map[string]int{},
		snapDocs: map[int64]int{}, snapIDs: map[int64]string{}}
}

func (tg *target) apply(ev *watchtree.Event[Order]) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.seen[ev.ID()]++
	id, _ := ev.DocumentID().AsInt64OK()
	if ev.OperationType() == watchtree.OpSnapshot {
		tg.snapDocs[id]++
		tg.snapIDs[id] = ev.ID()
	}
	if ev.OperationType() == watchtree.OpDelete {
		delete(tg.docs, id)
		tg.deleted[id] = true
		return
	}
	if ev.FullDocument == nil {
		return // an update whose document is gone (updateLookup after a delete)
	}
	if old, ok := tg.docs[id]; ok && old > ev.FullDocument.V {
		tg.stale++
		return
	}
	tg.docs[id] = ev.FullDocument.V
}

func (tg *target) handler() watchtree.Handler[Order] {
	return func(_ context.Context, ev *watchtree.Event[Order]) error {
		tg.apply(ev)
		return nil
	}
}

// equalTo reports whether the target holds exactly the source collection's (_id, v) pairs, and
// a description of the first differences.
func (tg *target) equalTo(src map[int64]int) (bool, string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var diffs []string
	for id, v := range src {
		if got, ok := tg.docs[id]; !ok || got != v {
			diffs = append(diffs, fmt.Sprintf("%d: source v%d, target v%d (present %v)", id, v, got, ok))
		}
	}
	for id := range tg.docs {
		if _, ok := src[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%d: in the target only", id))
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... %d differences", len(diffs)))
	}
	return len(diffs) == 0, strings.Join(diffs, "; ")
}

func (tg *target) snapshotDeliveries() (docs, repeats int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, n := range tg.snapDocs {
		docs++
		repeats += n - 1
	}
	return docs, repeats
}

// source reads the collection's (_id, v) pairs.
func (e *env) source(coll string) map[int64]int {
	e.t.Helper()
	out := map[int64]int{}
	e.must(func(ctx context.Context) error {
		cur, err := e.db.Collection(coll).Find(ctx, bson.D{})
		if err != nil {
			return err
		}
		var docs []Order
		if err := cur.All(ctx, &docs); err != nil {
			return err
		}
		for _, d := range docs {
			out[d.ID] = d.V
		}
		return nil
	})
	return out
}

// bump sets v to v+1 on the orders from..to (one update each).
func (e *env) bump(coll string, from, to int64) {
	e.t.Helper()
	e.must(func(ctx context.Context) error {
		for i := from; i <= to; i++ {
			if _, err := e.db.Collection(coll).UpdateOne(ctx, bson.D{{Key: "_id", Value: i}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *env) deleteOrders(coll string, ids ...int64) {
	e.t.Helper()
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection(coll).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		return err
	})
}

// TestSnapshotThenStream: existing orders are copied through the handlers before the change
// stream, while writes go on during the copy: updates to copied and not yet copied orders,
// inserts and deletes. Every order's final version reaches the idempotent target, which ends
// equal to the collection; the overlap (a document seen by the snapshot in its newer state, then
// its older events replayed) is rejected by the target, not lost.
func TestSnapshotThenStream(t *testing.T) {
	const existing = 2000
	e := newEnv(t)
	e.insertMany("orders", 1, existing)
	r := e.startRuntime(nil)
	tg := newTarget()
	gate := make(chan struct{})
	var once sync.Once
	firstSnapshotDoc := make(chan struct{})
	spec := watchtree.Stream[Order]{Name: "snap", Collection: "orders", Lanes: 4,
		FullDocument: watchtree.FullDocumentUpdateLookup,
		Snapshot:     watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 4, BatchSize: 100},
		OnSnapshot: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			once.Do(func() { close(firstSnapshotDoc) })
			select { // hold the copy until the concurrent writes are committed
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
			tg.apply(ev)
			return nil
		},
		OnChange: tg.handler(),
	}
	h := r.spawn(t, spec)
	st := waitState(t, h, watchtree.StateSnapshotting)
	if st.Snapshot == nil && st.State != watchtree.StateSnapshotting {
		t.Fatalf("status while snapshotting: %+v", st)
	}
	<-firstSnapshotDoc
	// Writes while the copy runs: every order's version moves, some orders are new, some go.
	e.bump("orders", 1, existing/2)
	e.bump("orders", existing-100, existing)
	e.insertOrders("orders", existing+1, existing+50)
	e.deleteOrders("orders", 7, 1500, existing+3)
	close(gate)

	r.waitRunning(t, h)
	src := e.source("orders")
	waitFor(t, "the target to equal the collection", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	done := r.obs.wait(t, "SnapshotDone", ofType[watchtree.SnapshotDone]).(watchtree.SnapshotDone)
	// The copy reads each range after the gate opened: it may see orders inserted during it and
	// miss the ones deleted before it reached them. The stream delivers those changes anyway.
	if n := done.Snapshot.Documents; n < existing-2 || n > existing+50 {
		t.Errorf("SnapshotDone.Documents = %d, want between %d and %d", n, existing-2, existing+50)
	}
	if n := len(r.obs.find(ofType[watchtree.SnapshotStarted])); n != 1 {
		t.Errorf("%d SnapshotStarted events, want 1", n)
	}
	docs, repeats := tg.snapshotDeliveries()
	tg.mu.Lock()
	stale := tg.stale
	for id, evID := range tg.snapIDs {
		if !strings.HasPrefix(evID, "snapshot:"+done.Snapshot.ID+":"+e.dbName+".orders:") {
			t.Errorf("snapshot event ID of order %d = %q: want the snapshot, namespace and _id", id, evID)
			break
		}
	}
	tg.mu.Unlock()
	t.Logf("snapshot %s: %d documents copied (%d repeats), %d older versions rejected by the target", done.Snapshot.ID, docs, repeats, stale)
	if repeats != 0 {
		t.Errorf("%d snapshot documents delivered twice without a restart", repeats)
	}
	final, err := h.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if final.Snapshot == nil || !final.Snapshot.Done || final.Snapshot.RangesDone != final.Snapshot.RangesTotal || final.Snapshot.RangesTotal != 4 {
		t.Errorf("final snapshot status %+v: want done, 4/4 ranges", final.Snapshot)
	}
	if final.CheckpointSource == "" {
		t.Errorf("no checkpoint after the handoff: %+v", final)
	}

	// A restart does not copy again: the snapshot is done.
	r.stop(t)
	r2 := e.startRuntime(nil)
	h2 := r2.spawn(t, spec)
	r2.waitRunning(t, h2)
	e.bump("orders", 10, 10)
	src = e.source("orders")
	waitFor(t, "the target to follow the new write", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	if n := len(r2.obs.find(ofType[watchtree.SnapshotStarted])) + len(r2.obs.find(ofType[watchtree.SnapshotResumed])); n != 0 {
		t.Errorf("a finished snapshot ran again after a restart (%d snapshot start events)", n)
	}
	if d2, rep2 := tg.snapshotDeliveries(); d2 != docs || rep2 != repeats {
		t.Errorf("snapshot deliveries after the restart: %d documents, %d repeats; want %d, %d", d2, rep2, docs, repeats)
	}
}
