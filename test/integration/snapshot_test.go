package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
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
	existing := int64(2000) // make snapshot-50k: 50,000
	if n, err := strconv.ParseInt(os.Getenv("WATCHTREE_IT_SNAPSHOT_DOCS"), 10, 64); err == nil && n > 100 {
		existing = n
	}
	e := newEnv(t)
	e.insertMany("orders", 1, existing)
	r := e.startRuntime(nil)
	tg := newTarget()
	gate := make(chan struct{})
	var once sync.Once
	firstSnapshotDoc := make(chan struct{})
	spec := watchtree.Stream[Order]{Name: "snap", Collection: "orders", Lanes: 4,
		FullDocument: watchtree.FullDocumentUpdateLookup,
		Snapshot:     watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 4, BatchSize: int(max(100, existing/50))},
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
	e.bump("orders", 1, min(existing/2, 1000))
	e.bump("orders", existing-100, existing)
	e.must(func(ctx context.Context) error { // every 97th order, across all ranges
		_, err := e.db.Collection("orders").UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$mod", Value: bson.A{97, 0}}}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
		return err
	})
	e.insertOrders("orders", existing+1, existing+50)
	e.deleteOrders("orders", 7, existing-500, existing+3)
	close(gate)

	// 2,000 documents take a second; make snapshot-50k's 50,000 take minutes on mongosim (which
	// scans the collection for every chunk).
	limit := waitLimit * time.Duration(1+existing/5000)
	waitWithin(t, limit, "the snapshot done and the stream running", func() bool {
		st, err := h.Status(context.Background())
		return err == nil && st.State == watchtree.StateRunning
	})
	r.waitRunning(t, h)
	src := e.source("orders")
	waitFor(t, "the target to equal the collection", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	done := r.obs.wait(t, "SnapshotDone", ofType[observe.SnapshotDone]).(observe.SnapshotDone)
	// The copy reads each range after the gate opened: it may see orders inserted during it and
	// miss the ones deleted before it reached them. The stream delivers those changes anyway.
	if n := int64(done.Snapshot.Documents); n < existing-2 || n > existing+50 {
		t.Errorf("SnapshotDone.Documents = %d, want between %d and %d", n, existing-2, existing+50)
	}
	if n := len(r.obs.find(ofType[observe.SnapshotStarted])); n != 1 {
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
	if n := len(r2.obs.find(ofType[observe.SnapshotStarted])) + len(r2.obs.find(ofType[observe.SnapshotResumed])); n != 0 {
		t.Errorf("a finished snapshot ran again after a restart (%d snapshot start events)", n)
	}
	if d2, rep2 := tg.snapshotDeliveries(); d2 != docs || rep2 != repeats {
		t.Errorf("snapshot deliveries after the restart: %d documents, %d repeats; want %d, %d", d2, rep2, docs, repeats)
	}
}

// snapshotRecord is the _wt_snapshots document, as the tests read it (its _id laid out as the
// checkpoint's: this host's instance for an AllInstances stream).
type snapshotRecord struct {
	ID     string `bson:"id"`
	State  string `bson:"state"`
	Ranges []struct {
		Min  bson.Raw `bson:"min"`
		Max  bson.Raw `bson:"max"`
		Last bson.Raw `bson:"last"`
		Done bool     `bson:"done"`
		Read int64    `bson:"read"`
	} `bson:"ranges"`
}

func (e *env) snapshotRecord(stream string) (snapshotRecord, bool) {
	e.t.Helper()
	var rec snapshotRecord
	found := true
	e.must(func(ctx context.Context) error {
		err := e.db.Collection("_wt_snapshots").FindOne(ctx, bson.D{{Key: "_id", Value: checkpointID(stream, defaultInstanceName())}}).Decode(&rec)
		if err == mongo.ErrNoDocuments {
			found = false
			return nil
		}
		return err
	})
	return rec, found
}

// idBound reads the int64 _id of a {_id: v} bound; ok is false for an unbounded side.
func idBound(b bson.Raw) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	return b.Lookup("_id").AsInt64OK()
}

