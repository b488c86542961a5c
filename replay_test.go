package watchtree

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/observe"
)

// priced is a document whose handler refuses a negative amount (a permanent error).
type priced struct {
	ID     int `bson:"_id"`
	Amount int `bson:"amount"`
}

// replayStream spawns a stream on "priced" whose insert handler records the amounts it
// accepted and refuses a negative one permanently.
func replayStream(t *testing.T, rt *Runtime, name string) (*Handle, func() []int) {
	t.Helper()
	var mu sync.Mutex
	var seen []int
	h, err := rt.Spawn(testCtx(t), Stream[priced]{
		Name: name, Collection: "priced",
		Retry: RetryPolicy{MaxAttempts: 1},
		OnInsert: func(_ context.Context, ev *Event[priced]) error {
			if ev.FullDocument.Amount < 0 {
				return Permanent(errors.New("negative amount"))
			}
			mu.Lock()
			seen = append(seen, ev.FullDocument.Amount)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	return h, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), seen...)
	}
}

// waitDeadLetter waits for the stream's one dead letter.
func waitDeadLetter(t *testing.T, rt *Runtime, stream string) DeadLetter {
	t.Helper()
	var dls []DeadLetter
	waitFor(t, "the dead letter", func() bool {
		var err error
		dls, err = rt.DeadLetters(testCtx(t), stream, 0)
		return err == nil && len(dls) == 1
	})
	return dls[0]
}

// TestReplayRefreshReadsTheFixedDocument: an insert refused for its document's content stays
// refused when replayed as stored, even after the document is fixed; a replay with Refresh
// re-reads the document and succeeds, deleting the record. The record's ErrorType is the
// stable "permanent", not the Go type of Permanent's wrapper.
func TestReplayRefreshReadsTheFixedDocument(t *testing.T) {
	e := newRTEnv(t)
	rt, rec := e.newRuntime(t, nil)
	_, seen := replayStream(t, rt, "priced")
	ctx := testCtx(t)
	if _, err := e.coll("priced").InsertOne(ctx, priced{ID: 1, Amount: -5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a DeadLettered event", func() bool { return rec.count(isEvent[observe.DeadLettered]) == 1 })
	dl := waitDeadLetter(t, rt, "priced")
	if dl.ErrorType != "permanent" {
		t.Errorf("ErrorType %q, want permanent", dl.ErrorType)
	}
	if _, err := e.coll("priced").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "amount", Value: 5}}}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Replay(ctx, "priced", dl.ID); err == nil || !strings.Contains(err.Error(), "negative amount") {
		t.Fatalf("replay as stored: %v, want the handler's error again (the stored document is the old one)", err)
	}
	if err := rt.ReplayWith(ctx, "priced", dl.ID, ReplayOptions{Refresh: true}); err != nil {
		t.Fatalf("replay with refresh: %v", err)
	}
	if got := seen(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("handled amounts %v, want [5] (the current document)", got)
	}
	if dls, err := rt.DeadLetters(ctx, "priced", 0); err != nil || len(dls) != 0 {
		t.Fatalf("after the refreshed replay: %+v, %v", dls, err)
	}
}

// TestReplayRefreshOfADeletedDocument: a refresh that finds no document fails with
// ErrReplayUnavailable, and the record stays, not marked replayed (nothing ran).
func TestReplayRefreshOfADeletedDocument(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	replayStream(t, rt, "gone")
	ctx := testCtx(t)
	if _, err := e.coll("priced").InsertOne(ctx, priced{ID: 2, Amount: -1}); err != nil {
		t.Fatal(err)
	}
	dl := waitDeadLetter(t, rt, "gone")
	if _, err := e.coll("priced").DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	err := rt.ReplayWith(ctx, "gone", dl.ID, ReplayOptions{Refresh: true})
	if !errors.Is(err, ErrReplayUnavailable) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("refresh of a deleted document: %v, want ErrReplayUnavailable", err)
	}
	if dls, err := rt.DeadLetters(ctx, "gone", 0); err != nil || len(dls) != 1 || dls[0].ReplayCount != 0 {
		t.Fatalf("after the refused refresh: %+v, %v; want the record, unreplayed", dls, err)
	}
}

// strictOrder does not decode a document whose amount is a string.
type strictOrder struct {
	ID     int `bson:"_id"`
	Amount int `bson:"amount"`
}

// TestReplayOfADecodeError: a document that does not decode is dead-lettered as "decode"; the
// check the console shows says a replay as stored cannot succeed and that a refresh can; once
// the document is fixed, a refreshed replay succeeds.
func TestReplayOfADecodeError(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	var handled atomic.Int32
	h, err := rt.Spawn(testCtx(t), Stream[strictOrder]{
		Name: "strict", Collection: "strict",
		OnInsert: func(context.Context, *Event[strictOrder]) error { handled.Add(1); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	ctx := testCtx(t)
	if _, err := e.coll("strict").InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "amount", Value: "ten"}}); err != nil {
		t.Fatal(err)
	}
	dl := waitDeadLetter(t, rt, "strict")
	if dl.ErrorType != "decode" {
		t.Fatalf("ErrorType %q, want decode", dl.ErrorType)
	}
	stored, err := rt.e.DeadLetters(ctx, "strict", 0)
	if err != nil || len(stored) != 1 {
		t.Fatal(stored, err)
	}
	if ok, note := rt.e.ReplayCheck("strict", stored[0]); ok || !strings.Contains(note, "does not decode") || !strings.Contains(note, "refresh") {
		t.Fatalf("ReplayCheck of a decode error = %v, %q; want not replayable as stored, with the refresh hint", ok, note)
	}
	if err := rt.Replay(ctx, "strict", dl.ID); err == nil {
		t.Fatal("replay as stored of an undecodable event succeeded")
	}
	if _, err := e.coll("strict").UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "amount", Value: 10}}}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.ReplayWith(ctx, "strict", dl.ID, ReplayOptions{Refresh: true}); err != nil {
		t.Fatalf("refreshed replay of the fixed document: %v", err)
	}
	if handled.Load() != 1 {
		t.Fatalf("handler called %d times, want once (by the replay)", handled.Load())
	}
}
