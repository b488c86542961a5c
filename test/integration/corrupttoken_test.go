package integration_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// corruptTokens are saved resume tokens no server can resume from: damaged in storage, written
// by hand, or of another shape.
var corruptTokens = []struct {
	name  string
	token bson.D
}{
	{"not hex", bson.D{{Key: "_data", Value: "zz-not-a-resume-token"}}},
	{"truncated", bson.D{{Key: "_data", Value: "8265"}}},
	{"wrong type", bson.D{{Key: "_data", Value: int32(42)}}},
	{"no _data", bson.D{{Key: "token", Value: "x"}}},
}

// saveCorruptToken runs stream "ct" over orders 1..5 so that it has a checkpoint, stops it, and
// overwrites the checkpoint's token with tok.
func saveCorruptToken(t *testing.T, e *env, got *handled, tok bson.D) {
	t.Helper()
	r := e.startRuntime(nil)
	r.waitRunning(t, r.spawn(t, watchtree.Stream[Order]{Name: "ct", Collection: "orders",
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1}, OnInsert: got.handler()}))
	e.insertOrders("orders", 1, 5)
	waitOrders(t, got, 5)
	r.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := e.db.Collection("_wt_checkpoints").UpdateOne(ctx, bson.D{{Key: "_id", Value: checkpointID("ct", defaultInstanceName())}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: tok}}}})
	if err != nil || res.MatchedCount != 1 {
		t.Fatalf("overwrite the checkpoint's token: %v (matched %d)", err, res.MatchedCount)
	}
}

// A saved resume token that no server can resume from takes the stream's OnHistoryLost path,
// as a token that fell out of the oplog does: under ResumeFromNow the stream records a gap and
// goes on from the current position; under Fail, Spawn fails with ErrHistoryLost. Before, the
// stream crashed terminally whatever the policy.
func TestCorruptSavedTokenTakesTheHistoryPolicy(t *testing.T) {
	for _, ct := range corruptTokens {
		t.Run(ct.name+"/ResumeFromNow", func(t *testing.T) {
			e := newEnv(t)
			got := newHandled()
			saveCorruptToken(t, e, got, ct.token)
			r := e.startRuntime(nil)
			h := r.spawn(t, watchtree.Stream[Order]{Name: "ct", Collection: "orders", OnHistoryLost: watchtree.ResumeFromNow,
				OnInsert: got.handler()})
			r.obs.wait(t, "GapRecorded", ofType[observe.GapRecorded])
			hl := r.obs.wait(t, "HistoryLost", ofType[observe.HistoryLost]).(observe.HistoryLost)
			if !errors.Is(hl.Err, watchtree.ErrHistoryLost) {
				t.Errorf("HistoryLost.Err %v, want ErrHistoryLost", hl.Err)
			}
			waitState(t, h, watchtree.StateRunning)
			e.insertOrders("orders", 6, 8)
			waitFor(t, "orders 6..8 handled", func() bool { d := got.docs(); return d[6] && d[7] && d[8] })
			if gaps := e.gaps("ct"); len(gaps) != 1 || gaps[0].Policy != "resumeFromNow" || gaps[0].Reason == "" {
				t.Errorf("gap records %+v, want one resumeFromNow gap with its reason", gaps)
			}
		})
		t.Run(ct.name+"/Fail", func(t *testing.T) {
			e := newEnv(t)
			got := newHandled()
			saveCorruptToken(t, e, got, ct.token)
			r := e.startRuntime(nil)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_, err := r.rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{Name: "ct", Collection: "orders", Restart: fastRestart,
				OnInsert: got.handler()}))
			if !errors.Is(err, watchtree.ErrHistoryLost) {
				t.Fatalf("Spawn: %v, want an error matching ErrHistoryLost", err)
			}
		})
	}
}
