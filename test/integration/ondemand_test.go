package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// onDemandDone polls the stream's status until its on-demand snapshot id reached a final phase,
// and returns that status.
func onDemandDone(t *testing.T, h *watchtree.Handle, id string) observe.SnapshotStatus {
	t.Helper()
	var od observe.SnapshotStatus
	waitFor(t, "on-demand snapshot "+id+" to end", func() bool {
		st, err := h.Status(context.Background())
		if err != nil || st.OnDemand == nil || st.OnDemand.ID != id {
			return false
		}
		od = *st.OnDemand
		return od.Phase != "running"
	}, func() string { return fmt.Sprintf("%+v", od) })
	return od
}

// TestOnDemandSnapshotDuringLiveWrites: an on-demand snapshot of a running stream while a
// writer keeps replacing the same documents with higher versions. Chunk rows whose document
// changed inside their window are dropped and the others are delivered at the stream's position
// of their high watermark, so the versioned target never receives an older version after a
// newer one (every replace event carries its own version), and ends equal to the collection.
func TestOnDemandSnapshotDuringLiveWrites(t *testing.T) {
	const n = 600
	e := newEnv(t)
	e.insertMany("orders", 1, n) // v 0
	r := e.startRuntime(nil)
	tg := newTarget()
	var staleMu sync.Mutex
	var staleLog []string // which deliveries the target rejected as older
	h := r.spawn(t, watchtree.Stream[Order]{Name: "od", Collection: "orders", Lanes: 4,
		Snapshot: watchtree.SnapshotPolicy{BatchSize: 40},
		OnChange: func(_ context.Context, ev *watchtree.Event[Order]) error {
			tg.mu.Lock()
			id, _ := ev.DocumentID().AsInt64OK()
			if old, ok := tg.docs[id]; ok && ev.FullDocument != nil && old > ev.FullDocument.V {
				staleMu.Lock()
				staleLog = append(staleLog, fmt.Sprintf("order %d: %s v%d after v%d (%s)", id, ev.OperationType(), ev.FullDocument.V, old, ev.ID()))
				staleMu.Unlock()
			}
			tg.mu.Unlock()
			tg.apply(ev)
			return nil
		}})
	r.waitRunning(t, h)

	// The writer replaces random orders with v+1 until stopped: each replace event carries
	// the version it wrote.
	versions := map[int64]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var writes int
	go func() {
		defer wg.Done()
		rnd := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := 1 + rnd.Int64N(n)
			versions[id]++
			if _, err := e.db.Collection("orders").ReplaceOne(context.Background(), bson.D{{Key: "_id", Value: id}},
				Order{ID: id, V: versions[id], Amount: float64(id)}); err != nil {
				t.Errorf("replace %d: %v", id, err)
				return
			}
			writes++
		}
	}()
	id, err := h.Snapshot(context.Background(), watchtree.SnapshotRequest{})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("Snapshot: %v", err)
	}
	od := onDemandDone(t, h, id)
	close(stop)
	wg.Wait()
	if od.Phase != "done" || od.Error != "" {
		t.Fatalf("on-demand snapshot ended %q: %s", od.Phase, od.Error)
	}
	src := e.source("orders")
	waitFor(t, "the target equal to the collection", func() bool { ok, _ := tg.equalTo(src); return ok },
		func() string { _, d := tg.equalTo(src); return d })
	docs, repeats := tg.snapshotDeliveries()
	tg.mu.Lock()
	stale := tg.stale
	tg.mu.Unlock()
	t.Logf("%d live writes; %d rows delivered, %d dropped, %d chunks", writes, docs, od.Dropped, od.ChunksDone)
	if stale != 0 {
		staleMu.Lock()
		t.Errorf("%d deliveries carried an older version than the target held: %v", stale, staleLog)
		staleMu.Unlock()
	}
	if repeats != 0 || uint64(docs)+od.Dropped != n || od.Documents != uint64(docs) {
		t.Errorf("rows: %d delivered (%d repeated) + %d dropped, status %d documents; want %d rows in all, each once",
			docs, repeats, od.Dropped, od.Documents, n)
	}
	if want := n/40 + 1; od.ChunksDone != want {
		t.Errorf("%d chunks done, want %d", od.ChunksDone, want)
	}
	tg.mu.Lock()
	for doc, evID := range tg.snapIDs {
		if !strings.HasPrefix(evID, "snapshot:"+id+":") {
			t.Errorf("order %d: snapshot event ID %q does not carry the snapshot id %s", doc, evID, id)
		}
	}
	tg.mu.Unlock()
	if got := e.collCount("_wt_signals", bson.D{{Key: "snapshot", Value: id}}); got != 2*int64(od.ChunksDone) {
		t.Errorf("%d watermarks in _wt_signals, want 2 per chunk (%d)", got, 2*od.ChunksDone)
	}
	r.obs.wait(t, "SnapshotDone of the on-demand snapshot", func(ev observe.Event) bool {
		d, ok := ev.(observe.SnapshotDone)
		return ok && d.Snapshot.ID == id && d.Snapshot.Reason == "on-demand"
	})
}