// TestSnapshotResumeSIGKILL: a worker process copying 2000 orders is SIGKILLed about halfway;
// a new worker resumes the snapshot. Every order is delivered; a range the killed worker had
// finished is never read again, an unfinished one resumes after its last document done, and
// the documents handled twice stay within one chunk per range. Re-read documents keep their
// event IDs.
func TestSnapshotResumeSIGKILL(t *testing.T) {
	const total = 2000
	e := newEnv(t)
	e.insertMany("orders", 1, total)
	w1 := startWorkerMode(t, e, 1, "snapshot")
	waitFor(t, "the first worker to be halfway", func() bool { return e.collCount("deliveries", nil) >= total/2 })
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = w1.wait(t)
	atKill := e.collCount("deliveries", nil)
	rec, ok := e.snapshotRecord(snapWorkerStream)
	if !ok || len(rec.Ranges) != snapWorkerParts {
		t.Fatalf("snapshot record after the kill: found %v, %+v\nworker stderr:\n%s", ok, rec, w1.stderr.String())
	}
	if rec.State == "done" {
		t.Fatalf("the worker finished the snapshot before the kill (%d deliveries)", atKill)
	}
	cpAtKill, _ := e.checkpoint(snapWorkerStream)

	w2 := startWorkerMode(t, e, 2, "snapshot")
	waitFor(t, "every order delivered", func() bool { return e.distinctDocs() >= total },
		func() string {
			return fmt.Sprintf("%d of %d\nworker 2 stderr:\n%s", e.distinctDocs(), total, w2.stderr.String())
		})
	waitFor(t, "the snapshot done", func() bool { r, _ := e.snapshotRecord(snapWorkerStream); return r.State == "done" })
	w2.terminate(t)
	if cpAtKill.Source != "snapshot" || tokenData(cpAtKill.Token) == "" {
		t.Errorf("checkpoint left by the killed worker: source %q, token %q; want the snapshot's handoff position",
			cpAtKill.Source, tokenData(cpAtKill.Token))
	}

	type delivery struct {
		Event string `bson:"event"`
		Doc   int64  `bson:"doc"`
		Run   int    `bson:"run"`
	}
	all := deliveries[delivery](e)
	byDoc := map[int64][2]int{}
	eventOf := map[int64]string{}
	for _, d := range all {
		c := byDoc[d.Doc]
		c[d.Run-1]++
		byDoc[d.Doc] = c
		if prev, ok := eventOf[d.Doc]; ok && prev != d.Event {
			t.Errorf("order %d delivered with event IDs %q and %q; a snapshot's IDs are stable", d.Doc, prev, d.Event)
		}
		eventOf[d.Doc] = d.Event
	}
	again := 0
	for id := int64(1); id <= total; id++ {
		c := byDoc[id]
		if c[0]+c[1] == 0 {
			t.Errorf("order %d never delivered", id)
		}
		if c[0] > 0 && c[1] > 0 {
			again++
		}
		if c[1] == 0 {
			continue
		}
		// A document run 2 delivered must lie in a range the killed worker had not finished, and
		// after that range's last document done.
		for i, rg := range rec.Ranges {
			lo, hasLo := idBound(rg.Min)
			hi, hasHi := idBound(rg.Max)
			if (hasLo && id < lo) || (hasHi && id >= hi) {
				continue
			}
			if rg.Done {
				t.Errorf("order %d of range %d, finished before the kill, was read again", id, i)
			}
			if last, ok := idBound(rg.Last); ok && id <= last {
				t.Errorf("order %d of range %d delivered again, at or before the range's saved progress %d", id, i, last)
			}
		}
	}
	if again > snapWorkerParts*snapWorkerBatch {
		t.Errorf("%d orders handled again after the crash; want at most one chunk per range (%d)", again, snapWorkerParts*snapWorkerBatch)
	}
	t.Logf("killed at %d deliveries; %d orders handled again (bound %d); ranges at the kill: %s", atKill, again,
		snapWorkerParts*snapWorkerBatch, describeRanges(rec))
}

