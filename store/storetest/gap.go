package storetest

import (
	"errors"
	"fmt"

	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// TestGapStore runs the gap-record contract against stores made by newStore (a fresh, empty
// store per call): an empty listing, exact round trips, ascending order by At (ties by ID),
// listing by stream and by instance (each Scope on its own), idempotence by ID, defensive copies and done contexts.
func TestGapStore(t *testing.T, newStore func(t *testing.T) store.GapStore) {
	t.Helper()
	runSuite(t, newStore, []suiteCase[store.GapStore]{
		{"ListEmpty", gapListEmpty},
		{"RecordAndListInOrder", gapRecordAndList},
		{"EmptyFrom", gapEmptyFrom},
		{"InstancesAreIndependent", gapInstancesIndependent},
		{"IdempotentByID", gapIdempotent},
		{"CopiesTokens", gapCopies},
		{"DoneContext", gapDoneContext},
	})
}

func sampleGap(stream, id string, atMs int) store.Gap {
	return store.Gap{
		ID:        id,
		Stream:    stream,
		FromToken: token("82" + id + "01"),
		FromTime:  bson.Timestamp{T: 1_773_400_000, I: uint32(atMs)},
		ToToken:   token("82" + id + "02"),
		ToTime:    bson.Timestamp{T: 1_773_500_000, I: uint32(atMs)},
		Policy:    store.GapResumeFromNow,
		Reason:    "(ChangeStreamHistoryLost) Resume of change stream was not possible",
		At:        baseTime.Add(timeMs(atMs)),
	}
}

func mustListGaps(t *testing.T, s store.GapStore, scope store.Scope) []store.Gap {
	t.Helper()
	gs, err := s.ListGaps(testCtx(t), scope)
	if err != nil {
		t.Fatalf("ListGaps(%s): %v", scope, err)
	}
	return gs
}

func wantGaps(t *testing.T, s store.GapStore, scope store.Scope, want ...store.Gap) {
	t.Helper()
	wantRecords(t, fmt.Sprintf("ListGaps(%s)", scope), mustListGaps(t, s, scope), want,
		func(g store.Gap) string { return g.ID })
}

func gapIDs(gs []store.Gap) []string {
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.ID
	}
	return ids
}

func mustRecordGap(t *testing.T, s store.GapStore, g store.Gap) {
	t.Helper()
	if err := s.RecordGap(testCtx(t), g); err != nil {
		t.Fatalf("RecordGap(%q): %v", g.ID, err)
	}
}

func gapListEmpty(t *testing.T, s store.GapStore) {
	if gs := mustListGaps(t, s, sh("orders")); len(gs) != 0 {
		t.Fatalf("ListGaps on an empty store: %v", gapIDs(gs))
	}
}

func gapRecordAndList(t *testing.T, s store.GapStore) {
	g3 := sampleGap("orders", "c", 30)
	g1 := sampleGap("orders", "z", 10)
	g2a := sampleGap("orders", "a", 20) // same At as g2b: ties broken by ID
	g2b := sampleGap("orders", "b", 20)
	g2b.Policy = store.GapRebuild
	other := sampleGap("payments", "x", 5)
	for _, g := range []store.Gap{g3, g2b, other, g1, g2a} {
		mustRecordGap(t, s, g)
	}
	wantGaps(t, s, sh("orders"), g1, g2a, g2b, g3)
	wantGaps(t, s, sh("payments"), other)
	wantGaps(t, s, sh("nobody"))
}

func gapInstancesIndependent(t *testing.T, s store.GapStore) {
	a := sampleGap("orders", "orders/pod-a/1", 10)
	a.Instance = "pod-a"
	b1 := sampleGap("orders", "orders/pod-b/1", 5)
	b1.Instance = "pod-b"
	b2 := sampleGap("orders", "orders/pod-b/2", 20)
	b2.Instance = "pod-b"
	shared := sampleGap("orders", "orders/1", 1)
	for _, g := range []store.Gap{b2, a, shared, b1} {
		mustRecordGap(t, s, g)
	}
	wantGaps(t, s, inst("orders", "pod-a"), a)
	wantGaps(t, s, inst("orders", "pod-b"), b1, b2)
	wantGaps(t, s, sh("orders"), shared)
	wantGaps(t, s, inst("orders", "pod-c"))
}

func gapEmptyFrom(t *testing.T, s store.GapStore) {
	g := sampleGap("orders", "first", 1)
	g.FromToken, g.FromTime = nil, bson.Timestamp{} // the stream never had a position
	mustRecordGap(t, s, g)
	got := mustListGaps(t, s, sh("orders"))
	if len(got) != 1 || len(got[0].FromToken) != 0 {
		t.Fatalf("ListGaps: %+v, want one gap without FromToken", got)
	}
	wantGaps(t, s, sh("orders"), g)
}

func gapIdempotent(t *testing.T, s store.GapStore) {
	g := sampleGap("orders", "g1", 10)
	mustRecordGap(t, s, g)
	g.Reason = "retried write"
	mustRecordGap(t, s, g)
	wantGaps(t, s, sh("orders"), g)
}

func gapCopies(t *testing.T, s store.GapStore) {
	g := sampleGap("orders", "g1", 10)
	want := g.Clone()
	mustRecordGap(t, s, g)
	g.ToToken[len(g.ToToken)-2] = 'X'
	got := mustListGaps(t, s, sh("orders"))
	got[0].FromToken[len(got[0].FromToken)-2] = 'Y'
	wantGaps(t, s, sh("orders"), want)
}

func gapDoneContext(t *testing.T, s store.GapStore) {
	for _, c := range doneContexts(t) {
		err := promptly(t, "RecordGap", func() error { return s.RecordGap(c.ctx, sampleGap("orders", "g", 1)) })
		if !errors.Is(err, c.want) {
			t.Errorf("RecordGap on a %s context: err = %v, want %v", c.name, err, c.want)
		}
		err = promptly(t, "ListGaps", func() error { _, err := s.ListGaps(c.ctx, sh("orders")); return err })
		if !errors.Is(err, c.want) {
			t.Errorf("ListGaps on a %s context: err = %v, want %v", c.name, err, c.want)
		}
	}
	if gs := mustListGaps(t, s, sh("orders")); len(gs) != 0 {
		t.Errorf("a RecordGap on a done context was stored: %v", gapIDs(gs))
	}
}
