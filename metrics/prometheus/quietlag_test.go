package prometheus_test

import (
	"context"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe/observetest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestQuietStreamLagAndHeadroom: a quiet, caught-up stream in a database whose other collection
// is written every 20ms (each batch of their shared cursor ends with the other collection's
// event) spawned 2 s into that load, scrapes under 2 s of lag 3.5 s later, and its token headroom is its
// checkpoint's cluster time minus the oldest oplog entry's, read here from local.oplog.rs
// independently of the adapter. Runs on mongosim, or on WATCHTREE_MONGODB_URI's replica set.
func TestQuietStreamLagAndHeadroom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*observetest.Wait)
	defer cancel()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		uri = srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	db := "wt_prom_quiet_" + time.Now().Format("150405.000000")[7:]
	t.Cleanup(func() {
		_ = client.Database(db).Drop(context.Background())
		_ = client.Disconnect(context.Background())
	})
	rt, reg := startAttached(t, ctx, watchtree.Config{Client: client, Database: db})
	var mu sync.Mutex
	busyHandled := 0
	writeErr := make(chan error, 1) // the busy writer's failure
	spawn := func(s watchtree.Stream[Pay]) {
		h, err := rt.Spawn(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		observetest.WaitFor(t, s.Name+" running", func() bool {
			st, err := h.Status(ctx)
			return err == nil && st.State == watchtree.StateRunning
		})
	}
	busyAt := func(n int) func() bool {
		return func() bool {
			select {
			case err := <-writeErr:
				t.Fatalf("busy writer: %v", err)
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			return busyHandled >= n
		}
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); ; id++ {
			if _, err := client.Database(db).Collection("busy").InsertOne(wctx, Pay{ID: id}); err != nil {
				if wctx.Err() == nil {
					writeErr <- err
				}
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		stop()
		wg.Wait()
	}()
	spawn(watchtree.Stream[Pay]{Name: "busy", Collection: "busy", OnInsert: func(context.Context, *watchtree.Event[Pay]) error {
		mu.Lock()
		busyHandled++
		mu.Unlock()
		return nil
	}})

	// The quiet stream starts 2 s into the load, so its first checkpoint is that far past the
	// oldest oplog entry; then 3.5 s more of load.
	observetest.WaitFor(t, "100 busy events handled (2 s of load)", busyAt(100))
	spawn(watchtree.Stream[Pay]{Name: "quiet", Collection: "quiet", OnInsert: func(context.Context, *watchtree.Event[Pay]) error { return nil }})
	observetest.WaitFor(t, "175 more busy events handled (3.5 s of load)", busyAt(275))

	quiet := map[string]string{"stream": "quiet"}
	fams := scrape(t, reg)
	if lag, ok := value(fams, "watchtree_stream_lag_seconds", quiet); !ok || lag >= 2 {
		t.Errorf("watchtree_stream_lag_seconds{stream=quiet} = %v (present %v), want < 2 for a caught-up stream", lag, ok)
	}

	// The headroom, computed here from what it is made of: the checkpoint's cluster time and the
	// oldest oplog entry. Both are cluster times, so the two readings agree unless the
	// checkpoint moved in between (read again until they do).
	var oldest struct {
		TS bson.Timestamp `bson:"ts"`
	}
	err = client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "$natural", Value: 1}})).Decode(&oldest)
	if err != nil {
		t.Fatalf("the oldest oplog entry: %v", err)
	}
	var got, want float64
	observetest.WaitFor(t, "the headroom of the checkpoint", func() bool {
		st, err := rt.Streams(ctx)
		if err != nil {
			return false
		}
		var at time.Time
		for _, s := range st {
			if s.Name == "quiet" {
				at, _ = watchtree.TokenClusterTime(s.Checkpoint)
			}
		}
		var ok bool
		got, ok = value(scrape(t, reg), "watchtree_token_headroom_seconds", quiet)
		if !ok || at.IsZero() {
			return false
		}
		want = at.Sub(time.Unix(int64(oldest.TS.T), 0)).Seconds()
		return math.Abs(got-want) < 1
	})
	if want < 1 {
		t.Errorf("headroom %v s, want at least 1: the quiet stream started 2 s of writes after the oldest oplog entry", want)
	}
}