func describeRanges(rec snapshotRecord) string {
	var parts []string
	for i, rg := range rec.Ranges {
		last, _ := idBound(rg.Last)
		parts = append(parts, fmt.Sprintf("#%d done=%v read=%d last=%d", i, rg.Done, rg.Read, last))
	}
	return strings.Join(parts, ", ")
}

// TestHistoryLostRebuildFromSnapshot: the checkpoint falls out of the oplog while orders are
// updated and inserted. Under RebuildFromSnapshot a gap record is written, the collection is
// copied again through the handlers (a snapshot of reason "rebuild"), the stream resumes from the
// position captured before the copy, and the idempotent target ends equal to the collection.
func TestHistoryLostRebuildFromSnapshot(t *testing.T) {
	e := newEnv(t)
	e.needSim("TruncateOplog")
	tg := newTarget()
	r1 := e.startRuntime(nil)
	spec := watchtree.Stream[Order]{Name: "rb", Collection: "orders", FullDocument: watchtree.FullDocumentUpdateLookup,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1}, OnChange: tg.handler()}
	r1.waitRunning(t, r1.spawn(t, spec))
	e.insertOrders("orders", 1, 30)
	src := e.source("orders")
	waitFor(t, "the first orders in the target", func() bool { ok, _ := tg.equalTo(src); return ok })
	r1.stop(t)
	// History the stream will never see: updates and inserts, then the oplog loses them.
	e.bump("orders", 1, 20)
	e.insertOrders("orders", 31, 60)
	e.srv.TruncateOplog(e.srv.ClusterTime())

	r2 := e.startRuntime(nil)
	spec.OnHistoryLost = watchtree.RebuildFromSnapshot
	spec.Snapshot = watchtree.SnapshotPolicy{Partitions: 2, BatchSize: 7}
	h := r2.spawn(t, spec)
	r2.waitRunning(t, h)
	e.bump("orders", 5, 5) // a change after the rebuild is streamed
	src = e.source("orders")
	waitFor(t, "the target to equal the collection after the rebuild", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	gaps := e.gaps("rb")
	if len(gaps) != 1 || gaps[0].Policy != "rebuildFromSnapshot" {
		t.Fatalf("gap records %+v: want one of policy rebuildFromSnapshot", gaps)
	}
	done := r2.obs.wait(t, "SnapshotDone", ofType[observe.SnapshotDone]).(observe.SnapshotDone)
	if done.Snapshot.Reason != "rebuild" || done.Snapshot.Documents != 60 {
		t.Errorf("rebuild snapshot %+v: want reason rebuild, 60 documents", done.Snapshot)
	}
	r2.obs.wait(t, "GapRecorded", ofType[observe.GapRecorded])
}

// TestSnapshotPoisonDocument: a document that does not decode into the stream's type goes to the
// dead letters with its snapshot event ID, and the snapshot goes on with every other document.
func TestSnapshotPoisonDocument(t *testing.T) {
	e := newEnv(t)
	e.insertMany("orders", 1, 300)
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: int64(150_5)}, {Key: "v", Value: "not a number"}})
		return err
	})
	r := e.startRuntime(nil)
	tg := newTarget()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "poison", Collection: "orders", Lanes: 2,
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 3, BatchSize: 40},
		OnChange: tg.handler()})
	r.waitRunning(t, h)
	docs, _ := tg.snapshotDeliveries()
	if docs != 300 {
		t.Errorf("%d snapshot documents handled, want the 300 decodable ones", docs)
	}
	dls := r.deadLetters(t, "poison")
	if len(dls) != 1 || !strings.HasPrefix(dls[0].ID, "snapshot:") || dls[0].ErrorType != "decode" ||
		dls[0].OperationType != watchtree.OpSnapshot {
		t.Fatalf("dead letters %+v: want the one undecodable document, as a snapshot event", dls)
	}
	done := r.obs.wait(t, "SnapshotDone", ofType[observe.SnapshotDone]).(observe.SnapshotDone)
	if done.Snapshot.Documents != 301 || done.Snapshot.DeadLettered != 1 {
		t.Errorf("SnapshotDone %+v: want 301 documents settled, 1 dead-lettered", done.Snapshot)
	}
}

