package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/store"
)

// TestDeadLetterStore runs the dead-letter contract against stores made by newStore (a fresh,
// empty store per call). now is the store's clock for retention: the store must treat a dead
// letter as expired (absent from every read) once now() is after its ExpiresAt. The suite's
// clock starts at the wall-clock time (so that a real server's TTL monitor, which uses its own
// clock, does not delete records while a case runs) and only moves when a case advances it.
//
// Cases: missing IDs (ErrNotFound), exact round trips, idempotent put by (stream, instance, ID),
// the same ID in two streams and in two instances of one stream (separate records, each read,
// listed, replayed and deleted on its own), listing
// by stream (oldest first: ascending CreatedAt, ties by ID) with a limit, delete, mark replayed,
// retention, defensive copies and done contexts.
func TestDeadLetterStore(t *testing.T, newStore func(t *testing.T, now func() time.Time) store.DeadLetterStore) {
	t.Helper()
	runClockedSuite(t, newStore, []clockedCase[store.DeadLetterStore]{
		{"Missing", dlMissing},
		{"RoundTrip", dlRoundTrip},
		{"RoundTripMinimal", dlRoundTripMinimal},
		{"PutIsIdempotentByID", dlIdempotent},
		{"SameIDInTwoStreams", dlSameIDInTwoStreams},
		{"InstancesAreIndependent", dlInstancesIndependent},
		{"ListOrderAndLimit", dlListOrderAndLimit},
		{"Delete", dlDelete},
		{"MarkReplayed", dlMarkReplayed},
		{"MarkReplayedConcurrently", dlMarkReplayedConcurrently},
		{"Retention", dlRetention},
		{"CopiesBytes", dlCopies},
		{"DoneContext", dlDoneContext},
	})
}

// sampleDeadLetter returns a complete dead letter created createdMs after base.
func sampleDeadLetter(stream, id string, base time.Time, createdMs int) store.DeadLetter {
	created := base.Add(timeMs(createdMs))
	tok := token(id)
	key := doc(bson.D{{Key: "_id", Value: "order-" + id}})
	return store.DeadLetter{
		ID:            id,
		Stream:        stream,
		Token:         tok,
		OperationType: "insert",
		DocumentKey:   key,
		Namespace:     "shop.orders",
		Event: doc(bson.D{
			{Key: "_id", Value: tok},
			{Key: "operationType", Value: "insert"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1_773_500_000, I: 3}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
			{Key: "documentKey", Value: key},
			{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: "order-" + id}, {Key: "total", Value: 12.5}}},
		}),
		Error:          "charge declined: card expired",
		ErrorType:      "*errors.errorString",
		Stack:          "goroutine 7 [running]:\nmain.charge(...)\n\t/app/charge.go:42",
		Attempts:       3,
		FirstAttemptAt: created.Add(-2 * time.Second),
		LastAttemptAt:  created.Add(-time.Millisecond),
		CreatedAt:      created,
		ExpiresAt:      created.Add(14 * 24 * time.Hour),
	}
}

func mustPut(t *testing.T, s store.DeadLetterStore, dl store.DeadLetter) {
	t.Helper()
	if err := s.PutDeadLetter(testCtx(t), dl); err != nil {
		t.Fatalf("PutDeadLetter(%q): %v", dl.ID, err)
	}
}

func mustGet(t *testing.T, s store.DeadLetterStore, scope store.Scope, id string) store.DeadLetter {
	t.Helper()
	dl, err := s.GetDeadLetter(testCtx(t), scope, id)
	if err != nil {
		t.Fatalf("GetDeadLetter(%s, %q): %v", scope, id, err)
	}
	return dl
}

func wantDeadLetter(t *testing.T, s store.DeadLetterStore, want store.DeadLetter) {
	t.Helper()
	if d := diffRecord(want, mustGet(t, s, want.Scope(), want.ID)); d != "" {
		t.Fatalf("GetDeadLetter(%s, %q): %s", want.Scope(), want.ID, d)
	}
}

