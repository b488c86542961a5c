package integration_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/test/mongosim"
)

// TestNoGoroutineSurvivesStop: a runtime with several busy streams (lanes, retries, a dead
// letter, a held handler cancelled by the stop) leaves no goroutine behind once Stop returned,
// the client is disconnected and the server closed. (TestMain checks the whole binary too; this
// pins it to one runtime's lifetime.)
func TestNoGoroutineSurvivesStop(t *testing.T) {
	before := goleak.IgnoreCurrent()
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		uri := envURIOrSim(t, ctx)
		defer uri.close()
		cl, err := mongo.Connect(options.Client().ApplyURI(uri.uri).SetHeartbeatInterval(500 * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cl.Disconnect(context.Background()) }()
		db := dbNameFor(t.Name())
		defer func() {
			if uri.srv == nil {
				_ = cl.Database(db).Drop(context.Background())
			}
		}()
		rt, err := watchtree.New(watchtree.Config{Client: cl, Database: db, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string]*handled{"a": newHandled(), "b": newHandled(), "c": newHandled()}
		held := make(chan struct{})
		for i, name := range []string{"a", "b", "c"} {
			_, err := rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{Name: "leak-" + name, Collection: "orders", Lanes: 1 + 3*i,
				Retry: quickRetry,
				OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
					switch {
					case ev.FullDocument.Poison:
						panic("poison")
					case ev.FullDocument.ID == 7 && name == "c":
						close(held)
						<-ctx.Done() // held until the stop cancels it
						return ctx.Err()
					}
					got[name].record(ev)
					return nil
				}}))
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "three streams running", func() bool {
			n := 0
			sts, _ := rt.Streams(ctx)
			for _, st := range sts {
				if st.State == watchtree.StateRunning {
					n++
				}
			}
			return n == 3
		})
		orders := cl.Database(db).Collection("orders")
		for i := int64(1); i <= 30; i++ {
			if _, err := orders.InsertOne(ctx, Order{ID: i, Poison: i == 3}); err != nil {
				t.Fatal(err)
			}
		}
		<-held
		waitFor(t, "stream a and b done", func() bool { return got["a"].distinct() == 29 && got["b"].distinct() == 29 })
		stopCtx, cancelStop := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancelStop()
		_ = rt.Stop(stopCtx) // cut short by the held handler: an error is expected, no leak is allowed
	}()
	goleak.VerifyNone(t, before)
}

// simOrURI is a deployment for a test that manages its own lifetimes.
type simOrURI struct {
	uri string
	srv *mongosim.Server
}

func (s simOrURI) close() {
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// envURIOrSim returns the real deployment of envURI, or a fresh mongosim server.
func envURIOrSim(t *testing.T, ctx context.Context) simOrURI {
	t.Helper()
	if u := os.Getenv(envURI); u != "" {
		return simOrURI{uri: u}
	}
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return simOrURI{uri: srv.URI(), srv: srv}
}