// insertKinds inserts orders 1..n into coll, of kind "a" when _id is a multiple of 4, else "b".
func (e *env) insertKinds(coll string, n int64) {
	e.t.Helper()
	e.must(func(ctx context.Context) error {
		var docs []any
		for i := int64(1); i <= n; i++ {
			kind := "b"
			if i%4 == 0 {
				kind = "a"
			}
			docs = append(docs, Order{ID: i, Kind: kind})
		}
		_, err := e.db.Collection(coll).InsertMany(ctx, docs)
		return err
	})
}

// TestSnapshotFilter: a snapshot with a Filter reads only the matching documents (the server
// filters: the others are never read), and the stream still delivers every later change.
func TestSnapshotFilter(t *testing.T) {
	e := newEnv(t)
	e.insertKinds("orders", 200)
	r := e.startRuntime(nil)
	tg := newTarget()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "filtered", Collection: "orders",
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Filter: bson.D{{Key: "kind", Value: "a"}},
			Partitions: 4, BatchSize: 10},
		OnChange: tg.handler()})
	r.waitRunning(t, h)
	tg.mu.Lock()
	for id := range tg.snapDocs {
		if id%4 != 0 {
			t.Errorf("order %d (kind b) was copied by a snapshot filtered on kind a", id)
		}
	}
	n := len(tg.snapDocs)
	tg.mu.Unlock()
	if n != 50 {
		t.Errorf("%d orders copied, want the 50 of kind a", n)
	}
	e.insertOrders("orders", 201, 201)
	waitFor(t, "a later insert streamed", func() bool { tg.mu.Lock(); defer tg.mu.Unlock(); _, ok := tg.docs[201]; return ok })
}

// TestSnapshotHandoffKeptFresh: while a snapshot of a quiet collection runs, other collections
// are written to; the handoff checkpoint moves forward (an idle change stream on the collection
// returned no event up to its post-batch resume token), so a long snapshot's position does not
// age out of the oplog. A change to the collection itself stops the moves: the change made
// during the snapshot is still delivered after it, and the target ends equal to the collection.
func TestSnapshotHandoffKeptFresh(t *testing.T) {
	e := newEnv(t)
	e.insertMany("orders", 1, 50)
	r := e.startRuntime(nil)
	tg := newTarget()
	gate := make(chan struct{})
	var streamed sync.Map // "op/_id" of the change events delivered
	spec := watchtree.Stream[Order]{Name: "fresh", Collection: "orders", FullDocument: watchtree.FullDocumentUpdateLookup,
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 1, BatchSize: 10,
			HandoffRefresh: 10 * time.Millisecond},
		OnSnapshot: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
			tg.apply(ev)
			return nil
		},
		OnChange: func(_ context.Context, ev *watchtree.Event[Order]) error {
			id, _ := ev.DocumentID().AsInt64OK()
			streamed.Store(fmt.Sprintf("%s/%d", ev.OperationType(), id), true)
			tg.apply(ev)
			return nil
		}}
	h := r.spawn(t, spec)
	waitState(t, h, watchtree.StateSnapshotting)
	cp0, ok := e.checkpoint("fresh")
	if !ok || cp0.Source != "snapshot" {
		t.Fatalf("handoff checkpoint before the first document: %+v (found %v)", cp0, ok)
	}
	n := int64(0)
	waitFor(t, "the handoff checkpoint to move forward", func() bool {
		n++
		e.insertOrders("noise", n, n)
		cp, _ := e.checkpoint("fresh")
		return tokenData(cp.Token) > tokenData(cp0.Token) && cp.Source == "snapshot"
	})
	e.insertOrders("orders", 51, 51)
	e.bump("orders", 3, 3)
	for i := n + 1; i <= n+20; i++ { // more traffic elsewhere: the position must not pass the change
		e.insertOrders("noise", i, i)
	}
	close(gate)
	r.waitRunning(t, h)
	src := e.source("orders")
	waitFor(t, "the target to equal the collection", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	for _, want := range []string{"insert/51", "update/3"} {
		waitFor(t, "the change "+want+" made during the snapshot streamed after it", func() bool { _, ok := streamed.Load(want); return ok })
	}
}

