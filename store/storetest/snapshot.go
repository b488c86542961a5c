package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// TestSnapshotStore runs the snapshot-progress contract against stores made by newStore (a
// fresh, empty store per call): load of a missing stream, exact round trips (ranges with
// unbounded sides and typed _id bounds), upsert overwrite, per-stream and per-instance records,
// defensive copies
// and done contexts.
func TestSnapshotStore(t *testing.T, newStore func(t *testing.T) store.SnapshotStore) {
	t.Helper()
	runSuite(t, newStore, []suiteCase[store.SnapshotStore]{
		{"LoadMissing", snLoadMissing},
		{"RoundTrip", snRoundTrip},
		{"RoundTripUnplanned", snRoundTripUnplanned},
		{"Overwrite", snOverwrite},
		{"StreamsAreIndependent", snStreamsIndependent},
		{"ScopesAreIndependent", snScopesIndependent},
		{"Copies", snCopies},
		{"DoneContext", snDoneContext},
	})
}

func idDoc(v any) bson.Raw { return doc(bson.D{{Key: "_id", Value: v}}) }

func sampleSnapshot(stream string) store.Snapshot {
	oid := bson.ObjectID{0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	return store.Snapshot{
		Stream:       stream,
		ID:           "snap-" + stream + "-1",
		State:        store.SnapshotRunning,
		Reason:       store.SnapshotReasonInitial,
		HandoffToken: token("8265F0A1B2000000012B022C0100296E5A1004"),
		HandoffTime:  bson.Timestamp{T: 1_773_500_000, I: 3},
		Planned:      true,
		Ranges: []store.SnapshotRange{
			{Max: idDoc(int64(250)), Last: idDoc(int32(17)), Read: 17},
			{Min: idDoc(int64(250)), Max: idDoc("m"), Done: true, Read: 250},
			{Min: idDoc("m"), Max: idDoc(oid)},
			{Min: idDoc(oid), Last: idDoc(oid), Read: 1},
		},
		Total:     268,
		StartedAt: baseTime,
		UpdatedAt: baseTime.Add(timeMs(42)),
	}
}

// mustLoadSnapshot loads the record of stream's shared scope.
func mustLoadSnapshot(t *testing.T, s store.SnapshotStore, stream string) (store.Snapshot, bool) {
	t.Helper()
	return mustLoadSnapshotOf(t, s, store.Scope{Stream: stream})
}

func mustLoadSnapshotOf(t *testing.T, s store.SnapshotStore, scope store.Scope) (store.Snapshot, bool) {
	t.Helper()
	sn, ok, err := s.LoadSnapshot(testCtx(t), scope)
	if err != nil {
		t.Fatalf("LoadSnapshot(%v): %v", scope, err)
	}
	return sn, ok
}

func mustSaveSnapshot(t *testing.T, s store.SnapshotStore, sn store.Snapshot) {
	t.Helper()
	if err := s.SaveSnapshot(testCtx(t), sn); err != nil {
		t.Fatalf("SaveSnapshot(%q): %v", sn.Stream, err)
	}
}

func diffSnapshot(want, got store.Snapshot) string {
	var d differ
	d.str("Stream", want.Stream, got.Stream)
	d.str("Instance", want.Instance, got.Instance)
	d.str("ID", want.ID, got.ID)
	d.str("State", want.State, got.State)
	d.str("Reason", want.Reason, got.Reason)
	rawEq := func(name string, w, g bson.Raw) {
		if !bytes.Equal(w, g) {
			d.str(name, w.String(), g.String())
		}
	}
	rawEq("HandoffToken", want.HandoffToken, got.HandoffToken)
	if want.HandoffTime != got.HandoffTime {
		d.str("HandoffTime", fmt.Sprint(want.HandoffTime), fmt.Sprint(got.HandoffTime))
	}
	if want.Planned != got.Planned {
		d.str("Planned", boolStr(want.Planned), boolStr(got.Planned))
	}
	d.num("Total", int64(want.Total), int64(got.Total))
	d.num("len(Ranges)", int64(len(want.Ranges)), int64(len(got.Ranges)))
	if len(want.Ranges) == len(got.Ranges) {
		for i := range want.Ranges {
			w, g := want.Ranges[i], got.Ranges[i]
			p := fmt.Sprintf("Ranges[%d].", i)
			rawEq(p+"Min", w.Min, g.Min)
			rawEq(p+"Max", w.Max, g.Max)
			rawEq(p+"Last", w.Last, g.Last)
			if w.Done != g.Done {
				d.str(p+"Done", boolStr(w.Done), boolStr(g.Done))
			}
			d.num(p+"Read", int64(w.Read), int64(g.Read))
		}
	}
	for _, tm := range []struct {
		name      string
		want, got interface{ UnixMilli() int64 }
	}{{"StartedAt", want.StartedAt, got.StartedAt}, {"UpdatedAt", want.UpdatedAt, got.UpdatedAt}, {"DoneAt", want.DoneAt, got.DoneAt}} {
		d.num(tm.name+" (ms)", tm.want.UnixMilli(), tm.got.UnixMilli())
	}
	return d.String()
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func snLoadMissing(t *testing.T, s store.SnapshotStore) {
	if _, ok := mustLoadSnapshot(t, s, "nobody"); ok {
		t.Fatal("LoadSnapshot of a stream never saved: ok = true, want false")
	}
}

func snRoundTrip(t *testing.T, s store.SnapshotStore) {
	want := sampleSnapshot("orders")
	mustSaveSnapshot(t, s, want)
	got, ok := mustLoadSnapshot(t, s, "orders")
	if !ok {
		t.Fatal("LoadSnapshot after SaveSnapshot: not found")
	}
	if d := diffSnapshot(want, got); d != "" {
		t.Fatal(d)
	}
}

func snRoundTripUnplanned(t *testing.T, s store.SnapshotStore) {
	want := store.Snapshot{Stream: "fresh", ID: "snap-fresh", State: store.SnapshotRunning, Reason: store.SnapshotReasonRebuild,
		HandoffTime: bson.Timestamp{T: 1_773_500_100, I: 1}, StartedAt: baseTime, UpdatedAt: baseTime}
	mustSaveSnapshot(t, s, want)
	got, _ := mustLoadSnapshot(t, s, "fresh")
	if d := diffSnapshot(want, got); d != "" {
		t.Fatal(d)
	}
	if len(got.Ranges) != 0 || got.HandoffToken != nil {
		t.Fatalf("unplanned record: ranges %v, token %v; want none", got.Ranges, got.HandoffToken)
	}
}

func snOverwrite(t *testing.T, s store.SnapshotStore) {
	first := sampleSnapshot("orders")
	mustSaveSnapshot(t, s, first)
	next := sampleSnapshot("orders")
	next.Ranges[0].Last, next.Ranges[0].Read = idDoc(int32(99)), 99
	next.Ranges[2].Done = true
	next.State, next.DoneAt = store.SnapshotDone, baseTime.Add(timeMs(900))
	mustSaveSnapshot(t, s, next)
	got, _ := mustLoadSnapshot(t, s, "orders")
	if d := diffSnapshot(next, got); d != "" {
		t.Fatal(d)
	}
	if !got.Finished() {
		t.Fatal("Finished() = false after saving State done")
	}
}

func snStreamsIndependent(t *testing.T, s store.SnapshotStore) {
	a, b := sampleSnapshot("a"), sampleSnapshot("b")
	b.Ranges = b.Ranges[:1]
	mustSaveSnapshot(t, s, a)
	mustSaveSnapshot(t, s, b)
	got, _ := mustLoadSnapshot(t, s, "a")
	if d := diffSnapshot(a, got); d != "" {
		t.Fatal("stream a: " + d)
	}
	got, _ = mustLoadSnapshot(t, s, "b")
	if d := diffSnapshot(b, got); d != "" {
		t.Fatal("stream b: " + d)
	}
}

// snScopesIndependent: the instances of an AllInstances stream each keep their own record, apart
// from the stream's shared one.
func snScopesIndependent(t *testing.T, s store.SnapshotStore) {
	shared := sampleSnapshot("orders")
	a := sampleSnapshot("orders")
	a.Instance, a.ID, a.State = "pod-a", "snap-a", store.SnapshotDone
	b := sampleSnapshot("orders")
	b.Instance, b.ID, b.Ranges = "pod-b", "snap-b", b.Ranges[:2]
	for _, sn := range []store.Snapshot{shared, a, b} {
		mustSaveSnapshot(t, s, sn)
	}
	for _, want := range []store.Snapshot{shared, a, b} {
		got, ok := mustLoadSnapshotOf(t, s, want.Scope())
		if !ok {
			t.Fatalf("%v: not found", want.Scope())
		}
		if d := diffSnapshot(want, got); d != "" {
			t.Fatalf("%v: %s", want.Scope(), d)
		}
	}
	if _, ok := mustLoadSnapshotOf(t, s, store.Scope{Stream: "orders", Instance: "pod-c"}); ok {
		t.Fatal("an instance that never saved a record found one")
	}
}

func snCopies(t *testing.T, s store.SnapshotStore) {
	sn := sampleSnapshot("orders")
	want := sn.Clone()
	mustSaveSnapshot(t, s, sn)
	sn.HandoffToken[5] ^= 0xFF // the caller reuses its buffers
	sn.Ranges[0].Last[5] ^= 0xFF
	got, _ := mustLoadSnapshot(t, s, "orders")
	if d := diffSnapshot(want, got); d != "" {
		t.Fatal("a saved record changed with the caller's buffers: " + d)
	}
	got.HandoffToken[5] ^= 0xFF
	got.Ranges[3].Min[5] ^= 0xFF
	again, _ := mustLoadSnapshot(t, s, "orders")
	if d := diffSnapshot(want, again); d != "" {
		t.Fatal("a loaded record shares memory with the store: " + d)
	}
}

func snDoneContext(t *testing.T, s store.SnapshotStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.SaveSnapshot(ctx, sampleSnapshot("x")); err == nil {
		t.Fatal("SaveSnapshot with a done context succeeded")
	}
	if _, _, err := s.LoadSnapshot(ctx, store.Scope{Stream: "x"}); err == nil {
		t.Fatal("LoadSnapshot with a done context succeeded")
	}
	if _, ok := mustLoadSnapshot(t, s, "x"); ok {
		t.Fatal("a SaveSnapshot with a done context wrote the record")
	}
}
