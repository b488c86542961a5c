package watchtree

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestOplogWindow: the oplog window is read from local.oplog.rs (mongosim serves it as a server
// does): its newest entry is at least as new as a write just made, and no older than its oldest.
func TestOplogWindow(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	ctx := testCtx(t)
	before := time.Now().Truncate(time.Second)
	if _, err := e.client.Database(e.db).Collection("oplogwin").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	oldest, newest, err := rt.OplogWindow(ctx)
	if err != nil {
		t.Fatalf("OplogWindow: %v", err)
	}
	if oldest.IsZero() || newest.Before(oldest) || newest.Before(before) {
		t.Fatalf("OplogWindow = [%v, %v], want oldest ≤ newest and newest ≥ the insert's second %v", oldest, newest, before)
	}
	if _, _, err := rt.OplogWindow(canceled()); err == nil {
		t.Fatal("OplogWindow with a cancelled context succeeded")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