// TestSnapshotMixedIDTypes: a collection whose _id values mix BSON types cannot be split into
// _id ranges without skipping documents: the stream crashes at once with ErrSnapshotMixedIDs
// (terminal: no restart could fix it), and nothing is handled.
func TestSnapshotMixedIDTypes(t *testing.T) {
	e := newEnv(t)
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: "two"}}})
		return err
	})
	r := e.startRuntime(nil)
	tg := newTarget()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The plan may fail before or after Spawn saw the position fixed: either Spawn fails with
	// the terminal cause, or the stream crashes right after it returned.
	h, err := r.rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{Name: "mixed", Collection: "orders", Restart: fastRestart,
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial}, OnChange: tg.handler()}))
	if err != nil {
		if !errors.Is(err, watchtree.ErrSnapshotMixedIDs) {
			t.Fatalf("Spawn: %v, want ErrSnapshotMixedIDs", err)
		}
	} else {
		st := waitState(t, h, watchtree.StateCrashed)
		if !strings.Contains(st.LastCause, "mixed _id types") || st.Deaths != 1 {
			t.Errorf("crashed status %+v: want one death whose cause names the mixed _id types", st)
		}
	}
	stopped := r.obs.wait(t, "terminal Stopped", func(ev observe.Event) bool {
		s, ok := ev.(observe.Stopped)
		return ok && s.Terminal
	}).(observe.Stopped)
	if !errors.Is(stopped.Cause, watchtree.ErrSnapshotMixedIDs) {
		t.Errorf("Stopped.Cause = %v, want ErrSnapshotMixedIDs", stopped.Cause)
	}
	if docs, _ := tg.snapshotDeliveries(); docs != 0 {
		t.Errorf("%d documents handled", docs)
	}
}

// TestSnapshotBadFilterIsTerminal: a Filter the server refuses fails the stream once, terminally,
// with the server's own error (no restart could fix it).
func TestSnapshotBadFilterIsTerminal(t *testing.T) {
	e := newEnv(t)
	e.insertMany("orders", 1, 10)
	r := e.startRuntime(nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The plan may fail before or after Spawn saw the position fixed: either Spawn fails with
	// the server's error, or the stream crashes right after it returned.
	h, err := r.rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{Name: "badfilter", Collection: "orders", Restart: fastRestart,
		Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Filter: bson.D{{Key: "v", Value: bson.D{{Key: "$bogus", Value: 1}}}}},
		OnChange: newTarget().handler()}))
	if err != nil {
		if !strings.Contains(err.Error(), "$bogus") || !strings.Contains(err.Error(), "crashed") {
			t.Fatalf("Spawn: %v, want the stream crashed with the server's error naming $bogus", err)
		}
		if h, err = r.rt.Handle("badfilter"); err != nil {
			t.Fatal(err)
		}
	}
	st := waitState(t, h, watchtree.StateCrashed)
	if st.Deaths != 1 || !strings.Contains(st.LastCause, "$bogus") {
		t.Errorf("crashed status %+v: want one death naming the unknown operator", st)
	}
}

