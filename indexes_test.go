package watchtree

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/watchtree/watchtree/test/mongosim"
)

// TestRegisterDoesNotWaitForIndexes: with the server gone, Spawn and Props of a stream whose
// store has no indexes yet return at once (index creation would block for indexTimeout, 10s,
// on the dead server), and Stop cancels the creation in flight and waits for its goroutine.
// The runtime starts while the server is up; the server is closed before the stream is added.
func TestRegisterDoesNotWaitForIndexes(t *testing.T) {
	for _, how := range []string{"Spawn", "Props"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv, err := mongosim.Start(ctx, mongosim.Options{})
			if err != nil {
				t.Fatalf("mongosim.Start: %v", err)
			}
			client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetHeartbeatInterval(500 * time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// The server is gone: Disconnect waits for server selection until its deadline.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = client.Disconnect(ctx)
			})
			// No Config.Database: Start creates no indexes, so the stream's store has none yet.
			rt, err := New(Config{Client: client, ShutdownTimeout: time.Second,
				Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Start(ctx); err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := srv.Close(); err != nil {
				t.Fatalf("close the server: %v", err)
			}
			// Until the driver notices, an operation may fail fast on a closed connection
			// instead of waiting for a server; wait until server selection blocks.
			waitFor(t, "the driver to see the server down", func() bool {
				pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				return errors.Is(client.Ping(pctx, nil), context.DeadlineExceeded)
			})

			spec := Stream[order]{Name: "down", Database: "shop", Collection: "orders",
				OnChange: func(context.Context, *Event[order]) error { return nil }}
			// Well below indexTimeout: a Spawn that waits for the indexes misses it.
			quick, cancelQuick := context.WithTimeout(ctx, 3*time.Second)
			defer cancelQuick()
			returned := make(chan error, 1)
			go func() {
				var err error
				if how == "Spawn" {
					// Spawn waits for the cursor, which cannot open: bounded by its context.
					sctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					if _, err = rt.Spawn(sctx, spec); errors.Is(err, context.DeadlineExceeded) {
						err = nil
					}
				} else {
					_, err = Props(rt, spec)
				}
				returned <- err
			}()
			select {
			case err := <-returned:
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
			case <-quick.Done():
				t.Fatalf("%s still blocked after 3s with the server down: it waits for index creation", how)
			}

			// The creation was asked for and cannot finish against the dead server.
			if pending := rt.e.StoreSets().IndexesPending(); pending != 1 {
				t.Fatalf("%d index creations queued or in flight, want 1", pending)
			}

			stopped := make(chan error, 1)
			go func() { stopped <- rt.Stop(context.Background()) }()
			select {
			case <-stopped: // an error is expected: the stream cannot flush to a dead server
			case <-quick.Done():
				t.Fatal("Stop still blocked after 3s: it does not cancel the index creation in flight")
			}
			if !rt.e.StoreSets().IndexerDone() {
				t.Fatal("the index goroutine outlived Stop")
			}
		})
	}
}

// TestSpawnCreatesIndexesInTheBackground: with the server up, the indexes of a stream's store
// (a dead-letter collection no runtime indexed yet) appear without any further call.
func TestSpawnCreatesIndexesInTheBackground(t *testing.T) {
	e := newRTEnv(t)
	rt, _ := e.newRuntime(t, nil)
	spec := ordersStream("indexed", newSeen())
	spec.DeadLetter.Collection = "indexed_dead_letters" // not the one Start indexed
	if _, err := Props(rt, spec); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	waitFor(t, "the dead-letter indexes", func() bool {
		specs, err := e.coll("indexed_dead_letters").Indexes().ListSpecifications(ctx)
		if err != nil {
			return false
		}
		names := map[string]bool{}
		for _, s := range specs {
			names[s.Name] = true
		}
		return names["expiresAt_ttl"] && names["stream_1_instance_1_createdAt_1"]
	})
}