// TestOnDemandSnapshotFilter: a filtered on-demand snapshot reads only the matching documents.
func TestOnDemandSnapshotFilter(t *testing.T) {
	e := newEnv(t)
	e.insertKinds("orders", 200)
	r := e.startRuntime(nil)
	tg := newTarget()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "odf", Collection: "orders",
		Snapshot: watchtree.SnapshotPolicy{BatchSize: 20}, OnChange: tg.handler()})
	r.waitRunning(t, h)
	id, err := h.Snapshot(context.Background(), watchtree.SnapshotRequest{Filter: `{"kind": "a"}`})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	od := onDemandDone(t, h, id)
	if od.Phase != "done" || od.Documents != 50 {
		t.Fatalf("on-demand snapshot %+v: want done with the 50 documents of kind a", od)
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for doc := range tg.snapDocs {
		if doc%4 != 0 {
			t.Errorf("order %d (kind b) was read by a snapshot filtered on kind a", doc)
		}
	}
	if len(tg.snapDocs) != 50 {
		t.Errorf("%d orders delivered, want the 50 of kind a", len(tg.snapDocs))
	}
}

// TestOnDemandSnapshotPoison: a document that does not decode goes to the dead letters as a
// snapshot event, and the on-demand snapshot goes on with the others.
func TestOnDemandSnapshotPoison(t *testing.T) {
	e := newEnv(t)
	e.insertMany("orders", 1, 100)
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: int64(50_5)}, {Key: "v", Value: "not a number"}})
		return err
	})
	r := e.startRuntime(nil)
	tg := newTarget()
	h := r.spawn(t, watchtree.Stream[Order]{Name: "odp", Collection: "orders", Lanes: 2,
		Snapshot: watchtree.SnapshotPolicy{BatchSize: 30}, OnChange: tg.handler()})
	r.waitRunning(t, h)
	id, err := h.Snapshot(context.Background(), watchtree.SnapshotRequest{})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	od := onDemandDone(t, h, id)
	if od.Phase != "done" || od.Documents != 101 || od.DeadLettered != 1 {
		t.Fatalf("on-demand snapshot %+v: want done, 101 settled, 1 dead-lettered", od)
	}
	if docs, _ := tg.snapshotDeliveries(); docs != 100 {
		t.Errorf("%d documents handled, want the 100 decodable ones", docs)
	}
	dls := r.deadLetters(t, "odp")
	if len(dls) != 1 || !strings.HasPrefix(dls[0].ID, "snapshot:"+id+":") || dls[0].OperationType != watchtree.OpSnapshot {
		t.Fatalf("dead letters %+v: want the one undecodable document, as an event of snapshot %s", dls, id)
	}
}

// TestOnDemandSnapshotErrors: one on-demand snapshot at a time, bad filters named, a stopped
// stream refused; a restart abandons the running one (its status says so) and a new one runs.
func TestOnDemandSnapshotErrors(t *testing.T) {
	e := newEnv(t)
	e.insertMany("orders", 1, 30)
	r := e.startRuntime(nil)
	gate := make(chan struct{})
	var once sync.Once
	h := r.spawn(t, watchtree.Stream[Order]{Name: "ode", Collection: "orders",
		Snapshot: watchtree.SnapshotPolicy{BatchSize: 10},
		OnSnapshot: func(ctx context.Context, _ *watchtree.Event[Order]) error {
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		OnChange: func(context.Context, *watchtree.Event[Order]) error { return nil }})
	r.waitRunning(t, h)
	ctx := context.Background()

	for _, f := range []any{"{not json", `{"$bogus": 1}`, 42} {
		_, err := h.Snapshot(ctx, watchtree.SnapshotRequest{Filter: f})
		var ce *watchtree.ConfigError
		if !errors.As(err, &ce) || ce.Field != "SnapshotRequest.Filter" {
			t.Errorf("Snapshot(Filter %v): %v; want a ConfigError on SnapshotRequest.Filter", f, err)
		}
	}
	first, err := h.Snapshot(ctx, watchtree.SnapshotRequest{})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if _, err := h.Snapshot(ctx, watchtree.SnapshotRequest{}); !errors.Is(err, watchtree.ErrSnapshotRunning) ||
		!strings.Contains(err.Error(), first) {
		t.Fatalf("second Snapshot: %v; want ErrSnapshotRunning naming %s", err, first)
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if od := onDemandDone(t, h, first); od.Phase != "abandoned" || od.Error == "" {
		t.Fatalf("after a restart: on-demand snapshot %+v; want abandoned, with the reason", od)
	}
	once.Do(func() { close(gate) })
	second, err := h.Snapshot(ctx, watchtree.SnapshotRequest{})
	if err != nil {
		t.Fatalf("Snapshot after the abandon: %v", err)
	}
	if od := onDemandDone(t, h, second); od.Phase != "done" || od.Documents != 30 {
		t.Fatalf("second on-demand snapshot %+v: want done with 30 documents", od)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := h.Snapshot(ctx, watchtree.SnapshotRequest{}); !errors.Is(err, watchtree.ErrStreamNotRunning) {
		t.Fatalf("Snapshot of a stopped stream: %v; want ErrStreamNotRunning", err)
	}
}