func wantNotFound(t *testing.T, s store.DeadLetterStore, scope store.Scope, id string) {
	t.Helper()
	if dl, err := s.GetDeadLetter(testCtx(t), scope, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDeadLetter(%s, %q): err = %v (record %+v), want store.ErrNotFound", scope, id, err, dl)
	}
}

func mustList(t *testing.T, s store.DeadLetterStore, scope store.Scope, limit int) []store.DeadLetter {
	t.Helper()
	dls, err := s.ListDeadLetters(testCtx(t), scope, limit)
	if err != nil {
		t.Fatalf("ListDeadLetters(%s, %d): %v", scope, limit, err)
	}
	return dls
}

func wantList(t *testing.T, s store.DeadLetterStore, scope store.Scope, limit int, want ...store.DeadLetter) {
	t.Helper()
	got := mustList(t, s, scope, limit)
	wantRecords(t, fmt.Sprintf("ListDeadLetters(%s, %d)", scope, limit), got, want,
		func(d store.DeadLetter) string { return d.ID })
	// CountDeadLetters counts what a full listing lists.
	if limit <= 0 {
		n, err := s.CountDeadLetters(testCtx(t), scope)
		if err != nil || n != int64(len(want)) {
			t.Fatalf("CountDeadLetters(%s) = %d, %v; want %d", scope, n, err, len(want))
		}
	}
}

func dlIDs(dls []store.DeadLetter) []string {
	ids := make([]string, len(dls))
	for i, d := range dls {
		ids[i] = d.ID
	}
	return ids
}

func dlMissing(t *testing.T, s store.DeadLetterStore, _ *clock.Fake) {
	wantNotFound(t, s, sh("orders"), "nope")
	if err := s.DeleteDeadLetter(testCtx(t), sh("orders"), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteDeadLetter of a missing ID: err = %v, want store.ErrNotFound", err)
	}
	if err := s.MarkReplayed(testCtx(t), sh("orders"), "nope", baseTime); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MarkReplayed of a missing ID: err = %v, want store.ErrNotFound", err)
	}
	if dls := mustList(t, s, sh("orders"), 0); len(dls) != 0 {
		t.Errorf("ListDeadLetters on an empty store: %v", dlIDs(dls))
	}
}

func dlRoundTrip(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "8263A1B2C3000000012B0229296E04", clk.Now(), 0)
	dl.ReplayCount = 2
	dl.LastReplayAt = clk.Now().Add(-time.Hour)
	mustPut(t, s, dl)
	wantDeadLetter(t, s, dl)
	wantList(t, s, sh("orders"), 0, dl)
}

func dlRoundTripMinimal(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	// A database-level event: no document key, no namespace, never expires, never replayed.
	dl := store.DeadLetter{
		ID:            "min",
		Stream:        "orders",
		Token:         token("min"),
		OperationType: "dropDatabase",
		Event:         doc(bson.D{{Key: "operationType", Value: "dropDatabase"}}),
		Error:         "permanent",
		Attempts:      1,
		CreatedAt:     clk.Now(),
	}
	mustPut(t, s, dl)
	got := mustGet(t, s, sh("orders"), "min")
	if len(got.DocumentKey) != 0 || !got.ExpiresAt.IsZero() || !got.LastReplayAt.IsZero() {
		t.Fatalf("minimal dead letter came back with DocumentKey %v, ExpiresAt %v, LastReplayAt %v",
			got.DocumentKey, got.ExpiresAt, got.LastReplayAt)
	}
	wantDeadLetter(t, s, dl)
	clk.Advance(100 * 365 * 24 * time.Hour) // zero ExpiresAt = never expires
	wantDeadLetter(t, s, dl)
}

