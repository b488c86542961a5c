package mongosim

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestCursorIdleTimeoutClosesAbandonedCursors(t *testing.T) {
	clock := &ttlClock{now: time.Now()}
	advance := func(d time.Duration) { clock.Set(clock.Now().Add(d)) }
	srv, cl := startServer(t, Options{Now: clock.Now, CursorTimeout: 10 * time.Minute})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	open := func() *mongo.Cursor {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
		if err != nil {
			t.Fatal(err)
		}
		if !cur.Next(ctx) {
			t.Fatalf("first document: %v", cur.Err())
		}
		return cur
	}
	stale := open()
	defer stale.Close(ctx)
	fresh := open()
	defer fresh.Close(ctx)

	// Used 9 minutes ago: not idle long enough. Creating a cursor runs the reaper.
	advance(9 * time.Minute)
	if !fresh.Next(ctx) { // a getMore refreshes fresh's idle time
		t.Fatalf("fresh getMore: %v", fresh.Err())
	}
	advance(2 * time.Minute) // stale: 11 minutes idle, fresh: 2 minutes
	third := open()
	defer third.Close(ctx)

	if stale.Next(ctx) {
		t.Fatal("a getMore on a cursor idle for 11 minutes succeeded; want CursorNotFound")
	}
	var se mongo.ServerError
	if err := stale.Err(); !errors.As(err, &se) || !se.HasErrorCode(codeCursorNotFound) {
		t.Fatalf("stale cursor error = %v, want CursorNotFound (43)", err)
	}
	if !fresh.Next(ctx) {
		t.Fatalf("a cursor idle for 2 minutes was closed: %v", fresh.Err())
	}
	_ = srv
}

func TestCursorKillWhileGetMoreReadsIsSafe(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("db").Collection("k")
	docs := make([]any, 500)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Many cursors killed by a second client while their owners read them: the race detector
	// checks that closing a static cursor does not touch what a getMore reads.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
			if err != nil {
				t.Error(err)
				return
			}
			defer cur.Close(ctx)
			for cur.Next(ctx) {
			}
		}()
	}
	killer := connectClient(t, srv, nil)
	for i := 0; i < 50; i++ {
		var st bson.M
		_ = killer.Database("admin").RunCommand(ctx, bson.D{{Key: "killAllSessions", Value: bson.A{}}}).Decode(&st)
	}
	wg.Wait()
}