// TestEphemeralSnapshotPreloads: an Ephemeral stream (state kept in memory, nothing stored)
// with SnapshotInitial copies the existing documents at every start of a new runtime, then
// streams, and writes neither a checkpoint nor a snapshot record.
func TestEphemeralSnapshotPreloads(t *testing.T) {
	e := newEnv(t)
	e.insertOrders("orders", 1, 300)
	spec := func(tg *target) watchtree.Stream[Order] {
		return watchtree.Stream[Order]{Name: "cache", Collection: "orders",
			Checkpoint: watchtree.CheckpointPolicy{Ephemeral: true},
			Snapshot:   watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 2, BatchSize: 50},
			OnChange:   tg.handler()}
	}
	for run := 1; run <= 2; run++ { // each runtime is a new process: it preloads again
		existing := len(e.source("orders"))
		r := e.startRuntime(nil)
		tg := newTarget()
		h := r.spawn(t, spec(tg))
		waitFor(t, fmt.Sprintf("run %d: the snapshot done and the stream running", run), func() bool {
			st, err := h.Status(context.Background())
			return err == nil && st.State == watchtree.StateRunning
		})
		e.insertOrders("orders", int64(300*run+1), int64(300*run+10))
		src := e.source("orders")
		waitFor(t, fmt.Sprintf("run %d: the target equal to the source", run), func() bool { ok, _ := tg.equalTo(src); return ok },
			func() string { _, d := tg.equalTo(src); return d })
		if docs, _ := tg.snapshotDeliveries(); docs != existing {
			t.Fatalf("run %d: %d documents came from the snapshot, want the %d that existed at its start", run, docs, existing)
		}
		r.stop(t)
	}
	if n := e.collCount("_wt_checkpoints", nil); n != 0 {
		t.Fatalf("_wt_checkpoints holds %d documents, want 0 (Ephemeral)", n)
	}
	if n := e.collCount("_wt_snapshots", nil); n != 0 {
		t.Fatalf("_wt_snapshots holds %d documents, want 0 (Ephemeral keeps its copy's progress in memory)", n)
	}
}

// TestSnapshotPerInstance: the instances of an AllInstances stream each copy the collection
// for themselves (each keeps its own position, so each keeps its own snapshot record): a second
// instance neither skips its copy because the first finished one nor joins the first's ranges.
func TestSnapshotPerInstance(t *testing.T) {
	e := newEnv(t)
	e.insertOrders("orders", 1, 200)
	var tgs []*target
	for _, pod := range []string{"pod-a", "pod-b"} {
		r := e.startRuntime(named(pod))
		tg := newTarget()
		tgs = append(tgs, tg)
		h := r.spawn(t, watchtree.Stream[Order]{Name: "proj", Collection: "orders",
			Snapshot: watchtree.SnapshotPolicy{Mode: watchtree.SnapshotInitial, Partitions: 2, BatchSize: 40},
			OnChange: tg.handler()})
		waitFor(t, pod+": the snapshot done and the stream running", func() bool {
			st, err := h.Status(context.Background())
			return err == nil && st.State == watchtree.StateRunning
		})
	}
	src := e.source("orders")
	for i, tg := range tgs {
		if ok, d := tg.equalTo(src); !ok {
			t.Fatalf("instance %d: the target differs from the source after its snapshot: %s", i, d)
		}
		if docs, _ := tg.snapshotDeliveries(); docs != 200 {
			t.Fatalf("instance %d: %d documents came from its snapshot, want 200", i, docs)
		}
	}
	if n := e.collCount("_wt_snapshots", bson.D{{Key: "stream", Value: "proj"}}); n != 2 {
		t.Fatalf("_wt_snapshots holds %d records of the stream, want one per instance (2)", n)
	}
}