func dlIdempotent(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "e1", clk.Now(), 0)
	mustPut(t, s, dl)
	redelivered := sampleDeadLetter("orders", "e1", clk.Now(), 50) // same event, dead-lettered again
	redelivered.Attempts = 6
	redelivered.Error = "still declined"
	mustPut(t, s, redelivered)
	wantList(t, s, sh("orders"), 0, redelivered)
	wantDeadLetter(t, s, redelivered)
}

// dlSameIDInTwoStreams: two streams on one collection dead-letter the same event. Each keeps
// its own record: a put of one never overwrites the other's, and reads, listing, replay marks
// and deletes reach only the named stream's record.
func dlSameIDInTwoStreams(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	base := clk.Now()
	search := sampleDeadLetter("search", "e1", base, 0)
	search.Error = "index unavailable"
	billing := sampleDeadLetter("billing", "e1", base, 10)
	billing.Error = "charge declined"
	billing.Attempts = 5
	mustPut(t, s, search)
	mustPut(t, s, billing)
	wantDeadLetter(t, s, search)
	wantDeadLetter(t, s, billing)
	wantList(t, s, sh("search"), 0, search)
	wantList(t, s, sh("billing"), 0, billing)
	wantNotFound(t, s, sh("shipping"), "e1") // the ID alone finds nothing

	// A redelivery to one stream replaces only that stream's record.
	again := sampleDeadLetter("search", "e1", base, 20)
	again.Error = "index still unavailable"
	mustPut(t, s, again)
	wantDeadLetter(t, s, again)
	wantDeadLetter(t, s, billing)

	at := base.Add(time.Minute)
	if err := s.MarkReplayed(testCtx(t), sh("billing"), "e1", at); err != nil {
		t.Fatalf("MarkReplayed(billing, e1): %v", err)
	}
	billing.ReplayCount, billing.LastReplayAt = 1, at
	wantDeadLetter(t, s, billing)
	wantDeadLetter(t, s, again) // not marked

	if err := s.DeleteDeadLetter(testCtx(t), sh("billing"), "e1"); err != nil {
		t.Fatalf("DeleteDeadLetter(billing, e1): %v", err)
	}
	wantNotFound(t, s, sh("billing"), "e1")
	wantDeadLetter(t, s, again)
	wantList(t, s, sh("search"), 0, again)
	wantList(t, s, sh("billing"), 0)
	if err := s.DeleteDeadLetter(testCtx(t), sh("shipping"), "e1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteDeadLetter of another stream's ID: err = %v, want store.ErrNotFound", err)
	}
	if err := s.MarkReplayed(testCtx(t), sh("shipping"), "e1", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("MarkReplayed of another stream's ID: err = %v, want store.ErrNotFound", err)
	}
	wantDeadLetter(t, s, again)
}

