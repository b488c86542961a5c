package observetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/test/mongosim"
)

// Wait bounds every wait of Run and WaitFor (20s): what has not happened by then fails the test.
const Wait = 20 * time.Second

// appName is the scenario client's application name, which its fail point targets.
const appName = "watchtree-observetest"

// Order is the scenario's document.
type Order struct {
	// ID is the document's _id; the scenario numbers its orders from 1.
	ID int64 `bson:"_id"`
	// Traceparent is the W3C trace context of the request that wrote the order ("" for none),
	// for a tracer that links the handler's span to the writer's.
	Traceparent string `bson:"traceparent,omitempty"`
}

// Options are the exporter under test and its hooks into the scenario. Only Observer is
// required.
type Options struct {
	// Observer receives the runtime's events (Config.Observer): the exporter under test.
	Observer observe.Observer
	// Attach attaches the exporter to the started runtime (its Attach method) before any stream
	// spawns; nil: nothing to attach. Its error fails the test.
	Attach func(*watchtree.Runtime) error
	// InstanceID is the runtime's Config.InstanceID; "" for the runtime's default.
	InstanceID string
	// Traceparent is order 1's Order.Traceparent; "" for none.
	Traceparent string
	// OnHandle, when set, is called at the start of every handler call of stream "pay", with the
	// handler's context and event.
	OnHandle func(ctx context.Context, ev *watchtree.Event[Order])
	// WhileLeading, when set, is called while stream "lead" holds its lease, before it stops.
	WhileLeading func()
}

// Scenario is a finished Run.
type Scenario struct {
	// Runtime is still running; it stops when the test ends.
	Runtime *watchtree.Runtime
	// Client is the runtime's client, on Database; it disconnects when the test ends.
	Client   *mongo.Client
	Database string
	// Pay is stream "pay", running again after its restart.
	Pay *watchtree.Handle
}

// Run runs a real runtime with o.Observer on a mongosim started for the test (or on the replica
// set of WATCHTREE_MONGODB_URI when set) and a database of its own, through:
//
//  1. a retry and a dead letter: stream "pay" (collection "pay", a Dedicated cursor, Retry of 2
//     attempts 5ms apart, Restart 10ms) gets orders 1 and 2; order 1 fails its first call with
//     "payment refused" and is handled by its second, order 2 fails both and is dead-lettered
//     (4 handler calls, 3 failed, 2 retries);
//  2. a restart: the next getMore of the runtime's client fails with HostUnreachable (code 6,
//     no labels), so "pay" crashes (not terminal) and restarts once;
//  3. a leader change: stream "lead" (SingleLeader, collection "lead") acquires its lease and
//     is stopped gracefully, which releases it.
//
// Run waits (at most Wait each) until the stream's status shows each step: it does not wait
// for the exporter, whose events arrive asynchronously, so a test polls its own output with
// WaitFor. Any failure fails t.
func Run(t *testing.T, o Options) *Scenario {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*Wait)
	defer cancel()
	client, db := connect(t, ctx)
	rt, err := watchtree.New(watchtree.Config{Client: client, Database: db, Observer: o.Observer, InstanceID: o.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	if o.Attach != nil {
		if err := o.Attach(rt); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	calls := map[int64]int{}
	pay, err := rt.Spawn(ctx, watchtree.Stream[Order]{Name: "pay", Collection: "pay",
		// A cursor of its own: step 2 kills it to see a restart (a shared cursor's death
		// detaches the stream instead, with no restart).
		Cursor:  watchtree.Dedicated,
		Retry:   watchtree.RetryPolicy{MaxAttempts: 2, InitialDelay: 5 * time.Millisecond},
		Restart: watchtree.RestartPolicy{InitialDelay: 10 * time.Millisecond},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			if o.OnHandle != nil {
				o.OnHandle(ctx, ev)
			}
			mu.Lock()
			defer mu.Unlock()
			id := ev.FullDocument.ID
			calls[id]++
			if id == 2 || (id == 1 && calls[1] == 1) {
				return errors.New("payment refused")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ord := range []Order{{ID: 1, Traceparent: o.Traceparent}, {ID: 2}} {
		if _, err := client.Database(db).Collection("pay").InsertOne(ctx, ord); err != nil {
			t.Fatal(err)
		}
	}
	WaitFor(t, "one order handled, one dead-lettered", func() bool {
		st, err := pay.Status(ctx)
		return err == nil && st.Handled == 1 && st.DeadLettered == 1
	})

	fp := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 6},
			{Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: appName}}}}
	if err := client.Database("admin").RunCommand(ctx, fp).Err(); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the restart", func() bool {
		st, err := pay.Status(ctx)
		return err == nil && st.Restarts == 1 && st.State == watchtree.StateRunning
	})

	lead, err := rt.Spawn(ctx, watchtree.Stream[Order]{Name: "lead", Collection: "lead", Mode: watchtree.SingleLeader,
		OnInsert: func(context.Context, *watchtree.Event[Order]) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the lease acquired", func() bool {
		st, err := lead.Status(ctx)
		return err == nil && st.Lease != nil && st.Lease.Role == watchtree.RoleLeader
	})
	if o.WhileLeading != nil {
		o.WhileLeading()
	}
	if err := lead.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return &Scenario{Runtime: rt, Client: client, Database: db, Pay: pay}
}

// connect returns a client (application name appName) on a mongosim started for the test, or
// on WATCHTREE_MONGODB_URI's replica set when set, and a database name of the test's own. When
// the test ends the database is dropped, the client disconnects and the mongosim closes.
func connect(t *testing.T, ctx context.Context) (*mongo.Client, string) {
	t.Helper()
	uri := os.Getenv("WATCHTREE_MONGODB_URI")
	if uri == "" {
		srv, err := mongosim.Start(ctx, mongosim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		uri = srv.URI()
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName(appName))
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	db := "wt_observetest_" + hex.EncodeToString(suffix)
	t.Cleanup(func() {
		_ = client.Database(db).Drop(context.Background())
		_ = client.Disconnect(context.Background())
	})
	return client, db
}

// WaitFor polls cond every 10ms until it holds, and fails t naming what after Wait.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