// dlInstancesIndependent: two instances of an AllInstances stream, and the stream's shared
// scope, dead-letter the same event. Each scope sees, replays and deletes only its own record.
func dlInstancesIndependent(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	base := clk.Now()
	a := sampleDeadLetter("orders", "e1", base, 0)
	a.Instance, a.Error = "pod-a", "cache down on pod-a"
	b := sampleDeadLetter("orders", "e1", base, 10)
	b.Instance, b.Error, b.Attempts = "pod-b", "socket closed on pod-b", 7
	shared := sampleDeadLetter("orders", "e1", base, 20)
	onlyB := sampleDeadLetter("orders", "e2", base, 30)
	onlyB.Instance = "pod-b"
	for _, dl := range []store.DeadLetter{a, b, shared, onlyB} {
		mustPut(t, s, dl)
	}
	wantDeadLetter(t, s, a)
	wantDeadLetter(t, s, b)
	wantDeadLetter(t, s, shared)
	wantList(t, s, inst("orders", "pod-a"), 0, a)
	wantList(t, s, inst("orders", "pod-b"), 0, b, onlyB)
	wantList(t, s, sh("orders"), 0, shared)
	wantList(t, s, inst("orders", "pod-c"), 0)
	wantNotFound(t, s, inst("orders", "pod-a"), "e2")
	wantNotFound(t, s, sh("orders"), "e2")

	at := base.Add(time.Minute)
	if err := s.MarkReplayed(testCtx(t), inst("orders", "pod-b"), "e1", at); err != nil {
		t.Fatalf("MarkReplayed(orders@pod-b, e1): %v", err)
	}
	b.ReplayCount, b.LastReplayAt = 1, at
	wantDeadLetter(t, s, b)
	wantDeadLetter(t, s, a) // not marked
	wantDeadLetter(t, s, shared)

	if err := s.DeleteDeadLetter(testCtx(t), inst("orders", "pod-a"), "e1"); err != nil {
		t.Fatalf("DeleteDeadLetter(orders@pod-a, e1): %v", err)
	}
	wantNotFound(t, s, inst("orders", "pod-a"), "e1")
	wantDeadLetter(t, s, b)
	wantDeadLetter(t, s, shared)
	if err := s.DeleteDeadLetter(testCtx(t), inst("orders", "pod-a"), "e2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteDeadLetter of another instance's ID: err = %v, want store.ErrNotFound", err)
	}
	wantList(t, s, inst("orders", "pod-b"), 0, b, onlyB)
}

func dlListOrderAndLimit(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	base := clk.Now()
	d1 := sampleDeadLetter("orders", "z1", base, 10)
	d2a := sampleDeadLetter("orders", "a2", base, 20) // same CreatedAt: ties broken by ID
	d2b := sampleDeadLetter("orders", "b2", base, 20)
	d3 := sampleDeadLetter("orders", "c3", base, 30)
	d4 := sampleDeadLetter("orders", "a4", base, 40)
	other := sampleDeadLetter("payments", "p1", base, 1)
	for _, dl := range []store.DeadLetter{d3, other, d2b, d4, d1, d2a} {
		mustPut(t, s, dl)
	}
	wantList(t, s, sh("orders"), 0, d1, d2a, d2b, d3, d4)
	wantList(t, s, sh("orders"), -1, d1, d2a, d2b, d3, d4)
	wantList(t, s, sh("orders"), 2, d1, d2a)
	wantList(t, s, sh("orders"), 3, d1, d2a, d2b)
	wantList(t, s, sh("orders"), 100, d1, d2a, d2b, d3, d4)
	wantList(t, s, sh("payments"), 1, other)
	wantList(t, s, sh("nobody"), 0)
}

func dlDelete(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	a := sampleDeadLetter("orders", "a", clk.Now(), 1)
	b := sampleDeadLetter("orders", "b", clk.Now(), 2)
	mustPut(t, s, a)
	mustPut(t, s, b)
	if err := s.DeleteDeadLetter(testCtx(t), sh("orders"), "a"); err != nil {
		t.Fatalf("DeleteDeadLetter: %v", err)
	}
	wantNotFound(t, s, sh("orders"), "a")
	wantList(t, s, sh("orders"), 0, b)
	if err := s.DeleteDeadLetter(testCtx(t), sh("orders"), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteDeadLetter: err = %v, want store.ErrNotFound", err)
	}
}

func dlMarkReplayed(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "r", clk.Now(), 0)
	mustPut(t, s, dl)
	first := clk.Now().Add(time.Minute)
	second := clk.Now().Add(2 * time.Minute)
	for _, at := range []time.Time{first, second} {
		if err := s.MarkReplayed(testCtx(t), sh("orders"), "r", at); err != nil {
			t.Fatalf("MarkReplayed: %v", err)
		}
	}
	dl.ReplayCount, dl.LastReplayAt = 2, second
	wantDeadLetter(t, s, dl) // every other field unchanged
}

// dlMarkReplayedConcurrently: concurrent replays each count once (no lost increment).
func dlMarkReplayedConcurrently(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "r", clk.Now(), 0)
	mustPut(t, s, dl)
	const n = 16
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := s.MarkReplayed(ctx, sh("orders"), "r", clk.Now().Add(timeMs(i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("MarkReplayed: %v", err)
	}
	if got := mustGet(t, s, sh("orders"), "r"); got.ReplayCount != n {
		t.Fatalf("ReplayCount after %d concurrent replays = %d", n, got.ReplayCount)
	}
}

func dlRetention(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	base := clk.Now()
	short := sampleDeadLetter("orders", "short", base, 0)
	short.ExpiresAt = base.Add(time.Hour)
	long := sampleDeadLetter("orders", "long", base, 1)
	long.ExpiresAt = base.Add(48 * time.Hour)
	forever := sampleDeadLetter("orders", "forever", base, 2)
	forever.ExpiresAt = time.Time{}
	for _, dl := range []store.DeadLetter{short, long, forever} {
		mustPut(t, s, dl)
	}

	clk.Advance(time.Hour - time.Millisecond)
	wantList(t, s, sh("orders"), 0, short, long, forever)
	wantDeadLetter(t, s, short)

	clk.Advance(2 * time.Millisecond) // now after short.ExpiresAt
	wantNotFound(t, s, sh("orders"), "short")
	wantList(t, s, sh("orders"), 0, long, forever)
	wantList(t, s, sh("orders"), 1, long) // the limit counts unexpired records only
	if err := s.MarkReplayed(testCtx(t), sh("orders"), "short", clk.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("MarkReplayed of an expired dead letter: err = %v, want store.ErrNotFound", err)
	}

	// The same event dead-lettered again gets a fresh record.
	again := sampleDeadLetter("orders", "short", clk.Now(), 0)
	again.ExpiresAt = clk.Now().Add(time.Hour)
	mustPut(t, s, again)
	wantDeadLetter(t, s, again)

	clk.Advance(49 * time.Hour)
	wantList(t, s, sh("orders"), 0, forever)
}

func dlCopies(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "c", clk.Now(), 0)
	want := dl.Clone()
	mustPut(t, s, dl)
	for _, b := range [][]byte{dl.Token, dl.DocumentKey, dl.Event} {
		b[len(b)-2] = 'X' // the caller reuses its buffers
	}
	wantDeadLetter(t, s, want)
	got := mustGet(t, s, sh("orders"), "c")
	listed := mustList(t, s, sh("orders"), 0)
	for _, d := range []store.DeadLetter{got, listed[0]} {
		for _, b := range [][]byte{d.Token, d.DocumentKey, d.Event} {
			b[len(b)-2] = 'Y' // the caller changes what it read
		}
	}
	wantDeadLetter(t, s, want)
}

func dlDoneContext(t *testing.T, s store.DeadLetterStore, clk *clock.Fake) {
	dl := sampleDeadLetter("orders", "d", clk.Now(), 0)
	for _, c := range doneContexts(t) {
		calls := []struct {
			name string
			call func() error
		}{
			{"PutDeadLetter", func() error { return s.PutDeadLetter(c.ctx, dl) }},
			{"ListDeadLetters", func() error { _, err := s.ListDeadLetters(c.ctx, sh("orders"), 0); return err }},
			{"GetDeadLetter", func() error { _, err := s.GetDeadLetter(c.ctx, sh("orders"), "d"); return err }},
			{"DeleteDeadLetter", func() error { return s.DeleteDeadLetter(c.ctx, sh("orders"), "d") }},
			{"MarkReplayed", func() error { return s.MarkReplayed(c.ctx, sh("orders"), "d", clk.Now()) }},
		}
		for _, call := range calls {
			if err := promptly(t, call.name, call.call); !errors.Is(err, c.want) {
				t.Errorf("%s on a %s context: err = %v, want %v", call.name, c.name, err, c.want)
			}
		}
	}
	wantNotFound(t, s, sh("orders"), "d")
}
